"""Saving across ranks: `caopd.train.save_trained` and the EMA teacher's checkpoint complete with two processes and
save what one process saves. tests/save_ranks_run.py says which path (MULTI_CPU, or FSDP2 `fully_shard` on gloo)
each part exercises: transformers' Trainer never shards on CPU, so the sharded parts shard the model themselves."""
import json, subprocess, sys, warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT
from trainer_helpers import tiny_model_dir

SCRIPT = ROOT/'tests'/'save_ranks_run.py'


def _run(cmd):
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
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


def test_trained_lora_saves_the_same_on_two_processes(runs):
    "MULTI_CPU with the real trainer: LoRA trained 2 steps by DDP saves the adapter and merged model the one process saves."
    one, two = runs
    assert _max_diff(_weights(one/'trained'/ADAPTER), _weights(two/'trained'/ADAPTER)) < 1e-3  # summation order only
    assert _max_diff(_weights(one/'trained'/CKPT), _weights(two/'trained'/CKPT)) < 1e-3
    assert _max_diff(_weights(one/'trained'/ADAPTER), _weights(one/'lora'/ADAPTER)) > 1e-2  # it trained (same init)
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
