"Every notebook's lesson cells as `nbdev_test` runs them (cells flagged slow or cuda skipped), outputs kept for the site."
import json
from pathlib import Path
import pytest
from conftest import ROOT
import lessons

# in the quick loop too: a lesson that an edit breaks fails there (README, "Working on caopd")

def is_papermill(nb:Path) -> bool:
    "A parameterized run notebook (a `parameters` cell): nbdev_test skips it (skip_exec), tests/test_papermill_* run it."
    return any('parameters' in c.get('metadata', {}).get('tags', []) for c in json.loads(nb.read_text())['cells'])

NOTEBOOKS = sorted(p for p in (ROOT/'nbs').rglob('*.ipynb')
                   if not any(part.startswith(('_', '.')) for part in p.relative_to(ROOT/'nbs').parts)
                   and not is_papermill(p))

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT/'nbs')))
def test_notebook(nb):
    # run as `nbdev_test` runs it (nbdev.test.test_nb's steps, the same skipped flags) by one of two worker processes,
    # each executing notebook after notebook in a shell of its own, as nbdev_test's workers do (tests/lessons.py);
    # docs/build.py keeps each executed copy in _build/notebooks/, keyed by the notebook and the package, so the site
    # (tests/test_site.py) shows it without running the notebook again
    got = lessons.start(NOTEBOOKS).result(nb)
    assert got['passed'], f"{nb.name} failed:\n{got['log']}"


@pytest.mark.parametrize('nb', [p for p in sorted((ROOT/'nbs').rglob('*.ipynb')) if is_papermill(p)],
                         ids=lambda p: str(p.relative_to(ROOT/'nbs')))
def test_papermill_notebooks_are_skipped_by_nbdev_test(nb):
    "A plain `nbdev_test` must not start a ten-minute training run: every run notebook says skip_exec in its title cell."
    first = next(c for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'markdown')
    assert '- skip_exec: true' in ''.join(first['source']), f'{nb.name}: add "- skip_exec: true" to the title cell'
