"nbs/seeds.ipynb as papermill runs it: on the committed laptop-domain runs (whose tables it must redraw exactly), and refusing a folder without any."
import pandas as pd
import pytest

from conftest import ROOT

NB = ROOT/'nbs'/'seeds.ipynb'
COMMITTED = ROOT/'figures'/'arithmetic'


def _run(tmp_path, **parameters):
    import papermill as pm
    pm.execute_notebook(str(NB), str(tmp_path/'seeds.ipynb'), kernel_name='python3', cwd=str(ROOT), progress_bar=False,
                        parameters=dict(out_dir=str(tmp_path/'out'), png=False, **parameters))
    return tmp_path/'out'


def test_the_committed_tables_come_from_the_committed_runs(tmp_path):
    "Every committed table is what the notebook computes from figures/runs/cpu now: nothing typed in, nothing stale."
    out = _run(tmp_path)
    for name in ('seeds', 'levels', 'checks', 'rollouts', 'rollout_checks'):
        pd.testing.assert_frame_equal(pd.read_csv(out/f'{name}.csv'), pd.read_csv(COMMITTED/f'{name}.csv'), obj=name)
    seeds = pd.read_csv(out/'seeds.csv', dtype={'seed': str})
    pooled = seeds[seeds.seed == 'all'].set_index('method')['n']
    assert (pooled == seeds[seeds.seed != 'all'].groupby('method')['n'].sum()[pooled.index]).all()
    assert (seeds.groupby('method').size() >= 4).all()  # at least three seeds and the pooled row
    assert (out/'levels.html').is_file()
    costs = pd.read_csv(out/'rollouts.csv', dtype={'seed': str})  # the K = 8 reference scored 8 of every prompt, and
    ref = costs[costs.method == 'CaOPD (SDFT), num_confidence_rollouts=8']  # each run's log holds 6 steps x 4 prompts
    assert (ref['rollouts_per_prompt'] == 8).all() and (costs[costs.seed != 'all']['prompts'] == 24).all()


def test_a_folder_without_runs_is_refused(tmp_path):
    with pytest.raises(Exception, match='no finished run tested on'):
        _run(tmp_path, runs_dir=str(tmp_path))


def test_an_earlier_runs_tables_are_not_left_beside(tmp_path):
    "Without the rollout comparison (reference ''), the rollout tables an earlier run wrote into out_dir are removed."
    (tmp_path/'out').mkdir()
    for name in ('rollouts.csv', 'rollout_checks.md', 'notes.txt'): (tmp_path/'out'/name).write_text('earlier\n')
    out = _run(tmp_path, reference='')
    assert not (out/'rollouts.csv').exists() and not (out/'rollout_checks.md').exists()
    assert (out/'notes.txt').read_text() == 'earlier\n' and (out/'seeds.csv').is_file()  # only its own outputs go
