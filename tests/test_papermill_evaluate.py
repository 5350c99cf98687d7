"nbs/evaluate.ipynb as papermill runs it: a tiny model on the fixtures' questions, and the run folder it writes."
import json
from conftest import ROOT

import pytest
pytestmark = pytest.mark.slow  # runs a papermill notebook: not in the quick loop (README, "Working on caopd")

def test_evaluate_notebook(tmp_path):
    import papermill as pm
    from caopd.models import tiny_model
    tiny_model(seed=0, save_to=tmp_path/'tiny')
    src = ROOT/'nbs'/'evaluate.ipynb'
    before = src.read_bytes()
    out, limit, n_samples = tmp_path/'run', 2, 2
    pm.execute_notebook(str(src), str(tmp_path/'ev.ipynb'), kernel_name='python3', cwd=str(ROOT), progress_bar=False,
                        parameters=dict(model=str(tmp_path/'tiny'), limit=limit, n_samples=n_samples, max_new_tokens=8,
                                        out=str(out), data_dir=str(ROOT/'data'/'fixtures')))
    records = [json.loads(l) for l in (out/'records.jsonl').read_text().splitlines()]
    assert len(records) == limit * n_samples
    assert {'id', 'sample', 'prompt', 'completion', 'answer', 'correct', 'confidence', 'parsed'} <= set(records[0])
    saved = json.loads((out/'report.json').read_text())
    settings = saved['settings']
    assert (settings['model'], settings['domain'], settings['split'], settings['limit'], settings['n_samples'],
            settings['max_new_tokens'], settings['backend']) == (str(tmp_path/'tiny'), 'chemistry', 'test', limit,
                                                                 n_samples, 8, 'transformers'), settings
    assert saved['report']['n'] == limit * n_samples
    for f in ('report.md', 'reliability.html', 'confidence.html'): assert (out/f).exists(), f
    executed = (tmp_path/'ev.ipynb').read_text()
    assert str(out/'records.jsonl') in executed  # the notebook says where the records are
    assert src.read_bytes() == before  # papermill wrote its output elsewhere and left the source alone
    assert json.loads((out/'eval_settings.json').read_text())['n_samples'] == n_samples  # what a resume is checked against
    assert settings['environment']['caopd'] and settings['resumed_samples'] == 0
