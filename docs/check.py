"""Checks of a built site (docs/build.py), each run on every page:

- from the HTML: every internal link and image exists; no Markdown table is shown as its raw `| a | b |` text; no link
  leaves the site for the repository host (settings.ini's git_url) to show a file the site has a page for; every page
  names its icon (else the browser asks for /favicon.ico);
- from the figures the pages show as images: no text of a figure drawn smaller than `MIN_TEXT_PX` at the width the
  site shows it (`SITE_WIDTH`), read from the plotly JSON saved beside each PNG;
- from the text: no table left as text, progress bar, warning, trainer's log dict, model printout or path of the
  building machine in a cell's output; no LaTeX left untypeset or label of the paper's source in prose; no page showing
  outputs of an older version of its notebook;
- in one headless Chromium tab, 1280 px wide: every page loads without a JavaScript error, a request the site cannot
  serve or one outside it, its plotly figures drawn and formulas typeset, one search box, and nothing cut off on the
  right: no element whose content is scrolled, clipped or spilling past the column (code, an equation, a figure; a
  table may scroll in its own box), no page wider than the window, no text of a figure over another and no wrapped line
  of code back at the left edge (it hangs under its indentation); the home page
  shows what the runs show and the command that runs it on its first screen (1280x900, not scrolled). Home, the
  theory lesson and a results page are photographed (figures/site/ keeps them).

    .ci/env python docs/check.py SITE SCREENSHOTS
"""
import configparser, functools, html.parser, json, re, shutil, struct, threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from caopd.figures import SITE_WIDTH  # px: the article's column in a WIDTH px window; a wider image is scaled to it

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = 'chromium'  # Debian's package (.ci/run installs it); Playwright drives it, no browser download
WIDTH, HEIGHT = 1280, 900  # a laptop's window: the width the overflow check holds the pages to
SLACK = 8  # px an element may overhang its box (a formula's italic correction) before it counts as cut off
# what the home page's first screen shows a reader, by text it holds: the README's verdict (its first and last lines'
# openings) and the main job's command
FIRST_SCREEN = {'the verdict': ['What the runs show', 'On one GPU'], 'the run command': ['papermill nbs/train.ipynb']}


def chromium() -> str|None: return shutil.which(CHROMIUM)

def repository_url(root:Path=ROOT) -> str:
    "The repository's address on its host: settings.ini's git_url (docs/build.py's GIT_URL)."
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(root/'settings.ini')
    return cfg['DEFAULT'].get('git_url', '').rstrip('/')

def site_pages(site:Path) -> list[Path]:
    "Every page of the site: its HTML files but the theme's templates under _static/."
    return sorted(p for p in site.rglob('*.html') if p.relative_to(site).parts[0] != '_static')


class _Refs(html.parser.HTMLParser):
    "The targets a page points at (a href, img src, link href, script src), the ids it holds and its icon, if any."
    def __init__(self):
        super().__init__(); self.refs, self.ids, self.icon = [], set(), None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get('id'): self.ids.add(a['id'])
        key = {'a': 'href', 'link': 'href', 'img': 'src', 'script': 'src'}.get(tag)
        if key and a.get(key): self.refs.append((tag, a[key]))
        if tag == 'link' and 'icon' in (a.get('rel') or '').split() and a.get('href'): self.icon = a['href']

def _parse(page:Path) -> _Refs:
    st = page.stat()
    return _parsed(page, st.st_mtime_ns, st.st_size)

@functools.lru_cache(maxsize=None)
def _parsed(page:Path, mtime_ns:int, size:int) -> _Refs:  # each page parsed once per version of it (they are megabytes)
    p = _Refs(); p.feed(page.read_text(errors='replace')); return p

