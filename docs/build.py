"""The site of the notebooks (issue 40), built offline: README.md is the home page, every notebook of nbs/ a page with
its outputs, and every docs/**/*.md a page.

    .ci/env python docs/build.py [OUT] [--screenshots DIR]   # OUT defaults to _site/; then open OUT/index.html
    .ci/env python docs/build.py --execute nbs/03_metrics.ipynb  # run one notebook as nbdev_test does, into the cache

Library notebooks are shown as `nbdev_test` runs them (cells flagged slow or cuda skipped). `execute` is that run: it
does what `nbdev.test.test_nb` does and also writes the executed copy to `_build/notebooks/`, keyed by a hash of the
notebook and of the package; tests/test_notebooks.py runs every notebook through it, so after the suite the cache is
warm and the site executes only the notebooks missing there or stale. The papermill notebooks are shown with the
outputs of a committed run, `docs/executed/` (see its README.md), since they train or read runs for minutes.
"""
import argparse, atexit, functools, hashlib, json, os, re, shutil, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT/'docs'
CACHE = ROOT/'_build'/'notebooks'
EXECUTED = DOCS/'executed'  # papermill notebooks as a committed run left them, same paths as under nbs/
GIT_URL = 'https://github.com/caopd/caopd'  # settings.ini's git_url: links to repository files the site does not hold


def is_papermill(nb:Path) -> bool:
    "A parameterized run notebook (a `parameters` cell): nbdev_test skips it, tests/test_papermill_* run it."
    return any('parameters' in c.get('metadata', {}).get('tags', []) for c in json.loads(nb.read_text())['cells'])

def notebooks() -> list[Path]:
    "Every notebook of nbs/, as nbdev finds them (folders starting with _ or . left out)."
    return sorted(p for p in (ROOT/'nbs').rglob('*.ipynb')
                  if not any(part.startswith(('_', '.')) for part in p.relative_to(ROOT/'nbs').parts))

def library_notebooks() -> list[Path]: return [p for p in notebooks() if not is_papermill(p)]


# ---- executing a notebook as nbdev_test does, keeping its outputs -------------------------------------------------
def cache_key(nb:Path) -> str:
    "What an executed copy depends on: the notebook, the package's code and the project settings."
    h = hashlib.sha1(nb.read_bytes())
    for p in sorted((ROOT/'caopd').rglob('*.py')) + [ROOT/'settings.ini']:
        h.update(str(p.relative_to(ROOT)).encode()); h.update(p.read_bytes())
    return h.hexdigest()

def cached(nb:Path) -> Path: return CACHE/nb.relative_to(ROOT).with_suffix('.ipynb')

def is_fresh(nb:Path, key:str|None=None) -> bool:
    c = cached(nb)
    if not c.is_file(): return False
    try: return json.loads(c.read_text())['metadata'].get('caopd_cache_key') == (key or cache_key(nb))
    except (ValueError, KeyError): return False

@functools.cache  # read once: the site asks it of every code cell
def skip_flags() -> frozenset:
    "The cell flags nbdev_test skips unless asked (settings.ini's tst_flags): what `execute` skips and a page says."
    import configparser
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini')
    return frozenset(cfg['DEFAULT'].get('tst_flags', '').split())

