"""A GPU user's first hour (issue 'A GPU user's first hour'), on this CPU machine: the node is a stand-in, torch answering
as a node of one or several H100s would. Each refusal is one line, before any file of the run is written."""
import dataclasses, subprocess, sys
from types import SimpleNamespace

import pytest

from conftest import ROOT

H100 = 'NVIDIA H100 80GB HBM3'
H100_BYTES = 81559 * 2 ** 20  # nvidia-smi's 81,559 MiB


@pytest.fixture
def node(monkeypatch):
    "A function that makes torch answer as a node of `n` H100s would (names, capacities, counts)."
    import torch
    def gpus(n:int):
        monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
        monkeypatch.setattr(torch.cuda, 'device_count', lambda: n)
        monkeypatch.setattr(torch.cuda, 'get_device_name', lambda i=0: H100)
        monkeypatch.setattr(torch.cuda, 'get_device_properties', lambda i=0: SimpleNamespace(total_memory=H100_BYTES))
    return gpus


def test_the_paper_preset_without_a_gpu_is_refused_before_any_work(tmp_path):
    "This machine (a CPU build of torch): -p preset paper names the reason and only the fixes that apply; nothing is written."
    import torch
    if torch.cuda.is_available(): pytest.skip('a GPU is visible here')
    out = tmp_path/'q8'
    res = subprocess.run([sys.executable, '-m', 'caopd.train', '--model', 'Qwen3-8B', '--preset', 'paper', '--out', str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr[-3000:]
    assert all(s in res.stderr for s in ("preset='paper'", 'is a CPU build', 'install a CUDA build of torch', '--preset cpu',
                                         '--dry_run true')), res.stderr
    assert 'accelerate launch' not in res.stderr and not out.exists()


def test_the_plan_reads_the_overrides_its_fixes_name(node):
    "Following the plan's own advice moves the plan: bf16 weights, a smaller vLLM share, sleep mode, set as trainer_overrides."
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.memory import run_memory_plan
    node(1)
    def total(overrides=None):
        run = RunArguments(model='Qwen3-8B', preset='paper', lora_r=64, dry_run=True, trainer_overrides=overrides)
        return run_memory_plan(resolve_settings(run)).total
    base = total()
    assert total({'model_init_kwargs': {'dtype': 'bfloat16'}}) < base - 10  # 8B weights and teacher: 2 bytes, not 4
    assert total({'vllm_gpu_memory_utilization': 0.1}) < base - 10  # 0.3 -> 0.1 of an 80 GB card
    assert total({'vllm_enable_sleep_mode': True}) < base


def test_refusals_offer_only_what_the_node_has(node, capsys):
    "On one H100 the 8B refusal offers no second GPU, and two processes are refused: rank 1 would ask for a cuda:1 that is not there."
    from caopd.cli import Refusal
    from caopd.memory import MemoryPlanError
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.memory import check_plan
    node(1)
    settings = resolve_settings(RunArguments(model='Qwen3-8B', use_vllm=False))
    with pytest.raises(MemoryPlanError) as e: check_plan(settings)
    assert f'on 1 x {H100}' in str(e.value) and 'GPUs with FSDP2' not in str(e.value), str(e.value)
    with pytest.raises(Refusal, match=r'num_processes=2 but this node has 1 GPU'):
        resolve_settings(RunArguments(model='Qwen3-8B', use_vllm=False, num_processes=2, lora_r=16))
    assert 'vLLM rollouts (use_vllm=True' in str(e.value)  # transformers' generate holds the step's KV caches at once
    node(8)  # where there are more, they are offered
    with pytest.raises(MemoryPlanError) as e: check_plan(resolve_settings(RunArguments(model='Qwen3-8B', num_processes=1, dry_run=True)))
    assert 'GPUs with FSDP2 (num_processes=' in str(e.value)


def test_the_notebook_checks_the_plan_before_any_evaluation(tmp_path):
    "nbs/train.ipynb stops at its settings cell when the plan cannot fit: no warm-up, no 'before' evaluation, no run folder."
    import papermill as pm
    out = tmp_path/'run'
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(ROOT/'nbs'/'train.ipynb'), str(tmp_path/'train.ipynb'), cwd=str(ROOT), kernel_name='python3',
                            parameters=dict(max_completion_length=400000, per_device_train_batch_size=16, out=str(out),
                                            png=False), progress_bar=False)
    assert e.value.ename == 'MemoryPlanError' and 'It would fit with' in e.value.evalue, e.value.evalue
    assert not out.exists()


def test_server_mode_takes_gpus_of_its_own(node, monkeypatch):
    "vllm_mode='server': refused on one GPU; on four, the server gets the last (with the hub id) and training the others."
    import shlex
    from caopd.cli import Refusal
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.launch import launch_command, server_command
    node(1)
    with pytest.raises(Refusal, match=r"vllm_mode='server' runs vLLM on GPUs of its own \(1\) .* this node has 1 GPU"):
        resolve_settings(RunArguments(model='Qwen3-8B', vllm_mode='server', dry_run=True))
    node(4)
    run = RunArguments(model='Qwen3-8B', vllm_mode='server', prompts_per_step=24, dry_run=True)  # 24 x 8 over 3 processes
    s = resolve_settings(run)
    assert (s.world_size, s.training_gpus, s.server_gpus) == (3, [0, 1, 2], [3])
    server, train = shlex.join(server_command(s)), shlex.join(launch_command(s, 'runs/x/settings.json'))
    assert server.startswith('env CUDA_VISIBLE_DEVICES=3 trl vllm-serve --model Qwen/Qwen3-8B --tensor_parallel_size 1 ')
    assert train.startswith('env CUDA_VISIBLE_DEVICES=0,1,2 accelerate launch ') and '--num_processes 3' in train
    import importlib.util
    find = importlib.util.find_spec  # vLLM as if installed: the GPU count is what is refused
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: object() if name == 'vllm' else find(name, *a))
    with pytest.raises(Refusal, match='need 5 GPUs'):
        resolve_settings(RunArguments(model='Qwen3-8B', vllm_mode='server', num_processes=4))
    # the training GPUs hold no rollout generation: the server makes them (the plan used to count transformers' KV
    # caches for a whole step there, 180 GiB, and refused the paper's run in server mode on four H200s)
    from caopd.memory import run_memory_plan
    plan = run_memory_plan(resolve_settings(dataclasses.replace(run, dry_run=False)))
    assert plan.parts['generation'] == 0 and plan.parts['vllm'] == 0, plan.summary()