def link_problems(site:Path) -> list[str]:
    "Internal links and images of every page that point at a file (or an anchor of a page) the site does not have."
    site, problems, parsed = site.resolve(), [], {}
    def refs(page):
        if page not in parsed: parsed[page] = _parse(page)
        return parsed[page]
    for page in site_pages(site):
        for tag, ref in refs(page).refs:
            u = urlsplit(ref)
            if u.scheme or u.netloc or ref.startswith(('#', 'javascript:')): continue  # external, or this page
            target = (page.parent/unquote(u.path)).resolve()
            if u.path.endswith('/') or target.is_dir(): target = target/'index.html'
            where = f'{page.relative_to(site)}: <{tag}> {ref}'
            if not target.is_relative_to(site): problems.append(f'{where} points outside the site')
            elif not target.is_file(): problems.append(f'{where}: no such file in the site')
            elif u.fragment and target.suffix == '.html' and unquote(u.fragment) not in refs(target).ids:
                problems.append(f'{where}: no anchor #{u.fragment} there')
    return problems


RAW_TABLE = re.compile(r'<p>\|[^<|]*\|[^<|]*\|[^<]*')  # a paragraph that starts `| a | b |`: a table left as text

def raw_table_problems(site:Path) -> list[str]:
    "Markdown tables shown as their raw `| a | b |` text (MyST-NB renders outputs as CommonMark, which has no tables)."
    site = site.resolve()
    return [f'{p.relative_to(site)}: a table shown as raw text: {m.splitlines()[0][:80]}'
            for p in site_pages(site) for m in RAW_TABLE.findall(p.read_text(errors='replace'))]

class _Text(html.parser.HTMLParser):
    """A page's text in pieces, each marked as a cell's output (`cell_output`), code (pre: the page shows it as
    written), inline code (code in a sentence) or prose; text MathJax typesets (`math` spans and divs), scripts and
    styles are left out."""
    SKIP = ('script', 'style')
    def __init__(self):
        super().__init__(convert_charrefs=True); self.stack, self.pieces = [], []
    def handle_starttag(self, tag, attrs):
        if tag in ('br', 'img', 'hr', 'meta', 'link', 'input', 'wbr', 'col', 'source'): return  # void elements
        cls = (dict(attrs).get('class') or '').split()
        self.stack.append((tag, 'cell_output' in cls, 'math' in cls))
    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag: del self.stack[i:]; return
    def handle_data(self, data):
        tags = [t for t, _, _ in self.stack]
        if any(t in self.SKIP for t in tags) or any(m for _, _, m in self.stack) or not data.strip(): return
        kind = ('output' if any(o for _, o, _ in self.stack) else 'code' if 'pre' in tags else 'inline code' if 'code' in tags
                else 'prose')
        self.pieces.append((kind, data))

# what a reader should never see in a cell's output: progress bars, warnings, a trainer's log dicts, a model's
# printout, and paths of the machine that built the page (its virtual environment, its temporary folders)
OUTPUT_NOISE = {'a progress bar': re.compile(r'\d+%\|[^|\n]*\||\d+/\d+ \[\d\d:\d\d<'),
                'a warning': re.compile(r'\b[A-Z]\w*Warning\b'),
                "a trainer's log dict": re.compile(r"\{'(?:loss|train_runtime|eval_loss)': "),
                "a model's printout": re.compile(r'\b\w+ForCausalLM\(\n'),
                'a path of the machine that built it': re.compile(r'(?<![\w.~])/(?:tmp|root|home|work|usr|opt|var)/[\w.-]+')}
# in prose: LaTeX the site did not typeset (a formula split by a table's `|`, a `$` left over) and the paper's labels
LITERAL_LATEX = re.compile(r'\\(?:frac|hat|mathbb|mathcal|max|min|sum|big|left|right|mu|sigma|alpha|lambda)\b|\$[^\s$]')
PAPER_LABEL = re.compile(r'\b(?:eq|tab|fig|sec|app|prop|thm):[A-Za-z][\w-]*')
RAW_TABLE_TEXT = re.compile(r'^\s*\|[^\n]*\|\s*\n\s*\|[ :|-]*-{3}[ :|-]*\|', re.M)  # a header line, then `| --- |`
STALE = 'The outputs below are those of a run of an earlier version of this notebook'  # docs/build.py's note

