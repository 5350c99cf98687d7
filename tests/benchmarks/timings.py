"""How long the README's commands take, typed as written in a fresh clone of this checkout's HEAD (with `../shared`
beside it, as CI lays it out): the environment build, the main job, the quick loop, the whole suite (`bash .ci/run`)
and the site (`docs/build.py`, every lesson executed: a fresh clone has none cached).

Run from the repository root on a quiet machine (about 40 minutes on 2 cores); its output is committed beside it and
the docs' timings are built from it by cog (`tests/readme_tables.py`):

    .ci/env python tests/benchmarks/timings.py > tests/benchmarks/timings.txt

A script, not a pytest test: the seconds depend on the machine and on what else runs on it, so nothing is asserted about
them. It fails when a command fails. `--only main quick` times some of them (the environment is always built first);
with `--keep` an earlier output's other commands keep their seconds, each with the commit it was timed at (write to
another file first: the shell empties the one it redirects to before the script reads it):

    .ci/env python tests/benchmarks/timings.py --only suite --keep tests/benchmarks/timings.txt > /tmp/timings.txt
    mv /tmp/timings.txt tests/benchmarks/timings.txt

Its last line is the seconds as JSON, with the commit of each command (`commits`). With `--runs DIR` the main job's
run folder is kept in DIR (its `runs/`), for `main_job_stages.py` and `profile_main_job.py`.
"""
import argparse, json, os, platform, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {  # the README's commands, as typed there
    'main': 'mkdir -p runs/train && .ci/env papermill nbs/train.ipynb runs/train/train.ipynb',
    'quick': '.ci/env pytest tests -m "not slow"',
    'suite': 'bash .ci/run',
    'site': '.ci/env python docs/build.py',
}

def minutes(s:float) -> str: return f'{int(s // 60)} min {round(s % 60):02d} s'

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--only', nargs='+', choices=list(COMMANDS), default=list(COMMANDS), help='the commands to time')
    p.add_argument('--keep', type=Path, help="an earlier output: the commands not timed now keep its seconds and commits")
    p.add_argument('--runs', type=Path, help="copy the main job's run folders (its runs/) here before the clone is removed, "
                   "for tests/benchmarks/main_job_stages.py and profile_main_job.py")
    a = p.parse_args()
    earlier = json.loads(a.keep.read_text().splitlines()[-1]) if a.keep else {}  # read before the output replaces it
    head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix='caopd-timings-'))
    try:
        subprocess.run(['git', 'clone', '-q', str(ROOT), str(work/'main')], check=True)
        os.symlink(ROOT.parent/'shared', work/'shared')
        env = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'CAOPD_VENV', 'PYTHONPATH')}
        env['PATH'] = os.pathsep.join(d for d in env['PATH'].split(os.pathsep) if not d.startswith(str(ROOT)))
        def timed(cmd:str) -> float:
            t0 = time.perf_counter()
            res = subprocess.run(['bash', '-c', cmd], cwd=work/'main', env=env, capture_output=True, text=True)
            if res.returncode != 0:
                sys.exit(f'{cmd}: exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}')
            return time.perf_counter() - t0
        got = dict(commit=head, machine=platform.machine(), cores=os.cpu_count(), environment=timed('.ci/env true'))
        for name in a.only:
            got[name] = timed(COMMANDS[name])
            if name == 'main' and a.runs: shutil.copytree(work/'main'/'runs', a.runs, dirs_exist_ok=True)
    finally: shutil.rmtree(work, ignore_errors=True)
    got['commits'] = {name: head for name in a.only}
    for name in COMMANDS:  # kept from the earlier output, with the commit each was timed at
        if name not in a.only and name in earlier:
            got[name], got['commits'][name] = earlier[name], earlier.get('commits', {}).get(name, earlier['commit'])
    if 'suite' not in a.only and 'suite' in earlier:  # `bash .ci/run` builds its environment: the one of its own run
        got['suite_environment'] = earlier.get('suite_environment', earlier['environment'])
    print(f"commit {head}, {got['machine']}, {got['cores']} cores, a fresh clone: environment build {minutes(got['environment'])}")
    for name in COMMANDS:
        if name not in got: continue
        kept = '' if got['commits'][name] == head else f" (kept from {a.keep}: timed at {got['commits'][name]})"
        print(f'{COMMANDS[name]}: {minutes(got[name])}{kept}')
    print(json.dumps(got))  # the last line: what tests/readme_tables.py reads

if __name__ == '__main__': main()
