"""The site of the notebooks (docs/build.py) builds offline into a temporary folder, every notebook and docs/ page on
it, and passes the browser check (docs/check.py) in headless Chromium, whose screenshots figures/site/ keeps."""
import importlib.util, json, re, shutil, subprocess, sys
from pathlib import Path

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
    assert (site/'search.html').is_file()  # the browser check searches it (docs/check.py SEARCHES)
    assert [p.name for p in site.parent.iterdir()] == [site.name]  # nothing written beside it (MyST-NB's jupyter_execute/)
    missing = [p for p in build.notebooks() if not (site/p.relative_to(ROOT).with_suffix('.html')).is_file()]
    missing += [p for p in build.doc_pages() if not (site/p.relative_to(ROOT).with_suffix('.html')).is_file()]
    assert not missing, f'no page for {missing}'
    # the sidebar's guides in reading order: every page it names exists (a renamed page would fall to the end)
    assert [p.stem for p in build.doc_pages()][:len(build.READING_ORDER)] == build.READING_ORDER
    # the lessons show their outputs, the theory its figures drawn by the site's own plotly.js (no CDN anywhere)
    theory = (site/'nbs'/'04_theory.html').read_text()
    assert theory.count('class="plotly-graph-div"') >= 6 and 'cell_output' in theory
    assert (site/'_static'/'plotly.min.js').is_file() and (site/'_static'/'tex-svg-full.js').is_file()
    remote = [p.relative_to(site) for p in site.rglob('*.html')
              if re.search(r'<script[^>]+src="(https?:)?//', p.read_text())]
    assert not remote, f'pages loading scripts from outside the site: {remote[:5]}'
    train = (site/'nbs'/'train.html').read_text()  # a papermill notebook with its committed run's outputs
    assert 'cell_output' in train and 'plotly-graph-div' in train
    assert train.count('<table') > 2  # its printed Markdown tables are tables (test_every_page_s_html: none raw)
    # plotly.js (4.6 MB) only where a figure is drawn
    plotly = {p.relative_to(site).as_posix() for p in site.rglob('*.html') if 'plotly.min.js' in p.read_text()}
    assert 'nbs/04_theory.html' in plotly and 'docs/installing.html' not in plotly


def test_every_page_s_html(site):
    """Every page, from its HTML: every <a href>, <img src>, <link href> and <script src> that stays on the site finds
    its file; no Markdown table is left as raw `| a | b |` text (MyST-NB renders outputs as CommonMark unless conf.py
    asks for GFM); no link leaves for GitHub to show a page the site has (docs/build.py rewrote links before the later
    pages existed: 35 did); every page names its icon (the browser asked for /favicon.ico: 404)."""
    check = _docs_module('check')
    assert check.repository_url() == build.GIT_URL  # the links check looks for the address build.py writes
    problems = check.html_problems(site)
    assert not problems, '\n'.join(problems[:30])


def test_pages_in_the_browser(site, tmp_path):
    """Every page loads in Chromium at 1280 px with no JavaScript error, its figures drawn, one search box, nothing cut
    off on the right and no page wider than the window; home, the theory lesson and a results page photographed."""
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