def text_problems(site:Path) -> list[str]:
    """What every page's text shows that a reader should not see: tables left as text in outputs, noise in outputs
    (`OUTPUT_NOISE`), LaTeX left untypeset or the paper's labels in prose, and outputs of an older notebook."""
    site, problems = site.resolve(), []
    for page in site_pages(site):
        html_text = page.read_text(errors='replace')
        t = _Text(); t.feed(html_text)
        outputs = '\n'.join(d for k, d in t.pieces if k == 'output')
        prose = '\n'.join(d for k, d in t.pieces if k == 'prose')
        name = page.relative_to(site).as_posix()
        say = lambda what, m: problems.append(f'{name}: {what}: {m.group(0).strip()[:60]!r}')
        if m := RAW_TABLE_TEXT.search(outputs): say('a table shown as raw text in an output', m)
        for what, pattern in OUTPUT_NOISE.items():
            if m := pattern.search(outputs): say(f'{what} in an output', m)
        if m := LITERAL_LATEX.search(prose): say('LaTeX shown as text', m)
        inline = '\n'.join(d for k, d in t.pieces if k == 'inline code')  # `tab:x` in a sentence is still a label
        if m := PAPER_LABEL.search(prose + '\n' + inline): say("a label of the paper's source shown as text", m)
        if STALE in html_text: problems.append(f'{name}: its outputs come from an older version of its notebook')
    return problems


MIN_TEXT_PX = 10  # the smallest text a figure may show, in px of the screen
IMAGE = re.compile(r'!\[[^\]]*\]\(([^)\s]+\.png)\)')

def _text_sizes(fig:dict) -> dict:
    "Each kind of text a plotly figure (its JSON) draws, and the smallest font size it is drawn at, in the figure's px."
    lay, sizes = fig.get('layout', {}), {}
    base = (lay.get('font') or {}).get('size') or 12  # plotly's default, which its templates keep
    def put(what, font, default=base): sizes[what] = min(sizes.get(what, 1e9), (font or {}).get('size') or default)
    put('the legend', (lay.get('legend') or {}).get('font'))
    if (lay.get('title') or {}).get('text'): put('the title', lay['title'].get('font'), 1.4 * base)
    if ((lay.get('title') or {}).get('subtitle') or {}).get('text'): put('the subtitle', lay['title']['subtitle'].get('font'))
    for a in lay.get('annotations', []):
        if a.get('text'): put(f"an annotation ({str(a['text'])[:30]!r})", a.get('font'))
    for k, ax in lay.items():
        if k.startswith(('xaxis', 'yaxis')) and isinstance(ax, dict) and ax.get('visible', True) is not False:
            put(f'the {k} tick labels', ax.get('tickfont'))
    for t in fig.get('data', []):
        if t.get('text') is not None and ('text' in (t.get('mode') or '') or t.get('type') == 'bar'):
            put(f"the text on {t.get('name') or t.get('type')!r}", t.get('textfont'))
    return sizes


def figure_text_problems(root:Path=ROOT) -> list[str]:
    """Figures the README and docs/ show as PNG whose smallest text, at the width the site shows them (`SITE_WIDTH`, or
    their own if narrower), is under `MIN_TEXT_PX`: read from the plotly JSON `caopd.saving.save_figure` writes beside;
    and PNGs drawn at another size than their figure's layout."""
    problems = []
    for md in [root/'README.md', *sorted((root/'docs').rglob('*.md'))]:
        for ref in IMAGE.findall(md.read_text(errors='replace')):
            png = md.parent/unquote(ref)
            spec = png.with_suffix('.json')
            if not spec.is_file(): continue  # a screenshot, not a figure
            fig = json.loads(spec.read_text())
            size = ((fig.get('layout') or {}).get('width') or 700, (fig.get('layout') or {}).get('height') or 500)
            head = png.read_bytes()[16:24]  # a PNG's width and height, after its signature
            drawn = struct.unpack('>II', head) if len(head) == 8 else size
            if drawn != size:  # (plotly's defaults where the layout has none)
                problems.append(f'{md.relative_to(root)}: {ref} is {drawn[0]}x{drawn[1]} px, its figure {size[0]}x{size[1]}: '
                                'drawn at another size than its layout says')
            scale = min(1.0, SITE_WIDTH / size[0])
            what, px = min(_text_sizes(fig).items(), key=lambda kv: kv[1])
            if px * scale < MIN_TEXT_PX:
                problems.append(f'{md.relative_to(root)}: {ref}: its smallest text ({what}) is {px * scale:.1f} px where '
                                f'it is shown ({px:g} px in a figure scaled to {scale:.2f}); at least {MIN_TEXT_PX} px reads')
    return problems


