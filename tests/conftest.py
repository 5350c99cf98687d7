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
# notebooks that save into figures/ (the theory notebook) write into a temporary folder instead: tests leave the tree alone
os.environ.setdefault('CAOPD_FIGURES_DIR', tempfile.mkdtemp(prefix='caopd_figures_'))
# hypothesis keeps its caches (constants, unicode data) in .hypothesis/ under the working folder, nbs/ for a notebook:
# under test they go to a temporary folder, so the lesson cells that use it leave nothing in the checkout
os.environ.setdefault('HYPOTHESIS_STORAGE_DIRECTORY', tempfile.mkdtemp(prefix='caopd_hypothesis_'))


def pytest_configure(config):
    """The suite reports how long its slowest tests took (pytest --durations=25) instead of asserting time bounds, which
    a busy machine breaks; a --durations given on the command line wins. Set here, the suite's one configuration file:
    pyproject.toml is hashed by .ci/env (a change rebuilds the environment), and a tests/pytest.ini would move
    pytest's rootdir and with it every test id."""
    if config.option.durations is None: config.option.durations = 25
    # `-m "not slow"` is the quick loop (README, "Working on caopd"): a module that starts processes, trains, runs
    # papermill notebooks, resolves pip environments or builds wheels says so with `pytestmark = pytest.mark.slow`
    config.addinivalue_line('markers', 'slow: starts processes, trains, runs notebooks or builds environments (minutes)')


def pytest_collection_finish(session):
    """The selected notebooks' lessons run in two worker processes (tests/lessons.py). In the quick loop (no slow test
    selected) they start as soon as the tests are collected and run beside the other tests; in the whole suite, at the
    first notebook's test, so that they never share the cores with the tests that train or start processes."""
    nbs = [item.callspec.params['nb'] for item in session.items if getattr(item, 'originalname', None) == 'test_notebook']
    if not nbs: return
    import lessons
    lessons.select(nbs)
    if not any(item.get_closest_marker('slow') for item in session.items): lessons.start(nbs)


def _checkout_state() -> dict|None:
    "Paths `git status` reports (changed, new) with a hash of their contents; None outside a git checkout."
    import hashlib, subprocess
    try: out = subprocess.run(['git', 'status', '--porcelain'], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError): return None
    paths = [line[3:].split(' -> ')[-1].strip('"') for line in out.splitlines()]
    return {p: hashlib.sha1((ROOT/p).read_bytes()).hexdigest() if (ROOT/p).is_file() else '' for p in paths}


@pytest.fixture(scope='session', autouse=True)
def checkout_left_as_found():
    "The suite leaves the checkout as it found it (`git status` unchanged): tests write under tmp_path, never in the tree."
    before = _checkout_state()
    yield
    after = _checkout_state()
    if before is None or after is None or after == before: return
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    pytest.fail(f"the tests changed these files of the checkout: {changed}. Write under tmp_path (or make the output "
                "deterministic), then `git checkout` them.", pytrace=False)
