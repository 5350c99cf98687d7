"""What a GPU run met once and must never do silently (issue 'Runs that never break silently on a GPU'): a NaN gradient
applied, a NaN model saved or evaluated, cuDNN's NaN-prone attention kernel left on; and bfloat16, the GPU's dtype, run
here on CPU. The NaN is injected into a tiny model's real training run, after its backward pass."""
import json, subprocess, sys
from pathlib import Path

import pytest

from conftest import ROOT
from trainer_helpers import tiny_model_dir

TINY = ['--preset', 'cpu', '--K', '2', '--prompts_per_step', '1', '--n_train', '8', '--max_completion_length', '8',
        '--format_warmup', 'off', '--save_steps', '1']

# caopd-train with a NaN written into one gradient after the backward pass of the optimizer steps named in argv[1]
# (comma separated), as the cuDNN kernel of pytorch/pytorch#196678 leaves one; the rest of argv is caopd-train's
NAN_GRADIENT = r'''
import sys
import caopd.baselines as baselines
bad, build = {int(s) for s in sys.argv[1].split(',')}, baselines.build_trainer
def build_with_nan(*args, **kwargs):
    trainer = build(*args, **kwargs)
    inner = trainer.training_step
    def training_step(*a, **k):
        loss = inner(*a, **k)
        if trainer.state.global_step + 1 in bad:
            next(p for p in trainer.model.parameters() if p.grad is not None).grad.view(-1)[0] = float('nan')
        return loss
    trainer.training_step = training_step
    return trainer
baselines.build_trainer = build_with_nan
from caopd.train import main
main(sys.argv[2:])
'''