def offsite_link_problems(site:Path, repo:str|None=None) -> list[str]:
    """Links that leave the site for the repository host to show a file the site has a page for (a notebook, a docs/
    page, the README): the reader should get the site's page, with its outputs, not the repository's file."""
    site, repo, problems = site.resolve(), (repo or repository_url()).rstrip('/'), []
    if not repo: return problems
    at = re.compile(re.escape(repo) + r'/(?:blob|tree|raw)/[^/]+/(?P<path>[^?#]+)')
    for page in site_pages(site):
        for tag, ref in _parse(page).refs:
            m = at.match(ref) if tag == 'a' else None
            if not m: continue
            path = Path(unquote(m['path']))
            if path.suffix in ('.md', '.ipynb') and (site/path.with_suffix('.html')).is_file():
                problems.append(f'{page.relative_to(site)}: <a> {ref} leaves the site for its own page '
                                f'{path.with_suffix(".html").as_posix()}')
    return problems

def favicon_problems(site:Path) -> list[str]:
    "Pages that name no icon where the site has no /favicon.ico: the browser asks for that, and the server answers 404."
    site = site.resolve()
    if (site/'favicon.ico').is_file(): return []
    return [f'{p.relative_to(site)}: no <link rel="icon">, and the site has no favicon.ico for the browser to find'
            for p in site_pages(site) if not _parse(p).icon]

def html_problems(site:Path) -> list[str]:
    """What the pages' HTML shows wrong, on every page: broken links, raw tables, links off the site to its own pages,
    no icon, and what their text shows that it should not (`text_problems`)."""
    return (link_problems(site) + raw_table_problems(site) + offsite_link_problems(site) + favicon_problems(site)
            + text_problems(site))


def results_page(site:Path) -> str:
    "A results page: a docs/ page with a figure or else a table (one named results first), else the seeds notebook's."
    def rank(p:Path):
        text = p.read_text(errors='replace')
        figure = '<img' in text or 'plotly-graph-div' in text
        return (not (figure or '<table' in text), 'result' not in p.name, not figure, p.relative_to(site).as_posix())
    ranked = sorted(map(rank, (site/'docs').rglob('*.html'))) if (site/'docs').is_dir() else []
    return ranked[0][-1] if ranked and not ranked[0][0] else 'nbs/seeds.html'

def pages(site:Path) -> dict[str, str]:
    "The three pages the browser opens, by the name of their screenshot."
    return {'home': 'index.html', 'lesson': 'nbs/04_theory.html', 'results': results_page(site)}