def execute(nb:Path) -> bool:
    """Run `nb` as `nbdev_test --path nb` does (`nbdev.test.test_nb`: its title-cell frontmatter, the skipped flags of
    settings.ini, no `nbdev_export()`, in the notebook's folder); on success write the executed copy to the cache."""
    from fastcore.basics import str2bool
    from fastcore.xtras import working_directory
    from nbdev.config import get_config
    from nbdev.frontmatter import FrontmatterProc
    from nbdev.process import NBProcessor, nb_lang
    from execnb.shell import CaptureShell
    nb, cfg = Path(nb).resolve(), get_config()
    key = cache_key(nb)  # before running: a notebook that rewrites the package must not look fresh afterwards
    sys.path.insert(0, str(cfg.config_path))
    os.environ['IN_TEST'] = '1'
    # the environment tests/conftest.py gives the suite: offline, no PNG export, no caches written into the checkout
    for k, v in dict(HF_HUB_OFFLINE='1', HF_DATASETS_OFFLINE='1', TRANSFORMERS_OFFLINE='1', CAOPD_OFFLINE='1',
                     CAOPD_PNG='0').items(): os.environ.setdefault(k, v)
    scratch = tempfile.TemporaryDirectory(prefix='caopd_notebook_')  # removed when this process ends
    atexit.register(scratch.cleanup)
    for k in ('CAOPD_FIGURES_DIR', 'HYPOTHESIS_STORAGE_DIRECTORY'):
        os.environ.setdefault(k, f'{scratch.name}/{k.lower()}')
    os.environ.setdefault('PLOTLY_RENDERER', 'plotly_mimetype')  # figures kept as their JSON; the site draws them
    flags = skip_flags()
    proc = NBProcessor(nb, procs=FrontmatterProc, process=True).nb
    if str2bool(getattr(proc, 'frontmatter_', {}).get('skip_exec', False)) or nb_lang(proc) != 'python': return True

    def no_eval(cell):
        if cell.cell_type != 'code': return True
        if 'nbdev_export' + '(' in cell.source: return True
        direc = getattr(cell, 'directives_', {}) or {}
        if direc.get('eval:', [''])[0].lower() == 'false': return True
        return flags & direc.keys()
    shell = CaptureShell(nb)
    try:
        with working_directory(nb.parent): shell.run_all(proc, exc_stop=True, preproc=no_eval)
    except Exception:
        sys.stderr.write(shell.prettytb(fname=nb) + '\n')
        return False
    # outputs onto the notebook as written (the processed one lost its directives and title cell)
    out = json.loads(nb.read_text())
    for cell in proc.cells:
        if hasattr(cell, 'idx_') and cell.get('outputs'):
            out['cells'][cell.idx_]['outputs'] = json.loads(json.dumps(cell.outputs))
    out['metadata']['caopd_cache_key'] = key
    dest = cached(nb)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix('.tmp')
    tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False))
    tmp.replace(dest)
    return True

def serve():
    "Execute the notebooks named on standard input in turn, as nbdev_test's workers do (one shell per notebook, one process)."
    import contextlib, io
    for line in sys.stdin:
        nb, log = Path(line.strip()), io.StringIO()
        with contextlib.redirect_stderr(log):
            try: passed = nb.is_file() and execute(nb)
            except Exception as e: passed = False; log.write(f'{type(e).__name__}: {e}\n')
        if not nb.is_file(): log.write(f'docs/build.py: {nb}: no such notebook\n')
        print('caopd-lesson ' + json.dumps(dict(notebook=str(nb), passed=passed, log=log.getvalue()[-6000:])), flush=True)

def execute_stale(nbs:list[Path]):
    "Execute (one process each, as many at once as CPUs) the notebooks whose cached copy is missing or stale."
    stale = [nb for nb in nbs if not is_fresh(nb)]
    if not stale: return
    print(f'executing {len(stale)} notebook(s) not in the cache: {", ".join(p.name for p in stale)}', flush=True)
    def run(nb):
        cmd = [sys.executable, __file__, '--execute', str(nb)]
        return nb, subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        failed = [(nb, r) for nb, r in pool.map(run, stale) if r.returncode]
    if failed:
        for nb, r in failed: sys.stderr.write(f'--- {nb.relative_to(ROOT)}\n{r.stderr[-3000:]}\n')
        raise SystemExit(f'docs/build.py: {len(failed)} notebook(s) failed: '
                         + ', '.join(str(nb.relative_to(ROOT)) for nb, _ in failed))


# ---- staging a source folder that mirrors the repository -----------------------------------------------------------
DIRECTIVE = re.compile(r'^\s*#\|\s*([\w-]+)', re.M)
FRONTMATTER_LINE = re.compile(r'^-\s+[\w-]+:\s.*\n?', re.M)  # `- skip_exec: true` in a title cell: nbdev's, not prose
LINK = re.compile(r'(\]\(|<img [^>]*src=")([^)"#\s]+)')

def github_links(text:str, src:Path, stage:Path) -> str:
    "Links to repository files the site does not hold (code, data, settings) point at them on GitHub instead."
    def fix(m):
        target = m.group(2)
        if re.match(r'^[a-z]+:|^/', target): return m.group(0)  # external or absolute: left alone
        repo_path = (src.parent/target).resolve()
        try: rel = repo_path.relative_to(ROOT)
        except ValueError: return m.group(0)
        if (stage/rel).exists() or not repo_path.exists(): return m.group(0)  # on the site, or broken: Sphinx says
        kind = 'tree' if repo_path.is_dir() else 'blob'
        return f'{m.group(1)}{GIT_URL}/{kind}/main/{rel.as_posix()}'
    return LINK.sub(fix, text)

