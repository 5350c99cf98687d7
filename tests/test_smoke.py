"caopd-smoke on this machine, as a user runs it: the CPU rows pass, the GPU rows say `not run` with the reason (never pass), and the exit code counts only the rows that ran."
import json, shutil, subprocess, sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is visible: the GPU rows would run (minutes)')


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
    import caopd.preflight as pf
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
    for s in ('vLLM', 'FSDP2', 'not run', '--out', '--timeout', 'Exit code 1'): assert s in res.stdout, s
