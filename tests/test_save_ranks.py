"""Saving across ranks: `caopd.train.save_trained` and the EMA teacher's checkpoint complete with two processes and
save what one process saves. tests/save_ranks_run.py says which path (MULTI_CPU, or FSDP2 `fully_shard` on gloo)
each part exercises: transformers' Trainer never shards on CPU, so the sharded parts shard the model themselves."""
import json, os, subprocess, sys, warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT
from trainer_helpers import U, reorder_bound, tiny_model_dir

pytestmark = pytest.mark.slow  # starts torchrun processes: not in the quick loop (README, "Working on caopd")

SCRIPT = ROOT/'tests'/'save_ranks_run.py'


def _run(cmd):
    # one thread per process in both runs, as torchrun gives its workers: a row's own sums (hidden size, vocabulary,
    # keys) are then added in the same order by both, and only the sums over the batch differ (`_trained_bound`)
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, f'{cmd} failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}'


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('save_ranks')
    model = tiny_model_dir(tmp/'model')
    torchrun = Path(sys.executable).parent/'torchrun'
    _run([sys.executable, str(SCRIPT), model, str(tmp/'one')])
    _run([str(torchrun), '--standalone', '--nproc_per_node', '2', str(SCRIPT), model, str(tmp/'two'), '--reference',
          str(tmp/'one')])  # --standalone: torchrun takes a free port itself
    return tmp/'one', tmp/'two'


def _weights(path:Path) -> dict:
    from safetensors.torch import load_file
    return load_file(str(path))


def _max_diff(a:dict, b:dict) -> float:
    assert set(a) == set(b), sorted(set(a) ^ set(b))
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


CKPT, ADAPTER = 'checkpoint/model.safetensors', 'adapter/adapter_model.safetensors'


def test_every_rank_finished(runs):
    one, two = runs
    assert [p.read_text() for p in sorted(two.glob('done-rank*'))] == ['2', '2']
    assert (one/'done-rank0').read_text() == '1'


@pytest.mark.parametrize('name', ['full', 'lora'])
def test_multi_cpu_save_is_the_one_process_save(runs, name):
    "MULTI_CPU (weights whole on each rank): the saved model, merged from the saved adapter with LoRA, is bit for bit the one-process save."
    one, two = runs
    assert _max_diff(_weights(one/name/CKPT), _weights(two/name/CKPT)) == 0
    if name == 'lora': assert _max_diff(_weights(one/name/ADAPTER), _weights(two/name/ADAPTER)) == 0
    assert (two/name/'checkpoint'/'tokenizer.json').is_file()


@pytest.mark.parametrize('name', ['full', 'lora'])
def test_fully_shard_save_is_the_one_process_save(runs, name):
    "FSDP2 (`fully_shard` on gloo, 2 ranks): every rank gathers, rank 0 writes; the same files as one unsharded process."
    one, two = runs
    assert _max_diff(_weights(one/name/CKPT), _weights(two/f'{name}_sharded'/CKPT)) == 0
    if name == 'lora':
        assert _max_diff(_weights(one/name/ADAPTER), _weights(two/f'{name}_sharded'/ADAPTER)) == 0
        merged = _weights(two/f'{name}_sharded'/CKPT)
        assert not any('lora' in k for k in merged)  # a plain model
        assert _max_diff(merged, _weights(one/'full'/CKPT)) > 1e-2  # and the adapter was merged into it


def _trained_bound(one:Path, two:Path) -> float:
    """How far apart the one- and two-process adapters can be after their SGD steps. Each step's gradient is the same sum
    over the batch's positions (rows x padded length: n) in another order (one batch against DDP's two halves and an
    all-reduce), so it is apart by at most b ||g|| (`reorder_bound(n)`, terms of one sign), and the step, lr x gradient,
    by b lr ||g||. A later step's gradient is taken at weights the earlier steps left apart: it moves by at most
    ||H|| times that, and a step that does not diverge has lr ||H|| <= 2, so each earlier step's rounding comes back at
    most twice more: (2 steps - 1) b sum_k lr ||g_k|| bounds every entry (||g|| >= max|g|)."""
    seen = [json.loads(p.read_text()) for d in (one, two) for p in sorted(d.glob('trained-rank*.json'))]
    n = seen[0]['rows'] * max(L for s in seen for L in s['lengths'])
    lr, norms = seen[0]['learning_rate'], seen[0]['grad_norms']  # rank 0 logs the synced (global) gradient's norm
    return (2 * len(norms) - 1) * reorder_bound(n) * sum(lr * g for g in norms)