def plotly_html(fig:dict) -> str:
    "A figure's HTML for the page: drawn by the site's plotly.js, as wide as the page (its height kept)."
    import plotly.io as pio
    fig = {**fig, 'layout': {k: v for k, v in fig.get('layout', {}).items() if k != 'width'}}
    return pio.to_html(fig, include_plotlyjs=False, include_mathjax=False, full_html=False, default_width='100%',
                       config={**fig.get('config', {}), 'responsive': True})

# What a page shows of an output: its result. Left out of streams (the executed notebook keeps them): progress bars,
# warnings (a library's deprecations, with the line of source Python prints under each) and the trainer's log dicts,
# which the lessons and the run's own tables report; and paths of the machine that ran it written as a reader's
PROGRESS = re.compile(r'^\s*[^|\n]*\d+%\|[^|\n]*\|[^\n]*$|^\s*[^\n]*\d+/\d+ \[\d\d:\d\d<[^\n]*$')
WARNING = re.compile(r'\S+:\d+: [A-Z]\w*Warning: ')
LOG_DICT = re.compile(r"^\{'(?:loss|train_runtime|eval_[\w/]+)': .*\}\s*$")

def shown_paths(text:str) -> str:
    "Paths of the machine that ran a notebook as a reader's: the repository `.`, its parent `..`, home `~`, temp `$TMPDIR`."
    text = re.sub(r'(?:/[\w.-]+)*/bin/python(?:3(?:\.\d+)?)?\b', 'python', text)  # a virtual environment's python
    for path, shown in ((ROOT, '.'), (ROOT.parent, '..'), (Path.home(), '~'), (Path(tempfile.gettempdir()), '$TMPDIR')):
        text = re.sub(re.escape(str(path)) + r'(?=/|\b)', lambda m: shown, text)
    return text

def shown_stream(text:str) -> str:
    "A stream's text as a page shows it: its lines but progress bars, warnings and log dicts, paths as a reader's."
    lines, kept, skip_source = text.split('\n'), [], False
    for line in lines:
        line = line.rsplit('\r', 1)[-1]  # a line redrawn in place (tqdm): its last state
        if skip_source and line.startswith('  '): skip_source = False; continue  # the warned line of source
        skip_source = bool(WARNING.search(line))  # a warning, perhaps written after a progress bar on its line
        if skip_source or PROGRESS.match(line) or LOG_DICT.match(line): continue
        if not line.strip() and (not kept or not kept[-1].strip()): continue  # one blank line where bars were
        kept.append(line.rstrip() if not line.strip() else line)
    return shown_paths('\n'.join(kept))

TABLE_LINE = re.compile(r'^\s*\|.*\|\s*$')
RULE = re.compile(r'^\s*\|(?:\s*:?-{3,}:?\s*\|)+\s*$')

def stream_outputs(o:dict) -> list[dict]:
    """A stream as it is shown: `shown_stream`'s text, each Markdown table it prints (a header line, then `| --- |`) as
    a Markdown output of its own, so the page draws a table; none for a stream left empty."""
    lines, outs, text = shown_stream(''.join(o['text'])).split('\n'), [], []
    def flush():
        if ''.join(text).strip(): outs.append({**o, 'text': '\n'.join(text).strip('\n') + '\n'})
        text.clear()
    i = 0
    while i < len(lines):
        if TABLE_LINE.match(lines[i]) and i + 1 < len(lines) and RULE.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and TABLE_LINE.match(lines[j]): j += 1
            flush()
            outs.append(dict(output_type='display_data', metadata={},
                             data={'text/markdown': '\n'.join(l.strip() for l in lines[i:j]) + '\n'}))
            i = j
        else: text.append(lines[i]); i += 1
    flush()
    return outs

