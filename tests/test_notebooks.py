"Every notebook's lesson cells as `nbdev_test` runs them (cells flagged slow or cuda skipped), outputs kept for the site."
import json, subprocess, sys
from pathlib import Path
import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # every notebook's lessons (nbdev_test --path runs one): not in the quick loop (README)

def is_papermill(nb:Path) -> bool:
    "A parameterized run notebook (a `parameters` cell): nbdev_test skips it (skip_exec), tests/test_papermill_* run it."
    return any('parameters' in c.get('metadata', {}).get('tags', []) for c in json.loads(nb.read_text())['cells'])

NOTEBOOKS = sorted(p for p in (ROOT/'nbs').rglob('*.ipynb')
                   if not any(part.startswith(('_', '.')) for part in p.relative_to(ROOT/'nbs').parts)
                   and not is_papermill(p))

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT/'nbs')))
def test_notebook(nb):
    # one process per notebook, as nbdev_test does, so notebooks cannot leak state into each other. docs/build.py runs
    # it as `nbdev_test --path nb` does (nbdev.test.test_nb, the same skipped flags) and keeps the executed copy in
    # _build/notebooks/, keyed by the notebook and the package: the site (tests/test_site.py) shows it without running
    # the notebook again
    res = subprocess.run([sys.executable, str(ROOT/'docs'/'build.py'), '--execute', str(nb)],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, f'{nb.name} failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}'


@pytest.mark.parametrize('nb', [p for p in sorted((ROOT/'nbs').rglob('*.ipynb')) if is_papermill(p)],
                         ids=lambda p: str(p.relative_to(ROOT/'nbs')))
def test_papermill_notebooks_are_skipped_by_nbdev_test(nb):
    "A plain `nbdev_test` must not start a ten-minute training run: every run notebook says skip_exec in its title cell."
    first = next(c for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'markdown')
    assert '- skip_exec: true' in ''.join(first['source']), f'{nb.name}: add "- skip_exec: true" to the title cell'
