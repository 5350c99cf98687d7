"The paradigms' committed tables (figures/paradigms/*) are what `python -m caopd.paradigm_runs` gives from the committed run folders, and its options refuse what they cannot keep before any work."
import json, math, subprocess, sys

import pytest

from conftest import ROOT

COMMANDS = {  # each committed table: the arguments that made it (docs/results-gpu.md, docs/results-laptop.md and docs/lab-notebook.md show them)
    'gpu': ['figures/runs/gpu-readout', '--scale', 'gpu',
            '--title', 'One GPU, 24 steps (figures/runs/gpu-readout): AUROC of each paradigm, pooled over seeds'],
    'laptop': ['figures/runs/cpu', '--scale', 'cpu', '--only', 'SDFT', 'CaOPD (SDFT)',
               '--title', 'Laptop (2 CPU cores), seeds 0-2: AUROC of each paradigm, pooled over seeds'],
}


def _close(a, b) -> bool:
    "Equal, floats to 1e-9: the bootstrap's sums may run in another order on another number of threads."
    if isinstance(a, float) and isinstance(b, float): return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, '-m', 'caopd.paradigm_runs', *args], cwd=cwd, capture_output=True, text=True,
                          env={**__import__('os').environ, 'CAOPD_PNG': '0'})


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(COMMANDS))
def test_committed_table_is_what_the_command_gives(name, tmp_path):
    r = _run(*COMMANDS[name], '--out', str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    made, committed = (json.loads((p/'paradigms.json').read_text()) for p in (tmp_path, ROOT/'figures'/'paradigms'/name))
    assert made['groups'] == committed['groups'] and len(made['rows']) == len(committed['rows'])
    for m, c in zip(made['rows'], committed['rows']):  # the same to the last digits but for the order BLAS sums in
        assert m.keys() == c.keys() and all(_close(m[k], c[k]) for k in m), (m, c)
    assert (tmp_path/'paradigms.md').read_text() == (ROOT/'figures'/'paradigms'/name/'paradigms.md').read_text()
    title = lambda p: json.loads((p/'auroc.json').read_text())['layout']['title']
    assert title(tmp_path) == title(ROOT/'figures'/'paradigms'/name)  # the figure too: the command is the whole recipe


def test_seeds_and_groups_not_there_are_refused(tmp_path):
    r = _run('figures/runs/gpu-readout', '--scale', 'gpu', '--seeds', '0', '3', '--out', str(tmp_path))
    assert r.returncode == 2 and r.stderr.count('\n') == 1 and 'SDFT has no run of some of them' in r.stderr
    r = _run('figures/runs/gpu-readout', '--scale', 'gpu', '--only', 'GRPO', '--out', str(tmp_path))
    assert r.returncode == 2 and '--only GRPO: no such group' in r.stderr
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_score_refuses_a_remade_evaluation_that_gave_other_answers():
    "`score --remade`: the run made again must have given the committed answers, or its checkpoint scores nothing."
    r = _run('score', 'figures/runs/cpu/arithmetic-sdft-0/eval/after', '--model', 'unused',
             '--remade', 'figures/runs/cpu/arithmetic-sdft-1/eval/after')
    assert r.returncode == 2 and r.stderr.count('\n') == 1 and 'is not figures/runs/cpu/arithmetic-sdft-0/eval/after made again' in r.stderr


def _outside(rows:list[dict], metrics=('auroc', 'level_auroc', 'brier_skill')) -> list:
    "(where, metric, value, lo, hi) of every value of `rows` outside its own interval."
    bad = []
    for where, r in rows:
        for m in metrics:
            v, lo, hi = r.get(m), r.get(f'{m}_lo'), r.get(f'{m}_hi')
            if None in (v, lo, hi) or any(map(math.isnan, (v, lo, hi))): continue
            if not lo - 1e-12 <= v <= hi + 1e-12: bad.append((where, m, v, lo, hi))
    return bad


def _reports() -> list:
    return [p for p in sorted((ROOT/'figures').rglob('report.json')) if json.loads(p.read_text()).get('paradigms')]


def test_the_platt_ece_is_each_folds_own_averaged():
    """Issue 60: the ECE after a Platt fit read 0.000 [0.002, 0.104] where each fold's own ECE was 0.052: the two folds
    were pooled before binning and their errors cancelled. Every committed evaluation's `ece_fit` is recomputed here
    from its records, fold by fold (the map of the other fold, `expected_calibration_error` of each fold alone, weighted
    by its answers), and its rank metrics lie inside their intervals. (An ECE near 0 can lie below its percentile
    interval: the ECE of a resample is biased upward, so its interval says how large the ECE of such a sample tends to
    be; the pooled value above lay below the interval for the other reason, and the recomputation catches it.)"""
    from caopd.io import read_jsonl
    from caopd.metrics import expected_calibration_error
    from caopd.paradigms import cross_fitted, paradigm_scores
    reports, rows, checked = _reports(), [], 0
    assert len(reports) > 40
    for path in reports:
        records = read_jsonl(path.parent/'records.jsonl')
        correct, groups = [r['correct'] for r in records], [r['id'] for r in records]
        for k, r in json.loads(path.read_text())['paradigms'].items():
            rows.append((f'{path.relative_to(ROOT)}: {k}', r))
            mapped, folds = cross_fitted(paradigm_scores(records, k)[1], correct, groups)
            part = lambda f: [i for i, g in enumerate(folds) if g == f]
            want = sum(len(part(f)) * expected_calibration_error([mapped[i] for i in part(f)], [correct[i] for i in part(f)])
                       for f in (0, 1)) / len(records)
            assert math.isclose(r['ece_fit'], want, abs_tol=1e-12), (path, k, r['ece_fit'], want)
            checked += 1
    assert checked > 150
    rows += [(f'figures/paradigms/{name}: {r["method"]}, {r["paradigm"]}', r)
             for name in COMMANDS for r in json.loads((ROOT/'figures'/'paradigms'/name/'paradigms.json').read_text())['rows']]
    assert _outside(rows) == []