def page(executed:Path, src:Path, stage:Path) -> dict:
    """The notebook as a page: nbdev's directives handled (`#| hide` cells hidden, `#|` lines dropped), plotly figures
    given an HTML view drawn by the site's own plotly.js, the CDN loaders a Jupyter kernel writes dropped, streams as
    `stream_outputs` shows them (no progress bars, warnings or log dicts; printed tables drawn) and paths as a reader's."""
    nb = json.loads(executed.read_text())
    cells, first_md = [], True
    for c in nb['cells']:
        src_text = ''.join(c['source'])
        if c['cell_type'] == 'markdown':
            if first_md: src_text, first_md = FRONTMATTER_LINE.sub('', src_text), False
            c['source'] = github_links(src_text, src, stage)
        elif c['cell_type'] == 'code':
            if 'hide' in DIRECTIVE.findall(src_text) or 'nbdev_export' + '(' in src_text: continue
            c['source'] = '\n'.join(l for l in src_text.splitlines() if not l.lstrip().startswith('#|')).strip()
            if not c['source']: continue  # a cell that held only `#| default_exp`
            skipped = sorted(set(DIRECTIVE.findall(src_text)) & skip_flags())
            if skipped and not c.get('outputs'):  # nbdev_test skips it: the page says so under its code
                flag = skipped[0]
                c['outputs'] = [dict(output_type='display_data', metadata={}, data={'text/markdown': (
                    f'*Not run for this page: a `#| {flag}` cell, which `nbdev_test` skips; '
                    f'`.ci/env nbdev_test --flags {flag} --path {src.relative_to(ROOT).as_posix()}` runs it.*\n')})]
            outputs = []
            for o in c.get('outputs', []):
                d = o.get('data', {})
                if o.get('output_type') == 'stream':
                    outputs += stream_outputs(o); continue
                for kind in ('text/plain', 'text/markdown'):
                    if kind in d: d[kind] = shown_paths(''.join(d[kind]))
                if 'application/vnd.plotly.v1+json' in d:
                    d['text/html'] = plotly_html(d.pop('application/vnd.plotly.v1+json'))
                elif 'cdn.plot.ly' in ''.join(d.get('text/html', '')): continue  # plotly's notebook loader
                outputs.append(o)
            c['outputs'] = outputs
        cells.append(c)
    nb['cells'] = cells
    nb['metadata'].pop('caopd_cache_key', None)
    return nb

def code_cells(nb:Path) -> list[str]:
    "The code a notebook runs, without the parameters cell papermill injects."
    return [''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code'
            and 'injected-parameters' not in c.get('metadata', {}).get('tags', [])]

STALE_RUN = ('```{note}\nThe outputs below are those of a run of an earlier version of this notebook, whose code is shown '
             'here. `docs/executed/README.md` says what made each run, and `docs/executed/make.sh` how to remake it.\n```')

def toctree(caption:str, entries:list[str]) -> str:
    "A hidden toctree (the sidebar's navigation); none for no entries (no docs/ pages yet, say)."
    if not entries: return ''
    return f'\n```{{toctree}}\n:caption: {caption}\n:hidden:\n:maxdepth: 1\n\n' + '\n'.join(entries) + '\n```\n'

# the guides in the order a newcomer reads them (the sidebar's); a page not named here follows them, by file name
READING_ORDER = ['installing', 'results-laptop', 'results-gpu', 'results-chemistry', 'readout', 'your-task', 'runs',
                 'gpu-node', 'paper-tables', 'lab-notebook', 'developing']

def doc_pages() -> list[Path]:
    "The Markdown pages of docs/ in reading order (the site's own files, executed runs and _static left out)."
    pages = [p for p in DOCS.rglob('*.md') if not p.relative_to(DOCS).parts[0] in ('executed', '_static')]
    order = lambda p: (READING_ORDER.index(p.stem) if p.stem in READING_ORDER else len(READING_ORDER), p.as_posix())
    return sorted(pages, key=order)

def stage(dest:Path):
    "A Sphinx source folder with the repository's layout, so README's repo-relative links resolve as on GitHub."
    (dest/'nbs').mkdir(parents=True)
    (dest/'figures').symlink_to(ROOT/'figures')  # the images pages show; Sphinx copies those it uses
    # every page exists before any link is rewritten, so a link to a page the site has stays on the site (a docs/ page
    # linking to a later one, or to a notebook, went to GitHub when the pages were written one after another)
    for p in [ROOT/'README.md', *doc_pages(), *notebooks()]:
        (dest/p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True); (dest/p.relative_to(ROOT)).touch()
    for p in doc_pages(): (dest/p.relative_to(ROOT)).write_text(github_links(p.read_text(), p, dest))
    for nb in notebooks():
        executed = cached(nb) if not is_papermill(nb) else EXECUTED/nb.relative_to(ROOT/'nbs')
        if not executed.is_file(): executed = nb  # never executed (a preview, or no committed run): its code alone
        shown = page(executed, nb, dest)
        if is_papermill(nb) and executed != nb and code_cells(executed) != code_cells(nb):  # said on the page
            print(f'{nb.relative_to(ROOT)}: its committed run ran an earlier version of it (docs/executed/make.sh)')
            at = next((i + 1 for i, c in enumerate(shown['cells']) if c['cell_type'] == 'markdown'), 0)
            shown['cells'].insert(at, dict(cell_type='markdown', id='stale-run', metadata={}, source=STALE_RUN))
        (dest/nb.relative_to(ROOT)).write_text(json.dumps(shown))
    lessons = library_notebooks()
    runs = [nb for nb in notebooks() if is_papermill(nb)]
    home = github_links((ROOT/'README.md').read_text(), ROOT/'README.md', dest)
    # the README stays the one source of the home page; the site's navigation is appended to the staged copy only
    home += toctree('Lessons', [nb.relative_to(ROOT).with_suffix('').as_posix() for nb in lessons])
    home += toctree('Runs', [nb.relative_to(ROOT).with_suffix('').as_posix() for nb in runs])
    home += toctree('Results and guides', [p.relative_to(ROOT).with_suffix('').as_posix() for p in doc_pages()])
    (dest/'README.md').write_text(home)
    static = dest/'_static'
    shutil.copytree(DOCS/'_static', static) if (DOCS/'_static').is_dir() else static.mkdir()
    # served from the site: plotly.js of the plotly that drew the figures, and MathJax 3 with SVG fonts
    import plotly, mathjax
    shutil.copy(Path(plotly.__file__).parent/'package_data'/'plotly.min.js', static)
    shutil.copy(Path(mathjax.__file__).parent/'static'/'mathjax'/'es5'/'tex-svg-full.js', static)
    shutil.copy(DOCS/'conf.py', dest)


