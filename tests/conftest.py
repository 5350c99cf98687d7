import os, sys, tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the test suite never reaches for the network: hub and downloads fail fast and clearly instead of hanging
os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('CAOPD_OFFLINE', '1')
# figures are written as HTML only: a PNG costs seconds of headless chromium and the tests read the data, not pixels
os.environ.setdefault('CAOPD_PNG', '0')
_MADE = []  # temporary folders this process made for the run, removed at its end (workers inherit the controller's)

def _temporary(var:str, prefix:str):
    if var not in os.environ: os.environ[var] = tempfile.mkdtemp(prefix=prefix); _MADE.append(os.environ[var])

# notebooks that save into figures/ (the theory notebook) write into a temporary folder instead: tests leave the tree alone
_temporary('CAOPD_FIGURES_DIR', 'caopd_figures_')
# hypothesis keeps its caches (constants, unicode data) in .hypothesis/ under the working folder, nbs/ for a notebook:
# under test they go to a temporary folder, so the lesson cells that use it leave nothing in the checkout
_temporary('HYPOTHESIS_STORAGE_DIRECTORY', 'caopd_hypothesis_')

# The suite runs on two worker processes (pytest-xdist; `--numprocesses 2` in pyproject.toml, `-n 0` for one process),
# a test file whole on one of them (`pytest_xdist_make_scheduler`). Each worker's torch takes its share of the cores, as
# torchrun gives each of its processes one thread: two workers computing at once on two threads each would ask four of
# two cores. Set here, before any test imports torch; the processes a test starts inherit it; a value set outside wins.
if os.environ.get('PYTEST_XDIST_WORKER'):
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))))
    for _var in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'): os.environ.setdefault(_var, _share)

# Files that must run in one worker, in this order: the site (test_site.py) shows the notebooks the lessons executed
# (test_notebooks.py), from _build/notebooks/; in another worker it would execute them again beside the lessons.
SAME_WORKER = {'tests/test_site.py': 'tests/test_notebooks.py'}
# The files that take longest (`--durations`), started first so that none of them starts last while the other worker
# waits: the lessons (two processes of their own, then the site), the embedded model trained and evaluated, the
# papermill notebooks, the training runs, the pip resolution of the vllm extra. An order, not a fact: a stale one costs
# minutes, never a result.
LONG_FIRST = ('tests/test_notebooks.py', 'tests/test_site.py', 'tests/test_mu_hat_policy.py', 'tests/test_papermill_train.py',
              'tests/test_train.py', 'tests/test_transformers_range.py', 'tests/test_papermill_reproduce.py', 'tests/test_cli.py')


def _file(nodeid:str) -> str: return nodeid.split('::', 1)[0]


def pytest_configure(config):
    """The suite reports how long its slowest tests took (pytest --durations=25) instead of asserting time bounds, which
    a busy machine breaks; a --durations given on the command line wins. Set here, the suite's one configuration file
    besides pyproject.toml's addopts: pyproject.toml is hashed by .ci/env (a change rebuilds the environment), and a
    tests/pytest.ini would move pytest's rootdir and with it every test id."""
    if config.option.durations is None: config.option.durations = 25
    # `-m "not slow"` is the quick loop (README, "Working on caopd"): a module that starts processes, trains, runs
    # papermill notebooks, resolves pip environments or builds wheels says so with `pytestmark = pytest.mark.slow`
    config.addinivalue_line('markers', 'slow: starts processes, trains, runs notebooks or builds environments (minutes)')


def pytest_collection_modifyitems(session, config, items):
    "The long files first (`LONG_FIRST`, in its order), then the others as collected; within a file, its own order."
    rank = {f: i for i, f in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(_file(item.nodeid), len(rank)))  # list.sort is stable: a file keeps its order


def pytest_xdist_make_scheduler(config, log):
    "xdist's file scheduling (`--dist loadfile`: a module's fixtures built once), `SAME_WORKER` kept together, in `LONG_FIRST` order."
    if config.getvalue('dist') not in ('load', 'loadfile'): return None  # another --dist given on the command line
    from xdist.scheduler import LoadScopeScheduling
    config.option.loadscopereorder = False  # the collection's order (`pytest_collection_modifyitems`), not by test count
    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid:str) -> str: return SAME_WORKER.get(_file(nodeid), _file(nodeid))
    return ByFile(config, log)


def pytest_collection_finish(session):
    """The selected notebooks' lessons run in two worker processes (tests/lessons.py). In the quick loop (no slow test
    selected) in one process, they start as soon as the tests are collected and run beside the other tests; otherwise
    at the first notebook's test: the file runs first (`LONG_FIRST`), in a pytest worker of its own under xdist, where
    every worker collects every test but one runs the notebooks."""
    nbs = [item.callspec.params['nb'] for item in session.items if getattr(item, 'originalname', None) == 'test_notebook']
    if not nbs: return
    import lessons
    lessons.select(nbs)
    if os.environ.get('PYTEST_XDIST_WORKER'): return
    if not any(item.get_closest_marker('slow') for item in session.items): lessons.start(nbs)


def _checkout_state() -> dict|None:
    "Paths `git status` reports (changed, new) with a hash of their contents; None outside a git checkout."
    import hashlib, subprocess
    try: out = subprocess.run(['git', 'status', '--porcelain'], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError): return None
    paths = [line[3:].split(' -> ')[-1].strip('"') for line in out.splitlines()]
    return {p: hashlib.sha1((ROOT/p).read_bytes()).hexdigest() if (ROOT/p).is_file() else '' for p in paths}


def pytest_sessionstart(session):
    "The checkout's state before any test (`pytest_sessionfinish` compares); in xdist's controller, before any worker's."
    if not hasattr(session.config, 'workerinput'): session.config._caopd_checkout = _checkout_state()


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves the checkout as it found it (`git status` unchanged): tests write under tmp_path, never in the tree.
    Checked once every worker has finished (xdist's controller), and reported as an error of the run."""
    import shutil
    for folder in _MADE: shutil.rmtree(folder, ignore_errors=True)
    config = session.config
    if hasattr(config, 'workerinput'): return
    before, after = getattr(config, '_caopd_checkout', None), _checkout_state()
    if before is None or after is None or after == before: return
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    message = (f"the tests changed these files of the checkout: {changed}. Write under tmp_path (or make the output "
               "deterministic), then `git checkout` them.")
    config.hook.pytest_runtest_logreport(report=pytest.TestReport(
        'tests/conftest.py::checkout_left_as_found', ('tests/conftest.py', None, 'checkout_left_as_found'), {},
        'failed', message, 'teardown'))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
