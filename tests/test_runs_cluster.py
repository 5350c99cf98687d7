"""`caopd-runs GRID --executor local`: the cluster path (one submitit job per run) run on this machine with submitit's
local executor, as a user types it. A grid of three runs of a stand-in notebook (tests/grid_run.ipynb: steps that
checkpoint, resume from the last checkpoint, and end as a finished run folder; `nbs/train.ipynb` resumes the same way
through `resume`, tested by tests/test_trainer_resume.py and the launch harness):
- run b is pre-empted mid-run (the stop signal SLURM sends before a time limit): its job is requeued by submitit and the
  run goes on from its checkpoint;
- run c is killed mid-run (its whole job, SIGKILL): caopd-runs says it did not finish, `--status` shows it interrupted,
  and submitting the grid again skips the finished runs and resumes c from its checkpoint."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import psutil, pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
STAND_IN = ROOT/'tests'/'grid_run.ipynb'
CAOPD_RUNS = str(Path(sys.executable).parent/'caopd-runs')


def start(*args, cwd):
    return subprocess.Popen([CAOPD_RUNS, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED='1'))

def wait_for(what, check, timeout=240):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (found := check()): return found
        time.sleep(0.2)
    raise AssertionError(f'timed out waiting for {what}')

def logged(root, run) -> list[str]:
    f = root/run/'steps.log'
    return f.read_text().split('\n')[:-1] if f.is_file() else []

def job_of(root, run) -> int|None:
    jobs = json.loads((root/'jobs.json').read_text()) if (root/'jobs.json').is_file() else {}
    return int(jobs[run]['job_id']) if run in jobs else None

def resumed(lines) -> list[int]: return [int(l.split()[1]) for l in lines if l.startswith('start')]
def steps(lines) -> list[int]: return [int(l.split()[1]) for l in lines if l.startswith('step')]


def test_a_grid_runs_as_local_jobs_and_resumes_a_preempted_and_a_killed_run(tmp_path):
    root = tmp_path/'runs'
    grid = tmp_path/'grid.yaml'
    grid.write_text(f'notebook: {STAND_IN}\nroot: {root}\ndefaults: {{step_seconds: 1.5}}\n'
                    'runs:\n  - {name: a, steps: 2}\n  - {name: b, steps: 5}\n  - {name: c, steps: 4}\n')
    first = start(grid, '--executor', 'local', cwd=tmp_path)
    # b: once it has checkpointed a step, the stop signal to its job's task, as SLURM sends it before a time limit
    wait_for('run b to checkpoint a step', lambda: 'step 1' in logged(root, 'b'))
    task = next(p for p in psutil.Process(job_of(root, 'b')).children() if 'submitit.core._submit' in ' '.join(p.cmdline()))
    task.send_signal(signal.SIGUSR2)
    # c: killed outright, its job and everything under it
    wait_for('run c to checkpoint a step', lambda: 'step 1' in logged(root, 'c'))
    job = psutil.Process(job_of(root, 'c'))
    for p in [job, *job.children(recursive=True)]: p.kill()
    out, _ = first.communicate(timeout=240)
    assert first.returncode == 2, out
    assert 'did not finish: c' in out.splitlines()[-1], out
    b = logged(root, 'b')
    assert resumed(b)[0] == 0 and len(resumed(b)) == 2 and resumed(b)[1] >= 1, b  # requeued once, from its checkpoint
    assert steps(b)[-1] == 5 and steps(b)[steps(b).index(resumed(b)[1]) + 1:] == list(range(resumed(b)[1] + 1, 6)), b
    assert 'Requeued job' in Path(json.loads((root/'jobs.json').read_text())['b']['log']).read_text()

    status = subprocess.run([CAOPD_RUNS, grid, '--status'], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    states = {line.split('|')[1].strip(): line.split('|')[4].strip() for line in status.splitlines()[2:]}
    assert states == dict(a='finished', b='finished', c='INTERRUPTED'), status
    only = subprocess.run([CAOPD_RUNS, grid, '--status', '--only', 'c'], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout
    assert [line.split('|')[1].strip() for line in only.splitlines()[2:]] == ['c'], only  # --only with --status too

    killed_job = job_of(root, 'c')
    second = start(grid, '--executor', 'local', cwd=tmp_path)
    out, _ = second.communicate(timeout=240)
    assert second.returncode == 0, out
    assert '[skip] a:' in out and '[skip] b:' in out and '[submitted] c:' in out, out
    assert '(--force runs it again)' in out and not (root/'jobs'/'%j').exists(), out  # the flag's name; no folder '%j'
    assert job_of(root, 'c') != killed_job
    c = logged(root, 'c')
    assert resumed(c)[0] == 0 and resumed(c)[1] >= 1 and steps(c)[-1] == 4, c  # resumed, not started again
    status = subprocess.run([CAOPD_RUNS, grid, '--status'], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert [line.split('|')[4].strip() for line in status.splitlines()[2:]] == ['finished'] * 3, status


def test_a_slurm_grid_without_a_time_limit_is_refused_in_one_line(tmp_path):
    grid = tmp_path/'grid.yaml'
    grid.write_text(f'notebook: {STAND_IN}\nroot: {tmp_path/"runs"}\nruns:\n  - {{name: a}}\n')
    r = subprocess.run([CAOPD_RUNS, grid, '--executor', 'slurm'], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'need a time limit' in r.stderr, r.stderr
    assert not (tmp_path/'runs').exists()  # refused before any work


def paper_run() -> str:
    from caopd.grid import read_grid
    return read_grid(ROOT/'nbs'/'grids'/'paper.yaml')['runs'][0][0]


def test_a_slurm_dry_run_prints_each_jobs_sbatch_script_with_its_gpu_type(tmp_path):
    "Issue 63: the dry run shows the sbatch script submitit would write, the GPU type the plan assumed as a constraint."
    r = subprocess.run([CAOPD_RUNS, ROOT/'nbs'/'grids'/'paper.yaml', '--executor', 'slurm', '--dry_run', '--time', '24:00:00',
                        '--gpu', 'H200', '--only', paper_run()], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    for line in ('#SBATCH --constraint=h200', '#SBATCH --gpus-per-node=4', '#SBATCH --time=1440', 'plan on 4 x H200'):
        assert line in r.stdout, r.stdout
    r = subprocess.run([CAOPD_RUNS, ROOT/'nbs'/'grids'/'paper.yaml', '--executor', 'slurm', '--dry_run', '--time', '24:00:00',
                        '--only', paper_run()], cwd=ROOT, capture_output=True, text=True)
    assert '--constraint' not in r.stdout and 'set slurm: {gpu: H200} in the grid file (or --gpu)' in r.stdout, r.stdout


def test_a_slurm_grid_is_refused_in_one_line_where_it_cannot_run(tmp_path):
    "No SLURM on this machine, or a GPU type whose memory the plan does not fit: one line each, nothing written."
    grid = tmp_path/'grid.yaml'
    grid.write_text(f'notebook: {STAND_IN}\nroot: {tmp_path/"runs"}\nruns:\n  - {{name: a}}\n')
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))  # the environment's commands, no sbatch or srun
    r = subprocess.run([CAOPD_RUNS, grid, '--executor', 'slurm', '--time', '60'], cwd=tmp_path, capture_output=True,
                       text=True, env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'this machine has no SLURM' in r.stderr, r.stderr
    r = subprocess.run([CAOPD_RUNS, ROOT/'nbs'/'grids'/'paper.yaml', '--executor', 'slurm', '--time', '60', '--gpu', 'H100',
                        '--only', paper_run()], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'would not fit its node' in r.stderr, r.stderr
    assert 'plan on 4 x H100' in r.stderr and not (tmp_path/'runs').exists()
