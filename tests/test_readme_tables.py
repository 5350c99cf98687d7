"""The README and the pages of `docs/`: their tables are regenerated from committed outputs (`tests/readme_tables.py`,
through cog), the README is short, shows figures and types no measured number, every link resolves, and the
benchmarks' committed reports are what their committed measurements give."""
import re, subprocess, sys

from conftest import ROOT

sys.path.insert(0, str(ROOT/'tests'))
sys.path.insert(0, str(ROOT/'tests'/'benchmarks'))
README = ROOT/'README.md'
PAGES = [README, *sorted((ROOT/'docs').glob('*.md'))]  # the README and the pages that hold what moved out of it
REGENERATE = '.ci/env cog -r -I tests README.md docs/*.md'
BLOCK = re.compile(r'^ *<!-- \[\[\[cog [^\n]*\]\]\] -->\n(.*?)^ *<!-- \[\[\[end\]\]\] -->\n', re.M | re.S)
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')  # a Markdown link or image: [text](target)


def _name(page) -> str: return str(page.relative_to(ROOT))


def test_every_table_is_what_the_committed_outputs_give():
    "cog --check: each table between cog markers, in the README and in docs/, is what tests/readme_tables.py builds now."
    r = subprocess.run([sys.executable, '-m', 'cogapp', '--check', '--diff', '-I', 'tests', *map(_name, PAGES)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, f'tables differ from the committed outputs; write them again: {REGENERATE}\n{r.stdout}{r.stderr}'


def test_no_table_is_typed_in():
    "Every table in the README and in docs/ lies inside a cog block, so none can go stale unseen."
    blocks = 0
    for page in PAGES:
        text = page.read_text()
        assert len(BLOCK.findall(text)) == text.count('[[[cog'), _name(page)  # every marker read as one block
        blocks += text.count('[[[cog')
        tables = [m.group(0).splitlines()[0].strip() for m in re.finditer(r'^( *\|.*\n)+', BLOCK.sub('', text), re.M)]
        assert not tables, f'tables typed into {_name(page)}, not built by tests/readme_tables.py: {tables}'
    assert blocks > 12 and len(BLOCK.findall(README.read_text())) >= 3  # the results tables and the notebooks'


def test_every_interval_the_prose_gives_is_in_an_output():
    """A 95% interval quoted in the prose of the README or a page of docs/ ('[0.40, 0.50]') is one that a generated
    table or a committed output holds (figures/, tests/benchmarks/): prose cannot keep an interval its tables no longer
    give."""
    texts = [p.read_text() for p in PAGES]
    files = subprocess.run(['git', 'ls-files', 'figures', 'tests/benchmarks'], cwd=ROOT, capture_output=True,
                           text=True).stdout.split()
    outputs = '\n'.join([*(b for t in texts for b in BLOCK.findall(t)),
                         *((ROOT/f).read_text(errors='ignore') for f in files if f.endswith(('.md', '.txt', '.csv')))])
    interval = r'\[-?\d\.\d{2,3},\s+-?\d\.\d{2,3}\]'  # '[0.40, 0.50]', '[-0.044, 0.050]'
    quoted = {re.sub(r'\s+', ' ', m) for t in texts for m in re.findall(interval, BLOCK.sub('', t))}
    assert len(quoted) > 30, len(quoted)
    assert not sorted(i for i in quoted if i not in outputs), 'prose quotes intervals no output holds'


def test_the_readme_types_no_measured_number():
    """Outside its cog blocks the README gives no decimal number, interval, percentage (but its intervals' 95%) or
    duration: each result it shows is generated, and timings live on the docs pages."""
    prose = BLOCK.sub('', README.read_text())
    prose = LINK.sub(lambda m: m.group(0).split('](')[0], prose)  # link targets are paths, not numbers
    found = re.findall(r'\d\.\d|\b(?!95%)\d+\s*%|\b\d+\s*(?:s|min|minutes?|seconds?|hours?)\b', prose)  # 95%: a setting
    assert not found, f'README.md types measured numbers outside cog blocks (generate them, or move them to docs/): {found}'


def test_the_readme_is_short_and_shows_figures():
    "Under 250 lines, at least two committed PNG figures, and the two commands CI and a newcomer type, as they are."
    text = README.read_text()
    assert len(text.splitlines()) < 250, len(text.splitlines())
    images = [m.group(1) for m in LINK.finditer(text) if m.group(0).startswith('!')]
    tracked = set(subprocess.run(['git', 'ls-files', 'figures'], cwd=ROOT, capture_output=True, text=True).stdout.split())
    assert len(images) >= 2 and all(i.endswith('.png') and i in tracked for i in images), images
    assert '\n.ci/env pytest tests\n' in text  # .ci/run runs it
    assert '\nmkdir -p runs/train && .ci/env papermill nbs/train.ipynb runs/train/train.ipynb\n' in text  # the main job


def test_every_page_has_a_title_and_every_link_resolves():
    """Each page of docs/ opens with its `# Title`; every link and image of the README and the pages is either a web
    address or a path relative to the page that exists (so it works on GitHub and on the site alike), and every
    repository path they quote (`nbs/12_runs.ipynb`) exists, so a renamed file cannot leave them behind."""
    broken = []
    for page in PAGES:
        text = page.read_text()
        if page != README: assert text.startswith('# '), f'{_name(page)} does not open with a `# Title` line'
        for target in (m.group(1) for m in LINK.finditer(BLOCK.sub('', text) + ''.join(BLOCK.findall(text)))):
            if re.match(r'[a-z]+:', target) or target.startswith('#'): continue
            path = (page.parent/target.split('#')[0]).resolve()
            if not path.exists() or ROOT not in path.parents: broken.append(f'{_name(page)}: {target}')
        for quoted in re.findall(r'`((?:nbs|tests|figures|data|docs|caopd)/[^`\s]*)`', text):
            if not any(c in quoted for c in '<*{$') and not (ROOT/quoted).exists(): broken.append(f'{_name(page)}: `{quoted}`')
    assert not broken, f'links or quoted paths that do not resolve: {broken}'


def test_the_estimator_report_is_what_its_outcomes_give():
    "tests/benchmarks/estimators.txt is the report of the committed draw (estimators_outcomes.json), to the digit."
    import estimators
    draw = estimators.load_outcomes()
    assert len(draw['ids']) == len(draw['outcomes']) == 64 and {len(o) for o in draw['outcomes']} == {40}
    assert estimators.report(estimators.results(draw)) == (ROOT/'tests'/'benchmarks'/'estimators.txt').read_text()


def test_the_estimator_outcomes_are_the_verdicts_of_its_rollouts():
    """The committed draw's outcomes are the verdicts of the committed rollouts (estimators_outcomes.rollouts.jsonl.gz),
    and the verifier gives each of them the same verdict today."""
    import estimators
    from caopd.evaluation import score_completion
    draw, records = estimators.load_outcomes(), estimators.load_rollouts()
    assert len(records) == 64 * 40
    assert estimators.outcomes_of(records, 40) == {k: draw[k] for k in ('ids', 'outcomes')}
    assert [score_completion(r, r['sample'], r['completion'], draw['domain'])['correct'] for r in records] == \
        [r['correct'] for r in records]


def test_the_adaptive_report_is_what_its_steps_give():
    "The table adaptive_rollouts.txt ends with is the one its committed per-step measurements give."
    import adaptive_rollouts
    data = adaptive_rollouts.load_steps()
    assert set(data['variants']) == set(adaptive_rollouts.VARIANTS)
    assert (ROOT/'tests'/'benchmarks'/'adaptive_rollouts.txt').read_text().endswith('\n' + adaptive_rollouts.table(data))


def test_a_changed_output_fails_the_check(tmp_path):
    "The check can fail: a table that differs from its output by one digit is caught, in the README and in a page."
    check = lambda name: subprocess.run([sys.executable, '-m', 'cogapp', '--check', '-I', str(ROOT/'tests'), name],
                                        cwd=tmp_path, capture_output=True, text=True)
    numeric = lambda page: [m for m in BLOCK.finditer(page.read_text()) if re.search(r'\d\.\d\d', m.group(1))]
    for i, page in enumerate([README, next(p for p in PAGES[1:] if numeric(p))]):
        block = numeric(page)[0]
        (tmp_path/f'same{i}.md').write_text(block.group(0))
        changed = re.sub(r'\d\.\d\d', lambda m: '9.99' if m.group(0) != '9.99' else '0.00', block.group(1), count=1)
        (tmp_path/f'changed{i}.md').write_text(block.group(0).replace(block.group(1), changed))
        assert check(f'same{i}.md').returncode == 0, _name(page)
        r = check(f'changed{i}.md')
        assert r.returncode != 0 and 'Check failed' in r.stdout + r.stderr, _name(page)


def test_the_verdict_s_words_follow_the_intervals():
    """The README's first screen (`readme_tables.verdict`) chooses 'better', 'worse' or 'no better' by whether two 95%
    intervals overlap, and says each machine's line from its own tables."""
    import readme_tables as t
    assert t._order((0.38, 0.31, 0.46), (0.79, 0.70, 0.88)) == 'below'
    assert t._order((0.79, 0.70, 0.88), (0.38, 0.31, 0.46)) == 'above'
    assert t._order((0.43, 0.40, 0.47), (0.43, 0.39, 0.47)) == t._order((0.24, 0.18, 0.29), (0.34, 0.29, 0.42)) == 'overlap'
    lines = t.verdict().split('\n- ')
    assert len(lines) == len(t.VERDICT) and 'nan' not in t.verdict()
    for line, (where, machine, _) in zip(lines, t.VERDICT.values()):
        assert where in line and machine in line.replace('\n  ', ' ')
