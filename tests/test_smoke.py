"caopd-smoke on this machine, as a user runs it: the CPU rows pass, the GPU rows say `not run` with the reason (never pass), and the exit code counts only the rows that ran."
import json, os, shutil, subprocess, sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT

pytestmark = [pytest.mark.slow,  # runs the smoke test in processes of its own: not in the quick loop (README, "Working on caopd")
              pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is visible: the GPU rows would run (minutes)')]


@pytest.fixture(scope='module')
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('smoke')/'out'
    script = shutil.which('caopd-smoke', path=str(Path(sys.executable).parent))  # the console script beside python
    cmd = [script] if script else [sys.executable, '-m', 'caopd.smoke']
    res = subprocess.run([*cmd, '--out', str(out), '--timeout', '240'], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    return out, res


def test_exit_code_and_files(smoke_run):
    out, res = smoke_run
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    for f in ('smoke.md', 'smoke.json', 'smoke.log'): assert (out/f).is_file(), f
    assert '| check | where | status |' in res.stdout and 'GPU path is NOT checked' in res.stdout


def test_cpu_rows_pass_and_gpu_rows_are_not_run(smoke_run):
    from caopd.smoke import ROWS
    out, res = smoke_run
    table = json.loads((out/'smoke.json').read_text())
    rows = {r['id']: r for r in table['rows']}
    assert set(rows) == set(ROWS) and table['gpus'] == 0 and table['exit_code'] == 0
    for k, (_, where) in ROWS.items():
        r = rows[k]
        if where in ('gpu', 'gpus'):  # not run, with the reason, no time: never a pass
            assert r['status'] == 'not run' and r['seconds'] is None, r
            assert r['detail'].startswith('no GPU: ') and table['no_gpu_reason'] in r['detail'], r
        else: assert r['status'] == 'pass' and r['seconds'] is not None, r
    assert rows['resume_cpu']['detail'].startswith('killed after checkpoint-2')
    md = (out/'smoke.md').read_text()
    assert md.count('| not run |') == 6 and md.count('| pass |') == 4 and '## Versions' in md
    # the kill-resume row's runs left their evidence: the killed run's log and a resumed run that finished step 3
    assert '[caopd-smoke] killing the run after checkpoint-2' in (out/'logs'/'resume_cpu-killed.log').read_text()
    assert json.loads((out/'resume_cpu'/'train.json').read_text())['steps'] == 3


def test_a_failing_row_fails_the_command(tmp_path, monkeypatch):
    "A row that ran and failed makes the exit code 1 and the table say what to send back (in-process, no training)."
    import caopd.machine as pf
    from caopd import smoke
    rows = [dict(r, in_range='no') if r['package'] == 'trl' else r for r in pf.version_table()]
    monkeypatch.setattr(pf, 'version_table', lambda status=None: rows)
    monkeypatch.setattr(smoke, 'planned_rows', lambda gpus, rows=smoke.planned_rows: rows(gpus)[:1])  # versions only
    got = smoke.smoke(tmp_path/'out', verbose=False)
    assert [r['status'] for r in got] == ['fail'] and smoke.exit_code(got) == 1
    assert 'out of range: trl' in got[0]['detail']
    assert 'send smoke.md, smoke.json and smoke.log' in (tmp_path/'out'/'smoke.md').read_text()


def test_help_says_what_it_does():
    res = subprocess.run([sys.executable, '-m', 'caopd.smoke', '--help'], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    for s in ('vLLM', 'FSDP2', 'not run', '--out', '--timeout', '--use_vllm', 'Exit code 1', 'nvidia-smi'): assert s in res.stdout, s


# A GPU node on CPU: a stand-in nvidia-smi on PATH answers the queries caopd makes, torch.cuda is told what it sees, and
# each row is a stand-in that records that it ran, so the row plan and the exit code are checked without a GPU.
FAKE_NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *memory.used*) for i in $(seq {n}); do echo 1024; done;;
  *driver_version*) for i in $(seq {n}); do echo {driver}; done;;
  *name*) for i in $(seq {n}); do echo "NVIDIA H200, Disabled"; done;;
  *) exit 9;;
