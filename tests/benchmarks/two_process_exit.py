"""Run a two-process `caopd.train` (torchrun, CPU, tiny model) N times while another CPU job runs; count clean exits.

Run from the repository root: `.ci/env python tests/benchmarks/two_process_exit.py [--n 10] [--no-load]`.
A script, not a pytest test (about half a minute a run). Issue 21: rank 1 could die at exit with "terminate called
without an active exception" (SIGABRT) after a good run, on a loaded 2-core machine, because `caopd.train` left its
process group to interpreter shutdown; `caopd.train.train` now destroys it on every rank (`end_process_group`).
Each run must exit 0 with both ranks' steps trained; the script prints each run's exit code and seconds, and exits 1
when any run failed (its output is kept in the temporary folder it prints).
"""
import argparse, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT/'tests'))
from trainer_helpers import tiny_model_dir  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--n', type=int, default=10)
    p.add_argument('--no-load', action='store_true', help='without the busy-loop job beside the runs')
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix='two_process_exit_'))
    model = tiny_model_dir(tmp/'tiny')
    load = None if a.no_load else subprocess.Popen([sys.executable, '-c', 'while True: pass'])
    failed = 0
    try:
        for i in range(a.n):
            out, t0 = tmp/f'run{i}', time.time()
            cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
                   '-m', 'caopd.train', '--model', model, '--out', str(out), '--preset', 'cpu', '--K', '2',
                   '--prompts_per_step', '1', '--n_train', '4', '--max_completion_length', '8', '--format_warmup', 'off',
                   '--max_steps', '2', '--save_steps', '2', '--num_processes', '2']
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
            (tmp/f'run{i}.log').write_text(res.stdout + res.stderr)
            ok = res.returncode == 0 and (out/'train.json').is_file() and 'terminate called' not in res.stderr
            failed += not ok
            print(f'run {i + 1}/{a.n}: exit {res.returncode}, {time.time() - t0:.0f} s, {"ok" if ok else "FAILED"}', flush=True)
    finally:
        if load is not None: load.kill(); load.wait()
    print(f'{a.n - failed} of {a.n} runs exited cleanly ({"with" if load else "without"} a busy CPU job beside them); '
          f'logs in {tmp}')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