# What is cut off on the right, in the article's column: an element that clips or scrolls its content (overflow hidden,
# auto, scroll) narrower than that content (code, a display equation), one whose content spills past the column's right
# edge, innermost first (their ancestors overflow because of them); and the page's own width against the window's. A
# table may scroll in its own box (the theme's scrollable container, or a DataFrame's output): twenty columns cannot
# wrap into a column, and its box shows a scrollbar.
OVERFLOW = """slack => {
  const article = document.querySelector('.bd-article') || document.querySelector('main') || document.body;
  const right = article.getBoundingClientRect().right - parseFloat(getComputedStyle(article).paddingRight);
  const isTableBox = e => e.matches('.pst-scrollable-table-container, .output.text_html') && e.querySelector('table');
  const clipped = e => { for (let a = e.parentElement; a && a !== article; a = a.parentElement)
                           if (getComputedStyle(a).overflowX !== 'visible') return true; return false; };
  const cut = e => {
    if (!(e instanceof HTMLElement) || e.closest('.plotly-graph-div, mjx-assistive-mml') || !e.clientWidth) return false;
    if (getComputedStyle(e).overflowX !== 'visible') return e.scrollWidth - e.clientWidth > slack && !isTableBox(e);
    // content spilling past the column, unless a box around it clips or scrolls it (that box is the one cut off)
    return e.getBoundingClientRect().left + e.scrollWidth > right + slack && !clipped(e);
  };
  const wide = [...article.querySelectorAll('*')].filter(cut);
  const innermost = wide.filter(e => !wide.some(d => d !== e && e.contains(d)));
  const text = e => [...(e.innerText || e.textContent || '').trim().replace(/\\s+/g, ' ')].slice(0, 60).join('');
  const say = e => `<${e.tagName.toLowerCase()}${e.className ? ' class="' + e.className + '"' : ''}> ${e.scrollWidth} px`
    + ` wide in ${e.clientWidth} px: "${text(e)}"`;
  return {cut: innermost.map(say), page: document.documentElement.scrollWidth, window: window.innerWidth};
}"""
# search fields and buttons a reader can see outside the article (the search page's own form is its content)
SEARCH_BOXES = """() => [...document.querySelectorAll('.search-button__button, form.bd-search')]
  .filter(e => e.offsetWidth && getComputedStyle(e).visibility !== 'hidden'
               && !e.closest('.bd-article, .bd-search-container')).length"""
# the bottom of the innermost block holding a text, the first in the article (-1: none holds it), the page not scrolled
TEXT_BOTTOM = """text => {
  const article = document.querySelector('.bd-article') || document.querySelector('main') || document.body;
  const holds = e => (e.textContent || '').includes(text);
  const inner = [...article.querySelectorAll('*')].filter(e => holds(e) && ![...e.children].some(holds));
  return inner.length ? inner[0].getBoundingClientRect().bottom + window.scrollY : -1;
}"""
# text of a drawn plotly figure that overlaps other text of it: titles, subplot titles and annotations, axis titles
OVERLAPS = """() => {
  const found = [];
  document.querySelectorAll('div.plotly-graph-div').forEach(div => {
    const boxes = [...div.querySelectorAll('.gtitle, .annotation-text, .xtitle, .ytitle, .g-xtitle text, .g-ytitle text')]
      .filter(e => (e.textContent || '').trim()).map(e => [e.textContent.trim(), e.getBoundingClientRect()]);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const [a, r] = boxes[i], [b, q] = boxes[j];
      const w = Math.min(r.right, q.right) - Math.max(r.left, q.left), h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
      if (w > 2 && h > 2 && a !== b) found.push(`"${a.slice(0, 40)}" and "${b.slice(0, 40)}"`);
    }
  });
  return found;
}"""
# lines of highlighted code (a cell, an output) that wrap back to the column's left edge instead of hanging under their
# own indentation (site.js): each source line as a range of text, its later line boxes against its first
WRAPPED_CODE = """() => {
  const found = [];
  document.querySelectorAll('.bd-article div.highlight > pre').forEach(pre => {
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT), nodes = [];
    for (let n; (n = walker.nextNode());) nodes.push(n);
    let start = null, line = '';
    const close = (node, offset) => {
      if (!start || !line.trim()) return;
      const r = document.createRange(); r.setStart(start[0], start[1]); r.setEnd(node, offset);
      const rects = [...r.getClientRects()].filter(q => q.width > 0);
      if (!rects.length) return;
      const later = rects.filter(q => q.top > rects[0].top + 2);
      if (later.length && Math.min(...later.map(q => q.left)) <= rects[0].left + 2) found.push(line.trim().slice(0, 50));
    };
    for (const n of nodes) for (let i = 0; i < n.data.length; i++) {
      if (!start) { start = [n, i]; line = ''; }
      if (n.data[i] === '\\n') { close(n, i); start = null; } else line += n.data[i];
    }
    if (start) close(nodes[nodes.length - 1], nodes[nodes.length - 1].data.length);
  });
  return found;
}"""
UNDRAWN = "[...document.querySelectorAll('div.plotly-graph-div')].filter(d => !d.querySelector('svg.main-svg'))"


