"nbs/cascade.ipynb as papermill runs it: the committed CPU runs with the oracle, and with a real (tiny) deferral model."
import json

import pandas as pd
import pytest

from conftest import ROOT

RUNS = ROOT/'figures'/'runs'/'cpu'
NB = ROOT/'nbs'/'cascade.ipynb'


def _run(tmp_path, **parameters):
    import papermill as pm
    pm.execute_notebook(str(NB), str(tmp_path/'cascade.ipynb'), kernel_name='python3', cwd=str(ROOT), progress_bar=False,
                        parameters=dict(out_dir=str(tmp_path/'out'), png=False, n_boot=200, **parameters))
    return tmp_path/'out'


def test_oracle_on_the_committed_runs(tmp_path):
    "The defaults: five small models (four trained, one shared start), each read at the three budgets, the figure written."
    from caopd.cascade import cascade_curve, evaluated
    out = _run(tmp_path)
    table = pd.read_csv(out/'cascade_table.csv')
    assert table['small model'].unique().tolist() == ['CaOPD (SDFT), trained', 'start (before training)', 'SDFT, trained',
                                                      'CaOPD (SDPO), trained', 'SDPO, trained']
    assert (table.groupby('small model').size() == 3).all()
    assert table['deferred'].round(6).tolist() == [0.1, 0.25, 0.5] * 5  # exactly the budgets (ties split at random)
    curves = pd.read_csv(out/'cascade_curves.csv')
    mine = curves[curves['small model'] == 'CaOPD (SDFT), trained'].drop(columns='small model').reset_index(drop=True)
    again = cascade_curve(evaluated(RUNS/'chemistry-caopd-sdft')[0], budgets=[0.1, 0.25, 0.5], n_boot=200)
    pd.testing.assert_frame_equal(mine, again, check_dtype=False)  # the notebook's numbers are the function's
    assert mine['accuracy'].iloc[-1] == 1.0  # the oracle answers every deferred question
    html = (out/'cascade.html').read_text()
    assert 'oracle deferral (upper bound)' in html


@pytest.mark.slow
def test_a_deferral_model_is_evaluated_on_the_runs_questions(tmp_path):
    "A second model is evaluated once, on the runs' questions and sampling, and its verdicts replace the oracle's."
    from caopd.models import tiny_model
    tiny_model(seed=0, save_to=tmp_path/'tiny')
    out = _run(tmp_path, runs=str(RUNS/'chemistry-caopd-sdft'), deferral=str(tmp_path/'tiny'), deferral_max_new_tokens=4,
               cost_deferral=10.0)
    folders = list((out/'deferral').iterdir())
    assert len(folders) == 1 and folders[0].name.endswith('-chemistry-test')
    saved = json.loads((folders[0]/'report.json').read_text())
    run_settings = json.loads((RUNS/'chemistry-caopd-sdft'/'eval'/'after'/'report.json').read_text())['settings']
    for k in ('domain', 'split', 'limit', 'temperature', 'top_p'): assert saved['settings'][k] == run_settings[k], k
    assert saved['settings']['max_new_tokens'] == 4
    curves = pd.read_csv(out/'cascade_curves.csv')
    assert curves['small model'].unique().tolist() == ['CaOPD (SDFT), trained', 'start (before training)']
    last = curves.groupby('small model').tail(1)
    assert (last['accuracy'] == saved['report']['accuracy']).all()  # deferring everything: the deferral's accuracy
    assert (last['cost'] == 11.0).all()
    assert 'tiny alone' in (out/'cascade.html').read_text()  # a local folder is named by its last part


@pytest.mark.parametrize('bad, message', [(dict(runs='{tmp}'), 'holds no evaluation after training'),
                                          (dict(budgets='0.1,a quarter'), "budgets='0.1,a quarter': pass shares in [0, 1]"),
                                          (dict(budgets='0.1,2'), 'budgets: 2.0 is not a share in [0, 1]')])
def test_bad_input_is_refused(tmp_path, bad, message):
    import papermill as pm
    bad = {k: v.format(tmp=tmp_path) for k, v in bad.items()}
    with pytest.raises(pm.PapermillExecutionError, match=message.replace('[', r'\[').replace(']', r'\]')):
        _run(tmp_path, **bad)
    assert not (tmp_path/'out').exists()  # refused before anything was written


@pytest.mark.slow
def test_both_readouts_route_on_the_committed_gpu_runs(tmp_path):
    "figures/cascade/gpu-readout is what the notebook draws from the GPU runs with the readout: each small model routed on its stated confidence and on its expected one (ours)."
    import papermill as pm
    R = 'figures/runs/gpu-readout'
    pm.execute_notebook(str(NB), str(tmp_path/'cascade.ipynb'), kernel_name='python3', cwd=str(ROOT), progress_bar=False,
                        parameters=dict(out_dir=str(tmp_path/'out'), png=False,
                                        runs=f'{R}/caopd-sdft-s2-n24,{R}/sdft-s2-n24'))  # the README's command
    table = pd.read_csv(tmp_path/'out'/'cascade_table.csv')
    pd.testing.assert_frame_equal(table, pd.read_csv(ROOT/'figures'/'cascade'/'gpu-readout'/'cascade_table.csv'))
    assert table['small model'].unique().tolist() == [
        'CaOPD (SDFT), trained', 'CaOPD (SDFT), trained: expected (ours)', 'start (before training)',
        'start (before training): expected (ours)', 'SDFT, trained', 'SDFT, trained: expected (ours)']
