"nbs/train.ipynb through papermill, as a grid: a tiny model trained on Chemistry, then continued on Tool Use (CT)."
import json, subprocess, sys
from pathlib import Path

import pytest

from conftest import ROOT
from trainer_helpers import tiny_model_dir

TRAIN = ROOT/'nbs'/'train.ipynb'
TINY = dict(preset='cpu', K=2, prompts_per_step=1, per_device_train_batch_size=2, max_steps=2, n_train=4,
            max_completion_length=8, eval_limit=2, eval_samples=2, eval_max_new_tokens=8, eval_batch_size=4, png=False,
            format_warmup='value', format_warmup_steps=1)


@pytest.fixture(scope='module')
def grid_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('grid')
    model = tiny_model_dir(tmp/'model')
    root = tmp/'runs'
    defaults = ', '.join(f'{k}: {json.dumps(v)}' for k, v in dict(TINY, model=model).items())
    (tmp/'grid.yaml').write_text(f'''notebook: {TRAIN}
root: {root}
defaults: {{{defaults}}}
runs:
  - name: chemistry
    matrix: {{method: [caopd-sdft]}}
  - name: ct-tooluse-sdft
    method: sdft
    domain: tooluse
    init_from: "{{root}}/chemistry-caopd-sdft"
''')
    before = TRAIN.read_bytes()
    res = subprocess.run([sys.executable, '-m', 'caopd.runs', str(tmp/'grid.yaml')], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, f'grid failed:\n{res.stdout[-4000:]}\n{res.stderr[-8000:]}'
    assert TRAIN.read_bytes() == before, 'the source notebook was modified'
    return root, res.stdout


def test_run_folder(grid_runs):
    from caopd.evaluate import read_jsonl
    from caopd.runs import load_run
    root, _ = grid_runs
    out = root/'chemistry-caopd-sdft'
    assert (out/'train.ipynb').is_file()  # the executed notebook lives in its run folder
    run = load_run(out)
    s = run['settings']
    assert (s['method'], s['protocol'], s['train_domains'], s['eval_domain'], s['K']) == \
        ('caopd-sdft', 'id', ['chemistry'], 'chemistry', 2)
    # the format warm-up ran first, on training prompts, and the run started from its checkpoint
    warm = json.loads((out/'warmup'/'warmup.json').read_text())
    assert warm['steps'] == 1 and warm['mask'] == 'value' and s['warmup']['steps'] == 1
    assert s['start'] == str(out/'warmup'/'checkpoint') and (out/'warmup'/'checkpoint'/'config.json').is_file()
    for when in ('before', 'after'):
        recs = read_jsonl(out/'eval'/when/'records.jsonl')
        assert len(recs) == 2 * 2 and {r['sample'] for r in recs} == {0, 1}
        assert run[when]['n'] == 4
        assert json.loads((out/'eval'/when/'report.json').read_text())['report'] == run[when]
        for k in ('ece', 'ece_stated', 'accuracy_lo', 'accuracy_hi', 'n_stated'): assert k in run[when], k
    steps = [h for h in run['log'] if 'loss' in h]
    assert [h['step'] for h in steps] == [1, 2]
    for key in ('caopd/calibration_loss', 'caopd/capability_loss', 'caopd/empirical_confidence', 'step_time'):
        assert key in steps[0], key
    targets = read_jsonl(out/'mu_hat.jsonl')
    assert sorted({t['step'] for t in targets}) == [1, 2] and all(0 <= t['mu_hat'] <= 1 for t in targets)
    assert (out/'checkpoint'/'config.json').is_file()
    for fig in ('training_curves', 'format_adherence', 'reliability', 'confidence_distributions'):
        assert (out/'figures'/f'{fig}.html').is_file(), fig
    assert (out/'metrics.csv').is_file() and (out/'metrics.md').is_file()


def test_continual_training_and_grid_resume(grid_runs):
    from caopd.runs import load_run, runs_table
    root, _ = grid_runs
    s = load_run(root/'ct-tooluse-sdft')['settings']
    assert (s['protocol'], s['train_domains'], s['eval_domain']) == ('ct', ['chemistry', 'tooluse'], 'tooluse')
    assert s['start'].endswith('chemistry-caopd-sdft/checkpoint') and 'warmup' not in s  # CT starts warmed: no warm-up
    t = runs_table(root)
    assert sorted(t['method']) == ['caopd-sdft', 'sdft'] and set(t['protocol']) == {'id', 'ct'}
    assert t['accuracy'].between(0, 1).all() and t['n'].eq(4).all()
    # a finished grid is not run again
    res = subprocess.run([sys.executable, '-m', 'caopd.runs', str(root.parent/'grid.yaml'), '--dry_run'], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.count('[skip]') == 2, res.stdout + res.stderr