# ---- each check fails on the defect it names: a small site made by hand, each page holding one defect -------------
PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>{head}</head>
<body><nav>{nav}</nav><main><article class="bd-article" style="width: 600px; padding: 0 20px">{body}</article></main>
</body></html>"""
SEARCH = '<button class="search-button__button">Search</button>'
# a home page whose first screen shows what docs/check.py's FIRST_SCREEN asks for
HOME = ('<p><strong>What the runs show</strong></p><ul><li>On a laptop</li><li>On one GPU</li></ul>'
        '<pre><span>mkdir -p runs/train &amp;&amp; .ci/env </span><span>papermill nbs/train.ipynb</span> out.ipynb</pre>')

def _crafted_site(root, pages:dict, icon:bool=True, nav:dict|None=None, home:str=HOME):
    """A site of `pages` ({path: the article's HTML}), README.html its home page (index.html forwards there), each
    naming an icon or not, `nav` ({path: HTML}) beside the article."""
    (root/'_static').mkdir(parents=True)
    (root/'_static'/'favicon.svg').write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (root/'index.html').write_text('<!DOCTYPE html><meta charset="utf-8"><link rel="icon" href="_static/favicon.svg">'
                                   '<meta http-equiv="refresh" content="0; url=README.html">')
    for path, body in {'README.html': home, **pages}.items():
        f = root/path; f.parent.mkdir(parents=True, exist_ok=True)
        depth = '../' * (len(f.relative_to(root).parts) - 1)
        head = f'<link rel="icon" href="{depth}_static/favicon.svg">' if icon else ''
        f.write_text(PAGE.format(title=path, head=head, nav=(nav or {}).get(path, SEARCH), body=body))
    return root


def test_the_html_checks_fail_on_their_defects(tmp_path):
    check = _docs_module('check')
    repo = build.GIT_URL
    bad = _crafted_site(tmp_path/'bad', {
        'docs/tables.html': '<p>| method | ece |\n| --- | --- |\n| caopd | 0.1 |</p>',
        'docs/links.html': f'<a href="{repo}/blob/main/docs/tables.md#x">tables</a> '
                           f'<a href="{repo}/blob/main/nbs/04_theory.ipynb">theory</a> '
                           f'<a href="{repo}/blob/main/CHANGELOG.md">changes, not on the site</a> '
                           f'<a href="https://github.com/huggingface/trl/blob/main/README.md">another repository</a>',
        'nbs/04_theory.html': '<a href="../docs/nowhere.html">broken</a>'}, icon=False)
    assert check.raw_table_problems(bad) == ['docs/tables.html: a table shown as raw text: <p>| method | ece |']
    offsite = check.offsite_link_problems(bad)
    assert len(offsite) == 2 and all(p.startswith('docs/links.html: <a> ' + repo) for p in offsite), offsite
    assert 'docs/tables.html' in offsite[0] and 'nbs/04_theory.html' in offsite[1]
    assert len(check.favicon_problems(bad)) == 4  # README and the three pages (index.html names it)
    assert check.link_problems(bad) == ['nbs/04_theory.html: <a> ../docs/nowhere.html: no such file in the site']
    assert check.text_problems(bad) == []  # none of these defects is in a page's text


def test_the_text_checks_fail_on_their_defects(tmp_path):
    "Each page holds one thing a reader should not see in a page's text; the same text in code or typeset maths is fine."
    check = _docs_module('check')
    out = lambda text: f'<div class="cell_output docutils container"><div class="output stream"><pre>{text}</pre></div></div>'
    bad = _crafted_site(tmp_path/'bad', {
        'nbs/table.html': out('| method | ece |\n| --- | --- |\n| caopd | 0.1 |'),
        'nbs/tqdm.html': out('Generating:  40%|████      | 2/5 [00:01&lt;00:02,  1.2it/s]'),
        'nbs/warning.html': out('/x/site-packages/trl/trainer.py:12: FutureWarning: `tokenizer` is deprecated'),
        'nbs/log.html': out("{'loss': 0.12, 'grad_norm': 1.5, 'epoch': 0.5}"),
        'nbs/model.html': out('LlamaForCausalLM(\n  (model): LlamaModel(...)\n)'),
        'nbs/path.html': out('wrote /tmp/tmpab12cd/run/metrics.json'),
        'nbs/latex.html': '<table><tr><td>$n_b=\\max(1,</td><td>\\frac{1}{2}$</td></tr></table>',
        'nbs/label.html': '<p>the loss of eq:caopd_loss</p>',
        'nbs/code-label.html': '<p>the templates of <code>app:prompts</code></p>',
        'nbs/stale.html': f'<div class="admonition note"><p>{check.STALE}, whose code is shown here.</p></div>'})
    problems = check.text_problems(bad)
    def on(page): return [p.split(': ', 2)[1] for p in problems if p.startswith(page + ':')]
    assert on('nbs/table.html') == ['a table shown as raw text in an output'], problems
    assert on('nbs/tqdm.html') == ['a progress bar in an output'], problems
    assert on('nbs/warning.html') == ['a warning in an output'], problems
    assert on('nbs/log.html') == ["a trainer's log dict in an output"], problems
    assert on('nbs/model.html') == ["a model's printout in an output"], problems
    assert on('nbs/path.html') == ['a path of the machine that built it in an output'], problems
    assert on('nbs/latex.html') == ['LaTeX shown as text'], problems
    assert on('nbs/label.html') == ["a label of the paper's source shown as text"], problems
    assert on('nbs/code-label.html') == ["a label of the paper's source shown as text"], problems
    assert 'nbs/stale.html: its outputs come from an older version of its notebook' in problems, problems
    assert len(problems) == 10, problems
    # the same text where the page shows code as written, or MathJax typesets it, is no defect
    good = _crafted_site(tmp_path/'good', {
        'nbs/code.html': '<pre>| a | b |\n| --- | --- |</pre><pre># eq:caopd_loss</pre><code>$x$</code><pre>$x$ \\frac{1}{2}</pre>',
        'nbs/math.html': '<p><span class="math notranslate nohighlight">\\(\\frac{1}{2} \\hat\\mu\\)</span></p>',
        'nbs/output.html': out('wrote runs/train/metrics.json; accuracy 0.34 [0.24, 0.42]')})
    assert check.text_problems(good) == []


def test_the_figure_check_fails_on_text_too_small_where_it_is_shown(tmp_path):
    """A figure the README shows as PNG is read at the site's width: a 10 px label in a 1250 px figure is drawn at 7.7
    px; a PNG drawn at another size than its figure's layout (plotly's batch export took its default) is found too."""
    import struct
    check = _docs_module('check')
    def figure(name, width, font, png_size=None):
        layout = dict(width=width, height=400, annotations=[dict(text='a label', font=dict(size=font))])
        (tmp_path/'figures').mkdir(exist_ok=True)
        (tmp_path/'figures'/f'{name}.json').write_text(json.dumps(dict(data=[], layout=layout)))
        w, h = png_size or (width, 400)
        (tmp_path/'figures'/f'{name}.png').write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR' + struct.pack('>II', w, h))
        return f'![{name}](figures/{name}.png)'
    (tmp_path/'docs').mkdir()
    (tmp_path/'README.md').write_text('\n'.join([figure('wide', 1250, 10), figure('fits', 960, 11),
                                                  figure('resized', 960, 12, (700, 500)), '![shot](figures/shot.png)']))
    problems = check.figure_text_problems(tmp_path)
    assert len(problems) == 2, problems
    assert "figures/wide.png: its smallest text (an annotation ('a label')) is 7.7 px" in problems[0], problems
    assert 'figures/resized.png is 700x500 px, its figure 960x400' in problems[1], problems
    (tmp_path/'README.md').write_text(figure('fits', 960, 11))
    assert check.figure_text_problems(tmp_path) == []


def test_the_html_checks_pass_a_good_site(tmp_path):
    check = _docs_module('check')
    good = _crafted_site(tmp_path/'good', {'docs/tables.html': '<table><tr><td>caopd</td></tr></table>',
                                          'docs/links.html': '<a href="tables.html">tables</a>'})
    assert check.html_problems(good) == []


def test_the_browser_check_fails_on_what_a_reader_sees_cut_off(tmp_path):
    check = _docs_module('check')
    if not check.chromium(): pytest.skip('no chromium on PATH (apt-get install chromium): the browser check needs it')
    long = 'x = ' + ' + '.join(['value'] * 200)
    site = _crafted_site(tmp_path/'site', {
        # scrolled in its own box (the theme's <pre>, overflow auto): the reader sees the line cut off
        'nbs/code.html': f'<pre style="overflow: auto">{long}</pre>',
        # spills past the column, and makes the page wider than the window (a figure drawn at its own width)
        'nbs/figure.html': '<div style="width: 1800px; height: 20px; background: #ccc"></div>',
        # clipped (the theme's span.math, overflow hidden)
        'nbs/math.html': '<p><span style="display: inline-flex; overflow: hidden; width: 40px">'
                         '<span style="white-space: nowrap">c / ||g|| cut short</span></span></p>',
        'nbs/search.html': '<p>two search boxes</p>',
        # a table that scrolls in its own box is how a 20-column table reads in a column: allowed
        'nbs/table.html': '<div class="pst-scrollable-table-container" style="overflow-x: auto"><table><tr>'
                          + '<td>0.123456</td>' * 200 + '</tr></table></div>',
        'nbs/wrapped.html': f'<pre style="white-space: pre-wrap; overflow-wrap: anywhere">{long}</pre>',
        # code wrapped back to the left edge, and wrapped under a hanging indent (site.js's lines)
        'nbs/unhung.html': f'<div class="highlight"><pre style="white-space: pre-wrap">def f():\n    {long}\n</pre></div>',
        'nbs/hung.html': '<div class="highlight"><pre style="white-space: pre-wrap"><span style="display: block; '
                         f'padding-left: 8ch; text-indent: -8ch">    {long}\n</span></pre></div>',
        'nbs/no-icon.html': '<p>text</p>'}, nav={'nbs/search.html': SEARCH * 2})
    (site/'nbs'/'no-icon.html').write_text((site/'nbs'/'no-icon.html').read_text().replace('<link rel="icon"', '<link'))
    problems = check.browser_problems(site, tmp_path/'shots')
    def on(page): return [p for p in problems if p.startswith(page + ':')]
    assert any('cut off on the right: <pre' in p for p in on('nbs/code.html')), problems
    assert any('cut off on the right: <div' in p for p in on('nbs/figure.html')), problems
    assert any('the page is' in p and 'px wide in a 1280 px window' in p for p in on('nbs/figure.html')), problems
    assert any('cut off on the right: <span' in p for p in on('nbs/math.html')), problems
    assert on('nbs/search.html') == ['nbs/search.html: 2 search boxes'], problems
    assert not on('nbs/table.html') and not on('nbs/wrapped.html') and not on('nbs/hung.html'), problems
    assert on('nbs/unhung.html') == [f'nbs/unhung.html: code wraps back to the left edge: "{long[:50]}"'], problems
    assert not on('README.html') and not on('index.html'), problems
    # a page naming no icon: the browser asks for /favicon.ico, which the site has not (if it asks before moving on)
    assert set(problems) <= {*on('nbs/code.html'), *on('nbs/figure.html'), *on('nbs/math.html'),
                             *on('nbs/search.html'), *on('nbs/no-icon.html'), *on('nbs/unhung.html')}, problems


def test_the_home_page_check_fails_without_the_verdict_and_the_command_on_its_first_screen(tmp_path):
    "The verdict and the run command must be on the home page's first screen (1280x900, not scrolled)."
    check = _docs_module('check')
    if not check.chromium(): pytest.skip('no chromium on PATH (apt-get install chromium): the browser check needs it')
    def home(body): return check.browser_problems(_crafted_site(tmp_path/str(len(list(tmp_path.iterdir()))), {},
                                                                home=body), tmp_path/'shots')
    assert home(HOME) == []
    low = home('<div style="height: 1000px">a long figure</div>' + HOME)
    assert len(low) == 3 and all(p.startswith('index.html: ') and 'not on the first screen' in p for p in low), low
    half = home(HOME.replace('</ul>', '</ul><div style="height: 1000px"></div>'))
    assert half == ["index.html: the run command is not on the first screen: 'papermill nbs/train.ipynb' ends "
                    f"{half[0].split(' ends ')[1].split(' px')[0]} px down, in a 900 px window"], half
    gone = home('<p>caopd</p>')
    assert gone == ["index.html: the verdict is not on the page (no text 'What the runs show')",
                    "index.html: the verdict is not on the page (no text 'On one GPU')",
                    "index.html: the run command is not on the page (no text 'papermill nbs/train.ipynb')"], gone


def test_a_stream_shows_its_result_and_its_tables():
    """A page shows what a cell printed without progress bars, warnings (and the source line under each) or the
    trainer's log dicts, the machine's paths as a reader's, and a printed Markdown table as a table."""
    import tempfile
    printed = (f"/x/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found\n"
               f"  from .autonotebook import tqdm as notebook_tqdm\n"
               f"Generating:   0%|          | 0/3 [00:00<?, ?it/s]\rGenerating: 100%|##########| 3/3 [00:01<00:00]\n"
               f"{{'loss': '0.4874', 'grad_norm': '1.045'}}\n"
               f"$ /x/.venv/bin/python -m caopd.train --settings {build.ROOT}/runs/r/settings.json\n"
               f"data: {build.ROOT.parent}/shared/data, cache {tempfile.gettempdir()}/tmpab12/cache\n\n"
               "| metric | before |\n| --- | ---: |\n| accuracy | 0.34 |\ndone\n")
    outs = build.stream_outputs(dict(output_type='stream', name='stdout', text=printed.splitlines(keepends=True)))
    assert [o['output_type'] for o in outs] == ['stream', 'display_data', 'stream'], outs
    assert outs[0]['text'] == ('$ python -m caopd.train --settings ./runs/r/settings.json\n'
                               'data: ../shared/data, cache $TMPDIR/tmpab12/cache\n'), outs[0]['text']
    assert outs[1]['data'] == {'text/markdown': '| metric | before |\n| --- | ---: |\n| accuracy | 0.34 |\n'}
    assert outs[2]['text'] == 'done\n'
    assert build.stream_outputs(dict(output_type='stream', name='stderr', text='  5%|5    | 1/20 [00:01<00:19]\n')) == []


def test_the_browser_check_fails_on_text_over_text_in_a_figure(tmp_path):
    "Two subplot titles drawn over each other are a problem; the same figure with room between them is not."
    check = _docs_module('check')
    if not check.chromium(): pytest.skip('no chromium on PATH (apt-get install chromium): the browser check needs it')
    import plotly, plotly.graph_objects as go
    from plotly.subplots import make_subplots
    def figure(spacing):
        fig = make_subplots(1, 2, subplot_titles=['Reliability after SDFT, expected', 'Reliability after CaOPD, expected'],
                            horizontal_spacing=spacing)
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1]), 1, 1); fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1]), 1, 2)
        return fig.update_layout(width=500, height=300).to_html(include_plotlyjs=False, full_html=False)
    site = _crafted_site(tmp_path/'site', {'nbs/tight.html': figure(0.01), 'nbs/roomy.html': figure(0.01).replace(
        'Reliability after CaOPD, expected', 'CaOPD')})
    for page in ('nbs/tight.html', 'nbs/roomy.html'):  # the site's own plotly.js, as docs/build.py serves it
        f = site/page; f.write_text(f.read_text().replace('<title>', '<script src="../_static/plotly.min.js"></script><title>'))
    shutil.copy(Path(plotly.__file__).parent/'package_data'/'plotly.min.js', site/'_static')
    problems = check.browser_problems(site, tmp_path/'shots')
    assert [p for p in problems if 'overlaps' in p] == [
        'nbs/tight.html: text overlaps in a figure: "Reliability after SDFT, expected" and "Reliability after CaOPD, expected"'
    ], problems
