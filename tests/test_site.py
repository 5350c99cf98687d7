"""The site of the notebooks (docs/build.py) builds offline into a temporary folder, every notebook and docs/ page on
it, and passes the browser check (docs/check.py) in headless Chromium, whose screenshots figures/site/ keeps."""
import importlib.util, json, re, shutil, subprocess, sys

import pytest
from conftest import ROOT

# builds the site (executing any notebook tests/test_notebooks.py left uncached) and starts a browser
pytestmark = pytest.mark.slow

def _docs_module(name:str):
    "docs/<name>.py, loaded by path (`build` is also the name of pypa's build package)."
    spec = importlib.util.spec_from_file_location(f'caopd_docs_{name}', ROOT/'docs'/f'{name}.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

build = _docs_module('build')


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    "The site as the README's command builds it (the browser check left to the test below)."
    out = tmp_path_factory.mktemp('site')/'site'
    cmd = [sys.executable, str(ROOT/'docs'/'build.py'), str(out)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, f'docs/build.py failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}'
    return out


def test_every_page_is_on_the_site(site):
    assert 'README.html' in (site/'index.html').read_text()  # the home page is the README
    assert [p.name for p in site.parent.iterdir()] == [site.name]  # nothing written beside it (MyST-NB's jupyter_execute/)
    missing = [p for p in build.notebooks() if not (site/p.relative_to(ROOT).with_suffix('.html')).is_file()]
    missing += [p for p in build.doc_pages() if not (site/p.relative_to(ROOT).with_suffix('.html')).is_file()]
    assert not missing, f'no page for {missing}'
    # the lessons show their outputs, the theory its figures drawn by the site's own plotly.js (no CDN anywhere)
    theory = (site/'nbs'/'04_theory.html').read_text()
    assert theory.count('class="plotly-graph-div"') >= 6 and 'cell_output' in theory
    assert (site/'_static'/'plotly.min.js').is_file() and (site/'_static'/'tex-svg-full.js').is_file()
    remote = [p.relative_to(site) for p in site.rglob('*.html')
              if re.search(r'<script[^>]+src="(https?:)?//', p.read_text())]
    assert not remote, f'pages loading scripts from outside the site: {remote[:5]}'
    train = (site/'nbs'/'train.html').read_text()  # a papermill notebook with its committed run's outputs
    assert 'cell_output' in train and 'plotly-graph-div' in train
    # a Markdown table a cell prints is a table, not its raw `| a | b |` text (MyST-NB renders outputs as CommonMark,
    # which has no tables, unless conf.py asks for GFM)
    raw = [f'{p.relative_to(site)}: {m[:80]}' for p in site.rglob('*.html')
           for m in re.findall(r'<p>\|[^<|]*\|[^<|]*\|[^<]*', p.read_text())]
    assert not raw, 'tables shown as raw text:\n' + '\n'.join(raw[:10])
    assert train.count('<table') > 2


def test_internal_links_resolve(site):
    "Every <a href>, <img src>, <link href> and <script src> of every page that stays on the site finds its file."
    problems = _docs_module('check').link_problems(site)
    assert not problems, '\n'.join(problems[:30])


def test_pages_in_the_browser(site, tmp_path):
    "Home, the theory lesson and a results page load with no JavaScript error, their figures drawn; screenshots taken."
    check = _docs_module('check')
    if not check.chromium(): pytest.skip('no chromium on PATH (apt-get install chromium): the browser check needs it')
    res = subprocess.run([sys.executable, str(ROOT/'docs'/'check.py'), str(site), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, f'the browser check failed:\n{res.stdout[-6000:]}\n{res.stderr[-3000:]}'
    committed = sorted(p.name for p in (ROOT/'figures'/'site').glob('*.png'))
    assert sorted(p.name for p in tmp_path.glob('*.png')) == committed == ['home.png', 'lesson.png', 'results.png']


def test_a_cached_notebook_is_stale_when_its_notebook_or_the_package_changes(tmp_path, monkeypatch):
    "The site never shows outputs of another version of a notebook or of caopd."
    monkeypatch.setattr(build, 'ROOT', tmp_path); monkeypatch.setattr(build, 'CACHE', tmp_path/'_build'/'notebooks')
    (tmp_path/'caopd').mkdir(); (tmp_path/'nbs').mkdir(); (tmp_path/'settings.ini').write_text('[DEFAULT]\n')
    (tmp_path/'caopd'/'core.py').write_text('x = 1\n')
    nb = tmp_path/'nbs'/'00_core.ipynb'
    nb.write_text(json.dumps(dict(cells=[], metadata={}, nbformat=4, nbformat_minor=5)))
    assert not build.is_fresh(nb)  # never executed
    build.cached(nb).parent.mkdir(parents=True)
    build.cached(nb).write_text(json.dumps(dict(cells=[], metadata=dict(caopd_cache_key=build.cache_key(nb)))))
    assert build.is_fresh(nb)
    (tmp_path/'caopd'/'core.py').write_text('x = 2\n')
    assert not build.is_fresh(nb)
    (tmp_path/'caopd'/'core.py').write_text('x = 1\n'); nb.write_text(nb.read_text() + '\n')
    assert not build.is_fresh(nb)
