"The memory plan (caopd.memory): the paper's model table, the plan's arithmetic, refusals that name fixes which fit, the paper grid."
import pytest

from conftest import ROOT
from caopd.memory import (GIB, PAPER_MODELS, PUBLISHED_PARAMS, MemoryPlanError, ModelSpec, check_fits,
                          memory_plan, model_spec, plan_model, suggest_fixes)
from caopd.grid import grid_plans, plans_markdown

Q8 = PAPER_MODELS['Qwen/Qwen3-8B']


@pytest.mark.parametrize('model_id', sorted(PUBLISHED_PARAMS))
def test_table_matches_published_parameter_counts(model_id):
    assert PAPER_MODELS[model_id].n_params == pytest.approx(PUBLISHED_PARAMS[model_id], rel=0.06)


def test_aliases_resolve_to_the_table_or_a_cached_config():
    for alias in ('Qwen3-8B', 'qwen3-32b', 'Olmo-3-7B-Instruct'):
        spec = model_spec(alias)
        assert spec.n_params == pytest.approx(PUBLISHED_PARAMS[[k for k in PAPER_MODELS if k.lower().endswith(alias.lower())][0]], rel=0.06)


def test_one_billion_parameters_by_hand():
    spec = ModelSpec('1B', 1, 1000, 331_000, 1, 1, 1000, 2997, True, False)
    assert spec.n_params == 10 ** 9
    kw = dict(method='grpo', prompt_len=1, completion_len=1, micro_batch=1, use_vllm=False, device='H100')
    plan = memory_plan(spec, **kw)
    # fused AdamW (transformers' default with torch >= 2.8): two moments, no full-size temporary
    assert [plan.parts[k] * GIB for k in ('weights', 'gradients', 'optimizer')] == [4e9, 4e9, 8e9]
    assert memory_plan(spec, optimizer='adamw_foreach', **kw).parts['optimizer'] * GIB == 12e9  # + sqrt(v)
    sharded = memory_plan(spec, n_gpus=4, fsdp=True, **kw)
    assert [sharded.parts[k] * GIB for k in ('weights', 'gradients', 'optimizer')] == [1e9, 1e9, 2e9]
    assert memory_plan(spec, dtype='bfloat16', **kw).parts['weights'] * GIB == 2e9
    assert plan.parts['teacher'] == 0 and memory_plan(spec, **{**kw, 'method': 'sdpo'}).parts['teacher'] * GIB == 4e9


def test_logits_context_nccl_and_host_ram_by_hand():
    "The parts issue 20 added, on the 1e9-parameter model (vocabulary 2,997, one completion token)."
    spec = ModelSpec('1B', 1, 1000, 331_000, 1, 1, 1000, 2997, True, False)
    kw = dict(method='caopd-sdft', prompt_len=1, completion_len=1, micro_batch=1, use_vllm=False, device='H200')
    gpu = memory_plan(spec, **kw)
    assert gpu.parts['logits'] * GIB == 2997 * (3 * 2 + 4)  # three bf16 copies + one fp32 log-sum-exp temporary
    assert memory_plan(spec, **{**kw, 'method': 'grpo'}).parts['logits'] * GIB == 2997 * (2 + 4)
    assert memory_plan(spec, **{**kw, 'device': 'cpu'}).parts['logits'] * GIB == 2997 * 4 * 4  # fp32 on CPU, as before
    assert gpu.parts['cuda_context'] == 0.5 and gpu.parts['nccl'] == 0
    assert memory_plan(spec, n_gpus=2, fsdp=True, **kw).parts['nccl'] * 1024 == 2 * 32 * 1 * 4  # 256 MiB
    assert memory_plan(spec, n_gpus=4, fsdp=True, **kw).parts['nccl'] * 1024 == 2 * 32 * 2 * 4  # 512 MiB
    # host RAM at load: student + EMA teacher in fp32, read by rank 0 only with cpu_ram_efficient_loading
    assert gpu.host * GIB == 2 * 4e9
    assert memory_plan(spec, n_gpus=4, fsdp=True, **kw).host * GIB == 2 * 4e9
    every = memory_plan(spec, n_gpus=4, fsdp=True, cpu_ram_efficient_loading=False, host_ram_gib=20, **kw)
    assert every.host * GIB == 4 * 2 * 4e9 and any('fsdp_cpu_ram_efficient_loading: true' in n for n in every.notes)
    assert not any('host RAM' in n for n in memory_plan(spec, n_gpus=4, fsdp=True, host_ram_gib=20, **kw).notes)


def test_qwen3_8b_on_the_paper_node():
    "Qwen3-8B, CaOPD-SDFT, the paper preset's micro-batch of 1 on 4 x H200: the parts as computed by hand."
    plan = memory_plan(Q8, device='H200', n_gpus=4, fsdp=True, micro_batch=1)
    N = Q8.n_params
    assert plan.parts['weights'] + plan.parts['gradients'] + plan.parts['optimizer'] == pytest.approx(16 * N / 4 / GIB)
    assert plan.parts['logits'] == pytest.approx(8192 * 151936 * 10 / GIB)  # 11.6 GiB
    assert plan.parts['nccl'] + plan.parts['cuda_context'] == pytest.approx(1.0)
    assert plan.host == pytest.approx(8 * N / GIB)  # 61 GiB on the node at load, with the shipped FSDP2 recipe
    # the caching allocator's reserve: a fifth of what is allocated (all but vLLM's own pool and the CUDA context)
    held = plan.total - plan.parts['allocator'] - plan.parts['vllm'] - plan.parts['cuda_context']
    assert plan.parts['allocator'] == pytest.approx(0.2 * held) and plan.parts['generation'] == 0  # vLLM generates
    assert plan.fits and plan.total - plan.parts['allocator'] == pytest.approx(117.8, abs=0.1)  # as before the reserve