esac
"""

@pytest.fixture
def node(tmp_path, monkeypatch):
    "node(listed, devices, build, driver): nvidia-smi lists `listed` GPUs, torch (CUDA `build`) can use `devices`; the rows that ran, in order."
    from caopd import smoke
    ran = []
    def stand_in(row_id, multi_gpu=False):
        def row(ctx, *args, **kwargs):
            if multi_gpu: smoke._needs_gpus(ctx)  # the rows' own rule: not run on fewer than 2 GPUs
            ran.append(args[0] if args else row_id)  # check_train(ctx, 'train_cpu') is the CPU row
            return dict(detail=f'stand-in, vLLM {"on" if getattr(ctx, "use_vllm", True) else "off"}')
        return row
    for row_id in ('versions', 'vllm_eval', 'train', 'resume', 'save_reload', 'fsdp2_train', 'fsdp2_lora_save'):
        monkeypatch.setattr(smoke, f'check_{row_id}', stand_in(row_id, multi_gpu=row_id.startswith('fsdp2')))
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
    def make(listed, devices, build='13.0', driver='580.95'):
        bin_dir = tmp_path/'bin'
        bin_dir.mkdir(exist_ok=True)
        (bin_dir/'nvidia-smi').write_text(FAKE_NVIDIA_SMI.format(n=listed, driver=driver))
        (bin_dir/'nvidia-smi').chmod(0o755)
        monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(torch.cuda, 'is_available', lambda: devices > 0)
        monkeypatch.setattr(torch.cuda, 'device_count', lambda: devices)
        monkeypatch.setattr(torch.cuda, 'get_device_name', lambda device=None: 'NVIDIA H200')
        monkeypatch.setattr(torch.version, 'cuda', build)
        return ran
    return make


@pytest.mark.parametrize('listed,devices,visible', [(1, 1, None), (2, 2, None), (4, 2, '0,1')])
def test_use_vllm_false_runs_every_gpu_row_that_does_not_need_vllm(node, tmp_path, monkeypatch, listed, devices, visible):
    "As on the H200 without vLLM: versions, train, resume, save_reload (and FSDP2 on 2+ GPUs) run with vLLM off; vllm_eval says why not."
    import caopd.smoke as smoke
    ran = node(listed, devices)
    if visible is not None: monkeypatch.setenv('CUDA_VISIBLE_DEVICES', visible)  # 2 of the node's 4 GPUs are ours
    out = tmp_path/'out'
    with pytest.raises(SystemExit) as e: smoke.main(['--out', str(out), '--use_vllm', 'false'])
    assert e.value.code == 0
    table = json.loads((out/'smoke.json').read_text())
    rows = {r['id']: r for r in table['rows']}
    gpu_rows = ['versions', 'train', 'resume', 'save_reload'] + (['fsdp2_train', 'fsdp2_lora_save'] if devices > 1 else [])
    assert ran == gpu_rows and [k for k, r in rows.items() if r['status'] == 'pass'] == gpu_rows  # no CPU row in their place
    assert rows['vllm_eval']['status'] == 'not run' and '--use_vllm false' in rows['vllm_eval']['detail']
    if devices == 1: assert rows['fsdp2_train']['detail'] == 'needs 2 or more GPUs; 1 visible'
    for k in ('train', 'resume', 'fsdp2_train', 'fsdp2_lora_save'): assert rows[k]['check'].endswith(', vLLM off'), rows[k]
    assert rows['train']['detail'] == 'stand-in, vLLM off' and table['use_vllm'] is False and table['gpus'] == devices
    md = (out/'smoke.md').read_text()
    assert '| two CaOPD-SDFT steps, vLLM off | gpu | pass |' in md and 'vLLM (evaluation and colocated rollouts) is NOT checked' in md
    # the runs the training rows launch generate without vLLM, and the versions row does not ask for it
    ctx = smoke.SmokeContext(tmp_path/'ctx', gpus=devices, use_vllm=False)
    assert smoke.smoke_run(ctx, 'train').use_vllm is False and smoke.smoke_run(ctx, 'train').preset == 'paper'


def test_versions_row_needs_vllm_only_when_it_is_used(monkeypatch, tmp_path):
    "With --use_vllm false a GPU node without vLLM passes the versions row; with vLLM on, vLLM missing fails it."
    import caopd.machine as pf
    from caopd import smoke
    rows = [dict(package=p, installed='1', supported='any', in_range='yes', source='-') for p in ('torch', 'CUDA', 'trl', 'transformers')]
    monkeypatch.setattr(pf, 'version_table', lambda status=None: rows + [dict(package='vllm', installed=None, supported='any',
                                                                              in_range='not installed', source='-')])
    assert smoke.check_versions(smoke.SmokeContext(tmp_path/'a', gpus=1, use_vllm=False))['detail'].startswith('torch 1')
    with pytest.raises(smoke.CheckFailed, match='not installed: vllm'): smoke.check_versions(smoke.SmokeContext(tmp_path/'b', gpus=1))


@pytest.mark.parametrize('listed,devices,build,driver,cause', [
    (2, 0, None, '580.95', 'is a CPU build (torch.version.cuda is None): install a CUDA build of torch'),
    (1, 0, '13.0', '550.54', "needs an NVIDIA driver >= 580; this machine's driver is 550.54"),
    (4, 2, '13.0', '580.95', 'a GPU in an error state'),
], ids=['CPU build of torch', 'driver too old', 'fewer devices'])
def test_a_gpu_torch_cannot_use_fails_the_command(node, tmp_path, capsys, listed, devices, build, driver, cause):
    "nvidia-smi lists a GPU torch cannot use: exit 2 and one line naming both counts and the cause, before any row (not even the CPU rows)."
    import caopd.smoke as smoke
    ran = node(listed, devices, build=build, driver=driver)
    with pytest.raises(SystemExit) as e: smoke.main(['--out', str(tmp_path/'out')])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f'caopd-smoke: error: nvidia-smi lists {listed} GPU') and f'can use {devices}: ' in err[0], err
    assert cause in err[0] and ran == [], (err, ran)
    assert json.loads((tmp_path/'out'/'smoke.json').read_text())['exit_code'] == 2
