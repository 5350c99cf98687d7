"""Every library notebook's lessons, run as `nbdev_test` runs them, by two worker processes (`docs/build.py --execute -`):
each imports its libraries once and executes one notebook after another, each in a shell of its own, as nbdev_test's
own workers do. Started once per pytest run, at the first notebook's test, or, in the quick loop (no slow test selected),
as soon as the tests are collected, so that the lessons run beside the other tests."""
import json, os, queue, subprocess, sys, tempfile, threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = 'caopd-lesson '  # a worker's answer for a notebook (docs/build.py --execute -)
WORKERS = 2  # the machine's cores (2 here and in CI); a worker's torch uses its own threads as well

class Lessons:
    "The notebooks' results as the workers report them: `result(nb)` waits for one."
    def __init__(self, notebooks:list[Path]):
        self.results, self.done = {}, {nb: threading.Event() for nb in notebooks}
        todo = queue.Queue()
        for nb in sorted(notebooks, key=lambda p: -p.stat().st_size): todo.put(nb)  # the long ones first
        self.threads = [threading.Thread(target=self._work, args=(todo,), daemon=True) for _ in range(WORKERS)]
        for t in self.threads: t.start()

    def _work(self, todo):
        proc = log = None
        while True:
            try: nb = todo.get_nowait()
            except queue.Empty: break
            try:
                if proc is None:  # its stderr (warnings, progress) goes to a file, out of the pipes
                    log = tempfile.TemporaryFile(mode='w+')
                    proc = subprocess.Popen([sys.executable, str(ROOT/'docs'/'build.py'), '--execute', '-'], cwd=ROOT,
                                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
                proc.stdin.write(f'{nb}\n'); proc.stdin.flush()
                line = proc.stdout.readline()
                while line and not line.startswith(PREFIX): line = proc.stdout.readline()  # a library's own print
                if line: self.results[nb] = json.loads(line[len(PREFIX):])
                else:  # the worker died in this notebook: reported, and the next notebook gets a new worker
                    log.seek(0)
                    self.results[nb] = dict(passed=False, log=f'its worker ended (exit {proc.wait()}):\n{log.read()[-6000:]}')
                    log.close(); proc = None
            except Exception as e: self.results[nb] = dict(passed=False, log=f'{type(e).__name__}: {e}')
            finally: self.done[nb].set()
        if proc is not None: proc.stdin.close(); proc.wait(); log.close()

    def result(self, nb:Path) -> dict:
        self.done[nb].wait()
        return self.results[nb]

_lessons, _selected = None, None

def select(notebooks:list[Path]):
    "The notebooks this pytest run tests (its selected `test_notebook` items): the workers run those alone."
    global _selected
    _selected = list(notebooks)

def start(notebooks:list[Path]) -> Lessons:
    "The run's `Lessons`, started at the first call, over the selected notebooks (or `notebooks` where none were)."
    global _lessons
    if _lessons is None: _lessons = Lessons(_selected or notebooks)
    return _lessons