# ---- the site ------------------------------------------------------------------------------------------------------
def build(out:Path, screenshots:Path|None=None, run:bool=True) -> Path:
    """Build the site into `out` (replaced), executing only the library notebooks not in the cache (`run=False`: a
    preview that executes nothing, showing cached copies even if stale, code alone elsewhere); with `screenshots`,
    check it (docs/check.py) and save the screenshots there."""
    if out.exists() and any(out.iterdir()) and not (out/'.buildinfo').exists():  # never remove what is not a site
        raise SystemExit(f'docs/build.py: {out} is neither empty nor a site built before: give a new or empty folder')
    if run: execute_stale(library_notebooks())
    with tempfile.TemporaryDirectory(prefix='caopd_site_') as tmp:
        src, warnings = Path(tmp)/'src', Path(tmp)/'warnings.txt'
        stage(src)
        if out.exists(): shutil.rmtree(out)
        # -n: every reference and image must resolve; the warnings are the build's failures
        # built inside the temporary folder, then copied: MyST-NB writes its jupyter_execute/ beside the output folder
        html = Path(tmp)/'html'
        cmd = [sys.executable, '-m', 'sphinx', '-b', 'html', '-n', '-q', '-j', 'auto', '-w', str(warnings),
               '-d', str(Path(tmp)/'doctrees'), str(src), str(html)]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        found = warnings.read_text().strip() if warnings.exists() else ''
        if r.returncode or found:
            raise SystemExit(f'docs/build.py: sphinx-build reported problems:\n{found or r.stderr[-3000:]}')
        shutil.copytree(html, out)
    # the home page is README.html (its one source); a site is opened at index.html
    (out/'index.html').write_text('<!DOCTYPE html><meta charset="utf-8"><title>caopd</title>'
                                  '<link rel="icon" href="_static/favicon.svg"><meta http-equiv="refresh" '
                                  'content="0; url=README.html"><a href="README.html">caopd</a>\n')
    (out/'.nojekyll').touch()
    if screenshots is not None:
        sys.path.insert(0, str(DOCS))  # docs/check.py, beside this file
        from check import check_site
        problems = check_site(out, screenshots)
        if problems: raise SystemExit('docs/build.py: the browser check failed:\n' + '\n'.join(problems))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('out', nargs='?', default=str(ROOT/'_site'), help='output folder (replaced; default: _site/)')
    ap.add_argument('--screenshots', metavar='DIR', help='check the site in headless chromium and save a PNG per page '
                    '(figures/site/ holds the committed ones)')
    ap.add_argument('--no-execute', action='store_true', help='a quick preview: execute nothing, show '
                    'cached notebooks even if stale and the others without outputs')
    ap.add_argument('--execute', metavar='NB', help='execute one notebook as nbdev_test does and cache its outputs; '
                    "'-': execute the notebooks named on standard input, one a line, each answered on standard output "
                    'by a line `caopd-lesson {"notebook", "passed", "log"}` (a worker: it imports its libraries once)')
    a = ap.parse_args()
    if a.execute == '-': return serve()
    if a.execute:
        nb = Path(a.execute)
        if not nb.is_file(): raise SystemExit(f'docs/build.py: --execute {nb}: no such notebook')
        raise SystemExit(0 if execute(nb) else 1)
    out = build(Path(a.out).resolve(), Path(a.screenshots).resolve() if a.screenshots else None, run=not a.no_execute)
    print(f'site: {out}/index.html')

if __name__ == '__main__': main()
