"""Checks of a built site (docs/build.py): every internal link and image of every page exists, and three pages (home,
the theory lesson, a results page) load in headless Chromium without a JavaScript error, with every plotly figure
drawn and every request served by the site itself. A screenshot of each is saved."""
import functools, html.parser, shutil, threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM = 'chromium'  # Debian's package (.ci/run installs it); Playwright drives it, no browser download


def chromium() -> str|None: return shutil.which(CHROMIUM)


class _Refs(html.parser.HTMLParser):
    "The targets a page points at (a href, img src, link href, script src) and the ids it holds."
    def __init__(self):
        super().__init__(); self.refs, self.ids = [], set()
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get('id'): self.ids.add(a['id'])
        key = {'a': 'href', 'link': 'href', 'img': 'src', 'script': 'src'}.get(tag)
        if key and a.get(key): self.refs.append((tag, a[key]))

def _parse(page:Path) -> _Refs:
    p = _Refs(); p.feed(page.read_text(errors='replace')); return p

def link_problems(site:Path) -> list[str]:
    "Internal links and images of every page that point at a file (or an anchor of a page) the site does not have."
    site, problems, parsed = site.resolve(), [], {}
    def refs(page):
        if page not in parsed: parsed[page] = _parse(page)
        return parsed[page]
    # _static/ holds the theme's templates, not pages
    for page in sorted(p for p in site.rglob('*.html') if p.relative_to(site).parts[0] != '_static'):
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


def browser_problems(site:Path, screenshots:Path) -> list[str]:
    "Open the three pages in headless Chromium; what went wrong on them. Screenshots go to `screenshots`/<name>.png."
    from playwright.sync_api import sync_playwright
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args): pass
    handler = functools.partial(Quiet, directory=str(site))
    server = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f'http://127.0.0.1:{server.server_port}/'
    problems = []
    screenshots.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=['--no-sandbox'])  # as root, no sandbox
            ctx = browser.new_context(viewport={'width': 1280, 'height': 900})
            def route(r):  # everything a page needs is on the site: a request elsewhere is a problem, and blocked
                if r.request.url.startswith((base, 'data:', 'blob:')): return r.continue_()
                problems.append(f'request outside the site: {r.request.url}'); r.abort()
            ctx.route('**/*', route)
            for name, path in pages(site).items():
                pg = ctx.new_page()
                pg.on('console', lambda m, n=path: m.type == 'error'
                      and problems.append(f'{n}: console error: {m.text}'))
                pg.on('pageerror', lambda e, n=path: problems.append(f'{n}: JavaScript error: {e}'))
                pg.on('requestfailed', lambda r, n=path: problems.append(f'{n}: request failed: {r.url}'))
                pg.on('response', lambda r, n=path: r.status >= 400
                      and problems.append(f'{n}: HTTP {r.status} {r.url}'))
                pg.goto(base + path, wait_until='load')
                if name == 'home': pg.wait_for_url('**/README.html'); pg.wait_for_load_state('load')
                undrawn = ("[...document.querySelectorAll('div.plotly-graph-div')]"
                           ".filter(d => !d.querySelector('svg.main-svg'))")
                try: pg.wait_for_function(f'{undrawn}.length === 0', timeout=15_000)
                except Exception:
                    n = pg.evaluate(f'{undrawn}.length')
                    problems.append(f'{path}: {n} plotly figure(s) not drawn')
                if pg.evaluate('!!(window.MathJax && MathJax.startup && MathJax.startup.promise)'):
                    pg.evaluate('MathJax.startup.promise')
                    if pg.locator('mjx-merror').count(): problems.append(f'{path}: a formula MathJax could not typeset')
                # the screenshot shows the page's first figure (else its first table); the home page its top
                first = pg.locator('div.plotly-graph-div, img[src*="_images"]').first
                if not first.count(): first = pg.locator('table').first
                if name != 'home' and first.count():
                    first.evaluate('e => { e.scrollIntoView(); window.scrollBy(0, -70) }')
                pg.wait_for_timeout(300)
                pg.screenshot(path=str(screenshots/f'{name}.png'))
                pg.close()
            browser.close()
    finally: server.shutdown()
    return problems


def check_site(site:Path, screenshots:Path) -> list[str]:
    "Every problem of the built site `site` (links, then the browser), screenshots written to `screenshots`."
    if not chromium():
        raise SystemExit(f'docs/check.py: no `{CHROMIUM}` on PATH for the browser check (apt-get install chromium)')
    return link_problems(site) + browser_problems(site, screenshots)


if __name__ == '__main__':  # python docs/check.py SITE SCREENSHOTS: what docs/build.py --screenshots runs after a build
    import sys
    if len(sys.argv) != 3: raise SystemExit('usage: python docs/check.py SITE SCREENSHOTS')
    site = Path(sys.argv[1])
    if not (site/'index.html').is_file(): raise SystemExit(f'docs/check.py: {site} holds no built site (no index.html)')
    problems = check_site(site, Path(sys.argv[2]))
    print('\n'.join(problems) or f'{site}: links, pages and figures OK'); raise SystemExit(bool(problems))
