"Every notebook's lesson cells, as `nbdev_test` runs them (cells flagged slow or cuda are skipped)."
import subprocess, sys
from pathlib import Path
import pytest
from conftest import ROOT

NOTEBOOKS = sorted(p for p in (ROOT/'nbs').rglob('*.ipynb')
                   if not any(part.startswith(('_', '.')) for part in p.relative_to(ROOT/'nbs').parts))

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT/'nbs')))
def test_notebook(nb):
    # one process per notebook, as nbdev_test does, so notebooks cannot leak state into each other
    nbdev_test = Path(sys.executable).parent/'nbdev_test'  # the console script beside the interpreter
    res = subprocess.run([str(nbdev_test), '--path', str(nb), '--n_workers', '0'],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, f'{nb.name} failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}'