def _merged_bound(one:Path, d_adapter:dict) -> float:
    """How far apart two merged models can be whose adapters are `d_adapter` apart (max |difference| of the A's and of
    the B's). `caopd.train.merge_adapter` loads the saved adapter: merged = W + s (B A), a sum of r products per entry,
    so s r (dB max|A| + max|B| dA + dB dA), plus each run's own rounding of the r products and their sum (r U each,
    gamma_r), of the scaling by s (U) and of the sum with W (U max|merged|)."""
    cfg = json.loads((one/'trained'/'adapter'/'adapter_config.json').read_text())
    r = cfg['r']
    s = cfg['lora_alpha'] / (r ** 0.5 if cfg.get('use_rslora') else r)
    a = _weights(one/'trained'/ADAPTER)
    big = lambda part: max(v.abs().max().item() for k, v in a.items() if part in k)
    A, B, dA, dB = big('lora_A'), big('lora_B'), d_adapter['lora_A'], d_adapter['lora_B']
    merged = max(v.abs().max().item() for v in _weights(one/'trained'/CKPT).values())
    return s * r * (dB * A + B * dA + dB * dA) + 2 * (s * r * (r + 1) * U * A * B + U * merged)


def test_trained_lora_saves_the_same_on_two_processes(runs):
    "MULTI_CPU with the real trainer: LoRA trained 2 steps by DDP saves the adapter and merged model the one process saves."
    one, two = runs
    a1, a2 = _weights(one/'trained'/ADAPTER), _weights(two/'trained'/ADAPTER)
    d = {part: _max_diff({k: v for k, v in a1.items() if part in k}, {k: v for k, v in a2.items() if part in k})
         for part in ('lora_A', 'lora_B')}
    tol = _trained_bound(one, two)
    assert max(d.values()) <= tol, (d, tol)  # summation order only: 4.3e-6 here, against a bound of 3.2e-3
    merged = _max_diff(_weights(one/'trained'/CKPT), _weights(two/'trained'/CKPT))
    assert merged <= _merged_bound(one, d), (merged, _merged_bound(one, d))  # 1.8e-5 here: it follows the adapters
    assert _max_diff(a1, _weights(one/'lora'/ADAPTER)) > 10 * tol  # it trained (same init), far beyond the bound
    cfg = json.loads((two/'trained'/'adapter'/'adapter_config.json').read_text())
    assert cfg['r'] == 2 and not any('lora' in k for k in _weights(two/'trained'/CKPT))


def test_sharded_teacher_survives_save_and_reload(runs):
    "FSDP2 teacher (root `fully_shard`, 2 ranks): its file is the one-process file; loaded into a sharded teacher, it is restored."
    one, two = runs
    whole = _weights(one/'teacher'/'whole.safetensors')
    assert _max_diff(_weights(two/'teacher'/'sharded.safetensors'), whole) == 0  # same keys (one of a tied pair), same values
    assert _max_diff(_weights(two/'teacher'/'before.safetensors'), whole) > 1e-2  # the control: other weights before
    assert _max_diff(_weights(two/'teacher'/'reloaded.safetensors'), whole) == 0


def _stub(kind='ema', fsdp_version=None, deepspeed=False):
    "The attributes of a trainer `EMATeacherCheckpoints._ema_teacher` reads."
    import torch
    from caopd.trainer import EMATeacherCheckpoints
    plugin = None if fsdp_version is None else SimpleNamespace(fsdp_version=fsdp_version)
    stub = SimpleNamespace(args=SimpleNamespace(teacher_model_kind=kind), model=torch.nn.Linear(1, 1),
                           teacher_model=torch.nn.Linear(1, 1), is_deepspeed_enabled=deepspeed,
                           is_fsdp_enabled=fsdp_version is not None,
                           accelerator=SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin), unwrap_model=lambda m: m))
    return lambda: EMATeacherCheckpoints._ema_teacher(stub), stub


def test_which_teachers_are_checkpointed():
    "One process, DDP and FSDP2 checkpoint the teacher; DeepSpeed and FSDP1 say they do not; live/base have none."
    for fsdp in (None, 2):
        teacher, stub = _stub(fsdp_version=fsdp)
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            assert teacher() is stub.teacher_model
    for kw in (dict(fsdp_version=1), dict(deepspeed=True)):
        teacher, _ = _stub(**kw)
        with pytest.warns(UserWarning, match='FSDP2'): assert teacher() is None
    assert _stub(kind='base')[0]() is None