def test_lora_keeps_an_adapter_teacher_not_a_model_copy():
    full = memory_plan(Q8, device='H100', micro_batch=1, prompt_len=512, completion_len=512)
    lora = full.replan(lora_r=16)
    assert full.parts['teacher'] == pytest.approx(4 * Q8.n_params / GIB)
    assert lora.parts['teacher'] < 0.02 * full.parts['teacher'] and lora.parts['optimizer'] < 0.02 * full.parts['optimizer']


def test_8b_on_one_80gb_gpu_is_refused_with_fixes_that_fit():
    plan = memory_plan(Q8, device='H100', micro_batch=1, prompt_len=512, completion_len=1024)
    assert not plan.fits
    fixes = suggest_fixes(plan)
    assert fixes and all(p.fits for _, p in fixes)
    with pytest.raises(MemoryPlanError, match='It would fit with') as e:
        check_fits(plan)
    assert e.value.fixes and 'FSDP2' in str(e.value)


def test_gradient_checkpointing_and_shorter_responses_shrink_activations():
    off = memory_plan(Q8, gradient_checkpointing=False, n_gpus=4, fsdp=True)
    on = off.replan(gradient_checkpointing=True)
    assert on.parts['activations'] < off.parts['activations'] / 5
    assert on.replan(completion_len=1024).parts['logits'] == pytest.approx(on.parts['logits'] / 8)


def test_vllm_that_cannot_hold_its_weights_does_not_fit():
    plan = memory_plan(PAPER_MODELS['Qwen/Qwen3-32B'], n_gpus=4, fsdp=True, lora_r=16, micro_batch=1, completion_len=1024)
    assert any('cannot start' in n for n in plan.notes) and not plan.fits
    assert plan.replan(vllm_tensor_parallel_size=2).fits


def test_plan_model_of_the_embedded_model_on_cpu():
    plan = plan_model('smollm2-135m-instruct', device='cpu', K=4, micro_batch=4, prompt_len=350, completion_len=64,
                     verbose=False)
    assert plan.fits and plan.parts['vllm'] == 0 and 2 < plan.total < 6
    with pytest.warns(UserWarning, match='It would fit with'):
        assert not plan_model('Qwen3-8B', device='H100', strict=False, verbose=False).fits


def test_paper_grid_table():
    rows = grid_plans(ROOT / 'nbs' / 'grids' / 'paper.yaml')
    assert {r['model'] for r in rows} >= {'Qwen3-8B', 'Olmo-3-7B-Instruct', 'Qwen3-32B'}
    assert all(r['fits'] or r['fix'] for r in rows)  # every run that does not fit names a fix
    for r in rows:  # and the fixes named are ones that fit
        if not r['fits']:
            assert all(p.fits for _, p in suggest_fixes(r['plan']))
    table = plans_markdown(rows)
    assert table.startswith('| runs | model |') and 'Qwen3-32B' in table
    assert len(plans_markdown(rows, collapse=False).splitlines()) == len(rows) + 2


def test_the_grid_dry_run_prints_each_runs_plan():
    "caopd-runs --dry_run: every run's command, then its plan against the node (32B fits with FSDP2 CPU offload)."
    import subprocess, sys
    res = subprocess.run([sys.executable, '-m', 'caopd.runs', 'nbs/grids/paper.yaml', '--dry_run', '--only', 'scaling-*-Qwen3-32B-*,scaling-*-Qwen3-0.6B-*'],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    runs = [i for i, line in enumerate(lines) if line.startswith('[run] ')]
    assert runs and all(lines[i + 1].strip().startswith('plan on 4 x H200: ') for i in runs)
    plans = {lines[i].split(' runs/paper/')[1].split('/')[0].split(' ')[0]: lines[i + 1] for i in runs}
    assert len(plans) == 4 and all(p.endswith('fits') for n, p in plans.items() if 'Qwen3-0.6B' in n)
    assert all(p.endswith('fits') for n, p in plans.items() if 'Qwen3-32B' in n)


def test_the_plan_is_not_below_the_peak_measured_on_an_h200():
    """The smoke rows of figures/gpu-checks/2026-11-26-h200 (a random Qwen3-shaped 176M model, the paper preset, K = 4,
    2 prompts, 256-token rollouts, gradient checkpointing, vLLM off): nvidia-smi's peak was 5.0 GiB, the plan 4.3 GiB
    before it counted generation and the caching allocator's reserve."""
    import json
    from transformers import Qwen3Config
    from caopd.memory import spec_from_config
    spec = spec_from_config(Qwen3Config(vocab_size=49152, hidden_size=1024, intermediate_size=3072, num_hidden_layers=8,
                                        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                        tie_word_embeddings=True), 'qwen3-176m')
    assert spec.n_params == pytest.approx(176e6, rel=0.01)
    plan = memory_plan(spec, 'caopd-sdft', K=4, completion_len=256, micro_batch=1, gradient_checkpointing=True,
                       device='H200', use_vllm=False, generation_batch=2 * 4)  # 2 prompts x K in one generate()
    rows = json.loads((ROOT/'figures'/'gpu-checks'/'2026-11-26-h200'/'smoke'/'smoke.json').read_text())['rows']
    peak = max(r['peak_gib'] for r in rows if r.get('peak_gib') is not None and r['id'] in ('train', 'resume'))
    assert peak == pytest.approx(5.0, abs=0.05) and plan.total >= peak, (plan.summary(), peak)