def test_the_vllm_server_runs_for_the_block_only(monkeypatch, tmp_path):
    "The notebook's server: started before training, its output kept, stopped (its whole process group) after."
    import os, caopd.launch as T
    monkeypatch.setattr(T, 'server_command', lambda settings: [sys.executable, '-c', 'import time; print("serving", flush=True); time.sleep(120)'])
    with T.vllm_server({}, tmp_path/'server.log') as proc:
        import time
        # until it serves or exits (it sleeps 120 s after serving): no deadline of ours that a busy machine could miss
        while proc.poll() is None and 'serving' not in (tmp_path/'server.log').read_text(): time.sleep(0.1)
        assert proc.poll() is None and 'serving' in (tmp_path/'server.log').read_text()
    assert proc.poll() is not None
    with pytest.raises(ProcessLookupError): os.killpg(proc.pid, 0)


def test_the_plan_reads_the_gpus_memory_from_the_device(monkeypatch, node):
    "An A100 of 40 GB is planned as 40 GB (its name alone used to plan it as the 80 GB one)."
    import torch
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.memory import run_memory_plan
    node(1)
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda i=0: 'NVIDIA A100-SXM4-40GB')
    monkeypatch.setattr(torch.cuda, 'get_device_properties', lambda i=0: SimpleNamespace(total_memory=40 * 2 ** 30))
    plan = run_memory_plan(resolve_settings(RunArguments(model='Qwen3-0.6B', dry_run=True)))
    assert plan.capacity == pytest.approx(40.0) and 'per NVIDIA A100-SXM4-40GB' in plan.summary()