# what a reader searches for, and the page that answers: it must be among the first results, and no result's snippet
# may be the page's chrome (the words of the header's buttons)
SEARCHES = {'readout': 'docs/readout.html'}
SEARCH_TOP, CHROME_WORDS = 3, 'System Settings Light Dark'
SEARCH_RESULTS = """() => [...document.querySelectorAll('#search-results li')].map(li => [
  li.querySelector('a') ? new URL(li.querySelector('a').href).pathname.replace(/^\\//, '') : '',
  (li.querySelector('.context') || {}).textContent || ''])"""

def search_problems(pg, base:str) -> list[str]:
    "Each of `SEARCHES` on the site's search page (open in `pg`, a Playwright page): its answer in the top, no chrome."
    problems = []
    for query, want in SEARCHES.items():
        pg.goto(f'{base}search.html?q={query}', wait_until='load')
        try: pg.wait_for_function("document.querySelector('.search-summary') && Search._pulse_status < 0", timeout=20_000)
        except Exception: problems.append(f'search.html: no results for {query!r} in 20 s'); continue
        pg.wait_for_timeout(500)  # the snippets are fetched page by page after the list
        found = pg.evaluate(SEARCH_RESULTS)
        pages = [p for p, _ in found]
        if want not in pages[:SEARCH_TOP]:
            problems.append(f'search.html: {query!r} finds {want} at {pages.index(want) + 1 if want in pages else "no"} '
                            f'place of {len(pages)} (its first {SEARCH_TOP}: {", ".join(pages[:SEARCH_TOP])})')
        chrome = [p for p, text in found if CHROME_WORDS in text]
        if chrome: problems.append(f'search.html: {query!r}: the snippets of {", ".join(chrome[:3])} are page chrome')
    return problems


def first_screen_problems(pg) -> list[str]:
    "What of `FIRST_SCREEN` the page open in `pg` (a Playwright page) does not show within its first HEIGHT px."
    problems = []
    for what, texts in FIRST_SCREEN.items():
        for text in texts:
            bottom = pg.evaluate(TEXT_BOTTOM, text)
            if bottom < 0: problems.append(f'{what} is not on the page (no text {text!r})')
            elif bottom > HEIGHT: problems.append(f'{what} is not on the first screen: {text!r} ends {bottom:.0f} px '
                                                  f'down, in a {HEIGHT} px window')
    return problems


