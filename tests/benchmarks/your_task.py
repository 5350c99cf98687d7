"""docs/your-task.md's script as a reader runs it, with the embedded model, in a fresh folder: what it prints, under
a line that says where and at which commit it ran. `docs/your-task.md` shows the committed output
(`tests/readme_tables.py` `your_task_output`, through cog); `tests/test_your_task.py` runs the same code on a tiny model
and checks that it prints the same reports (their headings and rows) as the committed output.

    .ci/env python tests/benchmarks/your_task.py > tests/benchmarks/your_task.txt

Run from the repository root (a few minutes on 2 cores: the format warm-up, two short trainings and two evaluations of
16 questions). A script, not a test: its numbers are one run's, on this machine.
"""
import os, platform, re, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT/'docs'/'your-task.md'


def page_code() -> str:
    "The page's one python block: the script a reader copies."
    blocks = re.findall(r'```python\n(.*?)```', PAGE.read_text(), re.S)
    if len(blocks) != 1: raise ValueError(f'{PAGE.name} should hold one python block, the script; it holds {len(blocks)}')
    return blocks[0]


def main():
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix='caopd_your_task_') as d:
        (Path(d)/'your_task.py').write_text(page_code())
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, 'your_task.py'], cwd=d, capture_output=True, text=True,
                             env={**os.environ, 'CAOPD_PNG': '0'})
        seconds = time.perf_counter() - t0
    if res.returncode: raise SystemExit(f'the page\'s script failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}')
    printed = '\n'.join(l for l in res.stdout.splitlines() if not re.match(r"^\{'[\w/]+': .*\}$", l))
    print(f'docs/your-task.md\'s script at commit {commit}, in a fresh folder; {platform.machine()}, '
          f'{os.cpu_count()} cores; {seconds / 60:.1f} minutes; the trainers\' log dicts left out\n')
    print(re.sub(r'\n{3,}', '\n\n', printed).strip())


if __name__ == '__main__': main()