def _run(args, script=None, timeout=600):
    cmd = [sys.executable, '-c', script, *args] if script else [sys.executable, '-m', 'caopd.train', *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_nan_gradient_step_is_skipped_and_counted(tmp_path):
    "Step 3's gradient holds a NaN: that step changes no weight, is marked in the log and counted in train.json; the model saved is finite."
    import torch
    from safetensors.torch import load_file
    from caopd.runfolder import RunFolder
    out, tiny = tmp_path/'run', tiny_model_dir(tmp_path/'tiny')
    res = _run(['3', '--model', tiny, '--out', str(out), *TINY, '--max_steps', '3'], NAN_GRADIENT)
    assert res.returncode == 0, res.stderr[-4000:]
    folder = RunFolder(out)
    assert folder.read_training()['skipped_steps'] == [3] and folder.read_training()['steps'] == 3
    log = {h['step']: h for h in folder.read_log() if 'loss' in h}
    assert log[3].get('nonfinite_skipped') == 1 and not any(log[s].get('nonfinite_skipped') for s in (1, 2))
    assert 'step 3: the loss or a gradient is not finite' in res.stderr
    weights = lambda d: load_file(str(Path(d)/'model.safetensors'))
    start, two, three, saved = (weights(d) for d in (tiny, out/'trainer'/'checkpoint-2', out/'trainer'/'checkpoint-3',
                                                      folder.checkpoint))
    assert all(torch.equal(two[k], three[k]) and torch.equal(three[k], saved[k]) for k in two)  # step 3: no update
    assert not all(torch.equal(start[k], two[k]) for k in two)  # steps 1-2 trained
    assert all(bool(t.isfinite().all()) for t in saved.values())


@pytest.mark.slow
def test_nan_steps_in_a_row_stop_the_run_keeping_the_last_good_checkpoint(tmp_path):
    "Three NaN steps in a row: one line, exit status 2, no trained model written; the checkpoints hold finite weights."
    from safetensors.torch import load_file
    out = tmp_path/'run'
    res = _run(['2,3,4', '--model', tiny_model_dir(tmp_path/'tiny'), '--out', str(out), *TINY, '--max_steps', '6'],
               NAN_GRADIENT)
    assert res.returncode == 2, res.stderr[-4000:]
    [last] = [line for line in res.stderr.splitlines() if line.startswith('caopd-train: error: ')]  # tqdm's bar may follow
    assert last.startswith('caopd-train: error: 3 optimizer steps in a row (steps 2-4)') and 'Traceback' not in res.stderr
    assert 'checkpoint-' in last and not (out/'checkpoint').exists() and not (out/'train.json').exists()
    kept = sorted((out/'trainer').glob('checkpoint-*'))
    assert kept and all(all(bool(t.isfinite().all()) for t in load_file(str(c/'model.safetensors')).values()) for c in kept)


def test_a_training_process_switches_cudnn_sdpa_off_on_an_affected_gpu(tmp_path):
    "With the runtime a GPU of torch 2.13 and cuDNN 9.20 reports, a training process turns cuDNN's SDPA off and records it."
    script = ("import sys, torch, caopd.guards as g\n"
              "g.cuda_runtime = lambda: dict(cuda=True, torch='2.13.0+cu130', cudnn=92000)\n"
              "from caopd.train import main\n"
              "try: main(sys.argv[1:])\n"
              "finally: print('cudnn_sdp_enabled', torch.backends.cuda.cudnn_sdp_enabled())\n")
    out = tmp_path/'run'
    res = _run(['--model', tiny_model_dir(tmp_path/'tiny'), '--out', str(out), *TINY, '--max_steps', '1'], script)
    assert res.returncode == 0, res.stderr[-4000:]
    assert 'cudnn_sdp_enabled False' in res.stdout
    attention = json.loads((out/'settings.json').read_text())['attention']
    assert attention['cudnn_sdpa_switched_off'] and attention['backends']['cudnn'] is False
    assert attention['backends']['flash'] and attention['backends']['mem_efficient']  # the others stay


def test_evaluation_refuses_a_nan_model_before_generating(tmp_path):
    "caopd-evaluate on a checkpoint with a NaN weight: one line naming the file and the tensor, exit 2, nothing written."
    import torch
    from caopd.models import tiny_model
    model, tok = tiny_model(seed=0)
    with torch.no_grad(): model.model.layers[1].mlp.down_proj.weight[0, 0] = float('nan')
    model.save_pretrained(tmp_path/'broken'); tok.save_pretrained(tmp_path/'broken')
    out = tmp_path/'eval'
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluation', '--model', str(tmp_path/'broken'), '--domain', 'arithmetic',
                          '--limit', '2', '--out', str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr[-3000:]
    assert f"{tmp_path/'broken'/'model.safetensors'}: the weight model.layers.1.mlp.down_proj.weight holds NaN" in res.stderr
    assert not (out/'records.jsonl').exists()


@pytest.mark.slow
def test_two_caopd_steps_and_an_evaluation_in_bfloat16_on_cpu(tmp_path):
    "dtype='bfloat16' runs the GPU's numbers here: bf16 mixed precision in training, bf16 weights in the evaluation."
    from caopd.runfolder import RunFolder
    out = tmp_path/'run'
    res = _run(['--model', tiny_model_dir(tmp_path/'tiny'), '--out', str(out), *TINY, '--max_steps', '2', '--dtype', 'bfloat16'])
    assert res.returncode == 0, res.stderr[-4000:]
    folder = RunFolder(out)
    assert folder.read_settings()['dtype'] == 'bfloat16' and folder.read_training()['steps'] == 2
    assert folder.read_training()['skipped_steps'] == []
    ev = subprocess.run([sys.executable, '-m', 'caopd.evaluation', '--model', str(folder.checkpoint), '--domain', 'arithmetic',
                         '--limit', '2', '--max_new_tokens', '8', '--dtype', 'bfloat16', '--out', str(tmp_path/'eval')],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ev.returncode == 0, ev.stderr[-3000:]
    settings = json.loads((tmp_path/'eval'/'report.json').read_text())['settings']
    assert settings['dtype'] == 'bfloat16' and settings['prompts'] == 2


def test_on_a_gpu_box_the_defaults_are_the_demo_and_a_paper_model_the_paper_run(monkeypatch):
    "A GPU-visible stand-in: the README's command resolves to the cpu preset, -p model Qwen3-8B to the paper's."
    import torch
    from caopd.arguments import RunArguments, resolve_settings
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    demo = resolve_settings(RunArguments())
    assert (demo.preset, demo.use_vllm, demo.max_completion_length, demo.dtype) == ('cpu', False, 64, 'bfloat16')
    assert resolve_settings(RunArguments(model='Qwen3-8B', dry_run=True)).preset == 'paper'


def test_the_paper_run_without_vllm_is_refused_before_any_work(tmp_path):
    "A GPU box without vLLM: `-p model Qwen3-8B` stops in one line naming the rebuild and use_vllm False; nothing is written."
    import importlib.util
    if importlib.util.find_spec('vllm') is not None: pytest.skip('vLLM is installed here')
    out = tmp_path/'q8'
    script = ("import sys, torch\n"
              "torch.cuda.is_available = lambda: True; torch.cuda.device_count = lambda: 1\n"
              "from caopd.train import main\nmain(sys.argv[1:])\n")
    res = _run(['--model', 'Qwen3-8B', '--out', str(out)], script, timeout=300)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr[-3000:]
    assert all(s in res.stderr for s in ('vLLM is not installed', 'CAOPD_EXTRAS=vllm', '--use_vllm false'))
    assert not out.exists()
