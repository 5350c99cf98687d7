"""The README's tables are regenerated from committed outputs (`tests/readme_tables.py`, through cog), and the
benchmarks' committed reports are what their committed measurements give."""
import re, subprocess, sys

from conftest import ROOT

sys.path.insert(0, str(ROOT/'tests'))
sys.path.insert(0, str(ROOT/'tests'/'benchmarks'))
REGENERATE = '.ci/env cog -r -I tests README.md'
BLOCK = re.compile(r'^ *<!-- \[\[\[cog [^\n]*\]\]\] -->\n(.*?)^ *<!-- \[\[\[end\]\]\] -->\n', re.M | re.S)
NOT_RESULTS = ('| notebook | module | what it holds |',)  # tables of words, not results (tests/test_imports.py checks it)


def test_every_readme_table_is_what_the_committed_outputs_give():
    "cog --check: each table between cog markers is what its function in tests/readme_tables.py builds now."
    r = subprocess.run([sys.executable, '-m', 'cogapp', '--check', '--diff', '-I', 'tests', 'README.md'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, f'README tables differ from the committed outputs; write them again: {REGENERATE}\n{r.stdout}{r.stderr}'


def test_no_readme_table_is_typed_in():
    "Every table of results in the README lies inside a cog block, so none can go stale unseen."
    readme = (ROOT/'README.md').read_text()
    assert len(BLOCK.findall(readme)) == readme.count('[[[cog') > 12  # every marker read as one block
    outside = BLOCK.sub('', readme)
    tables = [m.group(0).splitlines()[0].strip() for m in re.finditer(r'^( *\|.*\n)+', outside, re.M)]
    typed = [t for t in tables if not t.startswith(NOT_RESULTS)]
    assert not typed, f'tables typed into README.md, not built by tests/readme_tables.py: {typed}'


def test_every_interval_the_prose_gives_is_in_an_output():
    """A 95% interval quoted in the README's prose ('[0.40, 0.50]') is one that a generated table or a committed
    output holds (figures/, tests/benchmarks/): prose cannot keep an interval its tables no longer give."""
    readme = (ROOT/'README.md').read_text()
    files = subprocess.run(['git', 'ls-files', 'figures', 'tests/benchmarks'], cwd=ROOT, capture_output=True,
                           text=True).stdout.split()
    outputs = '\n'.join([*BLOCK.findall(readme), *((ROOT/f).read_text(errors='ignore') for f in files
                                                   if f.endswith(('.md', '.txt', '.csv')))])
    interval = r'\[-?\d\.\d{2,3},\s+-?\d\.\d{2,3}\]'  # '[0.40, 0.50]', '[-0.044, 0.050]'
    quoted = {re.sub(r'\s+', ' ', m) for m in re.findall(interval, BLOCK.sub('', readme))}
    assert len(quoted) > 30, len(quoted)
    assert not sorted(i for i in quoted if i not in outputs), 'README prose quotes intervals no output holds'


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
    from caopd.evaluate import score_completion
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
    "The check can fail: a table that differs from its output by one digit is caught."
    block = next(m for m in BLOCK.finditer((ROOT/'README.md').read_text()) if re.search(r'\d\.\d\d', m.group(1)))
    (tmp_path/'same.md').write_text(block.group(0))
    changed = re.sub(r'\d\.\d\d', lambda m: '9.99' if m.group(0) != '9.99' else '0.00', block.group(1), count=1)
    (tmp_path/'changed.md').write_text(block.group(0).replace(block.group(1), changed))
    check = lambda name: subprocess.run([sys.executable, '-m', 'cogapp', '--check', '-I', str(ROOT/'tests'), name],
                                        cwd=tmp_path, capture_output=True, text=True)
    assert check('same.md').returncode == 0
    r = check('changed.md')
    assert r.returncode != 0 and 'Check failed' in r.stdout + r.stderr