def browser_problems(site:Path, screenshots:Path) -> list[str]:
    """Open every page in one headless Chromium, as a reader does; what went wrong on each. The pages of `pages()` are
    photographed into `screenshots`/<name>.png."""
    from playwright.sync_api import sync_playwright
    site, problems, now = site.resolve(), [], {'page': ''}
    class Quiet(SimpleHTTPRequestHandler):  # every request the site cannot serve, those no page event reports included
        def log_message(self, *args): pass
        def log_request(self, code='-', size='-'):
            if str(code).isdigit() and int(code) >= 400:
                problems.append(f'{now["page"]}: HTTP {int(code)} for {self.path} (the site has no such file)')
    handler = functools.partial(Quiet, directory=str(site))
    class Server(ThreadingHTTPServer):
        def handle_error(self, request, address): pass  # a request the browser gave up on (it moved to the next page)
    server = Server(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f'http://127.0.0.1:{server.server_port}/'
    shots = {path: name for name, path in pages(site).items()}
    # every page, the home page by the address a reader opens (index.html, which forwards to README.html)
    paths = ['index.html'] + [p.relative_to(site).as_posix() for p in site_pages(site)
                              if p.relative_to(site).as_posix() not in ('index.html', 'README.html')]
    screenshots.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=['--no-sandbox'])  # as root, no sandbox
            ctx = browser.new_context(viewport={'width': WIDTH, 'height': HEIGHT})
            def route(r):  # everything a page needs is on the site: a request elsewhere is a problem, and blocked
                if r.request.url.startswith((base, 'data:', 'blob:')): return r.continue_()
                problems.append(f'{now["page"]}: request outside the site: {r.request.url}'); r.abort()
            ctx.route('**/*', route)
            pg = ctx.new_page()  # one tab for every page: the scripts they share are loaded once
            pg.on('console', lambda m: m.type == 'error' and problems.append(f'{now["page"]}: console error: {m.text}'))
            pg.on('pageerror', lambda e: problems.append(f'{now["page"]}: JavaScript error: {e}'))
            # (a request the page itself gave up as the browser moved on, index.html's icon as it forwards, is none)
            pg.on('requestfailed', lambda r: r.failure != 'net::ERR_ABORTED'
                  and problems.append(f'{now["page"]}: request failed: {r.url} ({r.failure})'))
            for path in paths:
                now['page'] = path
                pg.goto(base + path, wait_until='load')
                if path == 'index.html': pg.wait_for_url('**/README.html'); pg.wait_for_load_state('load')
                if pg.evaluate(f'{UNDRAWN}.length'):
                    try: pg.wait_for_function(f'{UNDRAWN}.length === 0', timeout=15_000)
                    except Exception:
                        problems.append(f'{path}: {pg.evaluate(f"{UNDRAWN}.length")} plotly figure(s) not drawn')
                if pg.evaluate('!!(window.MathJax && MathJax.startup && MathJax.startup.promise)'):
                    pg.evaluate('MathJax.startup.promise')
                    if pg.locator('mjx-merror').count(): problems.append(f'{path}: a formula MathJax could not typeset')
                problems += [f'{path}: text overlaps in a figure: {o}' for o in pg.evaluate(OVERLAPS)[:5]]
                problems += [f'{path}: code wraps back to the left edge: "{w}"' for w in pg.evaluate(WRAPPED_CODE)[:5]]
                wide = pg.evaluate(OVERFLOW, SLACK)
                problems += [f'{path}: cut off on the right: {c}' for c in wide['cut'][:5]]
                if len(wide['cut']) > 5: problems.append(f'{path}: and {len(wide["cut"]) - 5} more cut off')
                if wide['page'] > wide['window'] + SLACK:
                    problems.append(f'{path}: the page is {wide["page"]} px wide in a {wide["window"]} px window')
                if (n := pg.evaluate(SEARCH_BOXES)) > 1: problems.append(f'{path}: {n} search boxes')
                if path == 'index.html': problems += [f'{path}: {p}' for p in first_screen_problems(pg)]
                if path in shots:
                    # the screenshot shows the page's first figure (else its first table); the home page its top
                    first = pg.locator('div.plotly-graph-div, img[src*="_images"]').first
                    if not first.count(): first = pg.locator('table').first
                    if path != 'index.html' and first.count():
                        first.evaluate('e => { e.scrollIntoView(); window.scrollBy(0, -70) }')
                    pg.wait_for_timeout(300)
                    pg.screenshot(path=str(screenshots/f'{shots[path]}.png'))
            if (site/'search.html').is_file(): now['page'] = 'search.html'; problems += search_problems(pg, base)
            browser.close()
    finally: server.shutdown()
    return problems


def check_site(site:Path, screenshots:Path) -> list[str]:
    "Every problem of the built site `site` (its HTML, then the browser), screenshots written to `screenshots`."
    if not chromium():
        raise SystemExit(f'docs/check.py: no `{CHROMIUM}` on PATH for the browser check (apt-get install chromium)')
    return html_problems(site) + figure_text_problems() + browser_problems(site, screenshots)


if __name__ == '__main__':  # python docs/check.py SITE SCREENSHOTS: what docs/build.py --screenshots runs after a build
    import sys
    if len(sys.argv) != 3: raise SystemExit('usage: python docs/check.py SITE SCREENSHOTS')
    site = Path(sys.argv[1])
    if not (site/'index.html').is_file(): raise SystemExit(f'docs/check.py: {site} holds no built site (no index.html)')
    problems = check_site(site, Path(sys.argv[2]))
    print('\n'.join(problems) or f'{site}: every page OK (links, tables, layout, figures)'); raise SystemExit(bool(problems))
