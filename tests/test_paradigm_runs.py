"The paradigms' committed tables (figures/paradigms/*) are what `python -m caopd.paradigm_runs` gives from the committed run folders, and its options refuse what they cannot keep before any work."
import json, math, subprocess, sys

import pytest

from conftest import ROOT

COMMANDS = {  # each committed table: the arguments that made it (docs/results-gpu.md and docs/results-laptop.md show them)
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
