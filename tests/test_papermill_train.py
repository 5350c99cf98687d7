"nbs/train.ipynb through papermill, as a grid: a tiny model trained on Chemistry in one and in two CPU processes, then continued on Tool Use (CT)."
import json, math, subprocess, sys
from pathlib import Path

import pytest

from conftest import ROOT
from trainer_helpers import tiny_model_dir

pytestmark = pytest.mark.slow  # runs papermill notebooks that train: not in the quick loop (README, "Working on caopd")

TRAIN = ROOT/'nbs'/'train.ipynb'
TINY = dict(preset='cpu', K=2, prompts_per_step=1, max_steps=2, n_train=4,
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
    domain: chemistry
    matrix: {{method: [caopd-sdft], num_processes: [1, 2]}}
  - name: ct-tooluse-sdft
    method: sdft
    domain: tooluse
    init_from: "{{root}}/chemistry-caopd-sdft-1"
''')
    before = TRAIN.read_bytes()
    res = subprocess.run([sys.executable, '-m', 'caopd.runs', str(tmp/'grid.yaml')], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, f'grid failed:\n{res.stdout[-4000:]}\n{res.stderr[-8000:]}'
    assert TRAIN.read_bytes() == before, 'the source notebook was modified'
    return root, res.stdout


def test_run_folder(grid_runs):
    from caopd.evaluation import read_jsonl
    from caopd.runfolder import load_run
    root, _ = grid_runs
    out = root/'chemistry-caopd-sdft-1'
    assert (out/'train.ipynb').is_file()  # the executed notebook lives in its run folder
    run = load_run(out)
    s = run['settings']
    assert (s['method'], s['protocol'], s['train_domains'], s['eval_domain'], s['K']) == \
        ('caopd-sdft', 'id', ['chemistry'], 'chemistry', 2)
    # the format warm-up ran first, on training prompts, and the run started from its checkpoint
    warm = json.loads((out/'warmup'/'warmup.json').read_text())
    assert warm['steps'] == 1 and warm['mask'] == 'value' and s['warmup']['steps'] == 1
    assert s['start'] == str(out/'warmup'/'checkpoint') and (out/'warmup'/'checkpoint'/'config.json').is_file()
    # the run's time (metrics.json) counts from prepare's start: the claim of the folder (run.json), then the warm-up
    span = (out/'metrics.md').stat().st_mtime - (out/'run.json').stat().st_mtime
    assert json.loads((out/'metrics.json').read_text())['seconds'] >= span
    for when in ('before', 'after'):
        recs = read_jsonl(out/'eval'/when/'records.jsonl')
        assert len(recs) == 2 * 2 and {r['sample'] for r in recs} == {0, 1}
        assert run[when]['n'] == 4
        assert json.loads((out/'eval'/when/'report.json').read_text())['report'] == run[when]
        for k in ('ece', 'ece_stated', 'accuracy_lo', 'accuracy_hi', 'n_stated', 'aurc', 'aurc_lo', 'aurc_oracle'):
            assert k in run[when], k
    steps = [h for h in run['log'] if 'loss' in h]
    assert [h['step'] for h in steps] == [1, 2]
    for key in ('caopd/calibration_loss', 'caopd/capability_loss', 'caopd/empirical_confidence', 'step_time'):
        assert key in steps[0], key
    targets = read_jsonl(out/'rollouts.jsonl')  # every distilled rollout, as the run saw it
    assert sorted({t['step'] for t in targets}) == [1, 2]
    assert all(set(t) == {'step', 'id', 'completion', 'reward', 'confidence', 'mu_hat', 'target', 'successes', 'rollouts'}
               for t in targets)
    assert all(t['target'] == t['mu_hat'] for t in targets)  # the paper's target, written as it is (caopd.scoring)
    assert all(t['rollouts'] == 2 and t['reward'] in (0, 1) for t in targets)  # what each target rests on (K = 2)
    for key in {(t['step'], t['id']) for t in targets}:  # a prompt's successes are its K rollouts' rewards
        group = [t for t in targets if (t['step'], t['id']) == key]
        assert len(group) == 2 and all(t['successes'] == sum(g['reward'] for g in group) for t in group), group
    # each target is the share of right rollouts among the prompt's others (the default: frequency, leave-one-out)
    assert all(t['mu_hat'] == pytest.approx((t['successes'] - t['reward']) / (t['rollouts'] - 1)) for t in targets)
    assert all(isinstance(t['id'], str) and isinstance(t['completion'], str) for t in targets)
    assert (out/'checkpoint'/'config.json').is_file()
    for fig in ('training_curves', 'format_adherence', 'reliability', 'risk_coverage', 'confidence_distributions'):
        assert (out/'figures'/f'{fig}.html').is_file(), fig
    assert (out/'metrics.csv').is_file() and (out/'metrics.md').is_file()
    training = json.loads((out/'train.json').read_text())
    assert (training['steps'], training['world_size'], training['resumed_from']) == (2, 1, None)
    assert sorted(p.name for p in (out/'trainer').iterdir()) == ['checkpoint-2']  # checkpoints to resume from


def test_two_processes_write_the_same_run_folder(grid_runs):
    "num_processes=2 launches caopd.train under torchrun: two CPU processes, the same files, the same per-step records."
    from caopd.runfolder import RunFolder
    root, _ = grid_runs
    one, two = RunFolder(root/'chemistry-caopd-sdft-1'), RunFolder(root/'chemistry-caopd-sdft-2')
    files = lambda f: sorted(str(p.relative_to(f.path)) for p in f.path.rglob('*')
                             if 'trainer' not in p.parts and 'checkpoint' not in p.parts and p.name != 'train.ipynb')
    assert files(one) == files(two)
    s1, s2 = one.read_settings(), two.read_settings()
    assert (s1['world_size'], s2['world_size']) == (1, 2) and (s1['per_device_train_batch_size'], s2['per_device_train_batch_size']) == (2, 1)
    other = ('world_size', 'per_device_train_batch_size', 'out', 'start', 'seconds', 'warmup', 'run_name', 'num_processes')
    same = lambda s: {k: {f: x for f, x in v.items() if f not in other} if k == 'trl_config' else v  # its fields alike
                      for k, v in s.items() if k not in other}
    assert same(s1) == same(s2)
    assert two.read_training()['world_size'] == 2
    assert '$ ' in (two.path/'train.ipynb').read_text() and 'torch.distributed.run' in (two.path/'train.ipynb').read_text()
    for f in (one, two):  # every step logged once; two mu_hat targets (K=2 rollouts of one prompt) per step
        assert [h['step'] for h in f.read_log() if 'loss' in h] == [1, 2]
        assert sorted(t['step'] for t in f.read_targets()) == [1, 1, 2, 2]


def test_continual_training_and_grid_resume(grid_runs):
    from caopd.runfolder import load_run
    from caopd.runs import runs_table
    root, _ = grid_runs
    s = load_run(root/'ct-tooluse-sdft')['settings']
    assert (s['protocol'], s['train_domains'], s['eval_domain']) == ('ct', ['chemistry', 'tooluse'], 'tooluse')
    assert s['start'].endswith('chemistry-caopd-sdft-1/checkpoint') and s['warmup'] is None  # CT starts warmed: no warm-up
    t = runs_table(root)
    assert sorted(t['method']) == ['caopd-sdft', 'caopd-sdft', 'sdft'] and set(t['protocol']) == {'id', 'ct'}
    for _, row in t.iterrows(): check_table_row_against_records(row)
    # a finished grid is not run again
    res = subprocess.run([sys.executable, '-m', 'caopd.runs', str(root.parent/'grid.yaml'), '--dry_run'], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.count('[skip]') == 3, res.stdout + res.stderr


def _differing(a:dict, b:dict) -> list:
    "Keys whose values differ (NaN equals NaN: a metric with nothing to rank is NaN in both)."
    same = lambda x, y: x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
    return sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or not same(a[k], b[k]))


def check_table_row_against_records(row):
    """A row of `runs_table` says what its run's records say: each record's verdict and stated confidence are its
    completion's (the eval domain's verifier, `parse_confidence`), the run evaluated eval_limit prompts eval_samples
    times, the same ones before and after training, and the table's accuracy and n, and report.json, are what
    `records_report` makes of the records."""
    from caopd.confidence import parse_confidence
    from caopd.evaluation import read_jsonl, records_report
    from caopd.runfolder import load_run
    from caopd.verifiers import verify
    run = load_run(row['path'])
    domain = run['settings']['eval_domain']
    seen = {}
    for prefix, when in (('before_', 'before'), ('', 'after')):
        recs = read_jsonl(Path(row['path'])/'eval'/when/'records.jsonl')
        assert len(recs) == TINY['eval_limit'] * TINY['eval_samples'], (row['path'], when, len(recs))
        assert len({r['id'] for r in recs}) == TINY['eval_limit'] and {r['sample'] for r in recs} == {0, 1}
        for r in recs:
            assert r['correct'] == verify(domain, r['completion'], r['answer']), (row['path'], when, r)
            assert r['confidence'] == parse_confidence(r['completion']) and r['parsed'] == (r['confidence'] is not None), r
        report = records_report(recs)
        assert row[f'{prefix}accuracy'] == report['accuracy'] == sum(r['correct'] for r in recs) / len(recs), (row['path'], when)
        assert row[f'{prefix}n'] == report['n'] == len(recs)
        saved = json.loads((Path(row['path'])/'eval'/when/'report.json').read_text())['report']
        assert _differing(saved, report) == [], (row['path'], when, _differing(saved, report))
        seen[when] = sorted((r['id'], r['sample'], json.dumps(r['prompt'])) for r in recs)
    assert seen['before'] == seen['after'], row['path']  # the same prompts before and after: the two compare


def test_notebook_refuses_a_mixed_run_and_resumes_a_finished_one(grid_runs):
    """The notebook into a finished CaOPD folder with another method is refused before any work, naming it, and the
    folder is unchanged; the same run again trains nothing and keeps its samples (it makes only what is missing)."""
    import papermill as pm
    from caopd.runfolder import RunFolder
    root, _ = grid_runs
    out = root/'chemistry-caopd-sdft-1'
    folder = RunFolder(out)
    params = dict(TINY, model=folder.read_settings()['model'], domain='chemistry', method='caopd-sdft', num_processes=1,
                  out=str(out))
    kept = [folder.training, folder.identity, folder.eval('before')/'records.jsonl', folder.eval('after')/'records.jsonl']
    before = {p: p.read_bytes() for p in kept + [folder.metrics]}
    run = lambda name, **kw: pm.execute_notebook(str(TRAIN), str(root.parent/name), parameters=dict(params, **kw),
                                                 cwd=str(ROOT), kernel_name='python3', progress_bar=False)
    with pytest.raises(pm.PapermillExecutionError, match="method: 'caopd-sdft' -> 'sdft'"):
        run('mixed.ipynb', method='sdft')
    assert {p: p.read_bytes() for p in before} == before
    nb = run('again.ipynb')
    assert all(p.read_bytes() == before[p] for p in kept)  # not trained again, no sample made again
    assert 'nothing to train' in json.dumps(nb['cells'])
    assert folder.read_metrics()['after']['accuracy'] == json.loads(before[folder.metrics])['after']['accuracy']


def test_caopd_train_writes_what_the_notebook_writes(grid_runs, tmp_path):
    """`caopd-train` with the arguments papermill gave nbs/train.ipynb writes the same run folder, record for record:
    the same files, settings, evaluations, rollouts, training log and metrics (what a clock or the folder's path
    writes aside)."""
    import os, time
    from caopd.arguments import RunArguments, cli_args
    from caopd.io import read_jsonl
    from caopd.runfolder import RunFolder
    root, _ = grid_runs
    nb = RunFolder(root/'chemistry-caopd-sdft-1')
    params = {k: v for k, v in TINY.items() if k != 'png'}
    args = RunArguments(**params, model=nb.read_settings()['model'], domain='chemistry', method='caopd-sdft',
                        num_processes=1, out=str(tmp_path/'cli'))
    t0 = time.time()
    res = subprocess.run([sys.executable, '-m', 'caopd.pipeline', *cli_args(args)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, 'CAOPD_PNG': '0'})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    print(f'caopd-train: {time.time() - t0:.0f} s; the notebook run: {nb.read_metrics()["seconds"]:.0f} s')
    cli = RunFolder(tmp_path/'cli')
    files = lambda f: sorted(p.relative_to(f.path).as_posix() for p in f.path.rglob('*') if p.is_file()
                             and not {'trainer', 'checkpoint'} & set(p.parts) and p.suffix != '.png' and p.name != 'train.ipynb')
    assert files(cli) == files(nb)
    paths = ('out', 'start', 'run_name', 'warmup')  # the folder's own path, and the warm-up's record (its seconds)
    same = lambda s: {k: {f: x for f, x in v.items() if f not in paths} if k == 'trl_config' else v  # (its run_name too)
                      for k, v in s.items() if k not in paths}
    assert same(cli.read_settings()) == same(nb.read_settings())
    for which in ('before', 'after'):
        assert read_jsonl(cli.eval(which)/'records.jsonl') == read_jsonl(nb.eval(which)/'records.jsonl'), which
    assert cli.read_targets() == nb.read_targets()
    steps = lambda f: [{k: v for k, v in h.items() if 'time' not in k and 'per_second' not in k} for h in f.read_log()]
    assert steps(cli) == steps(nb)
    no_time = lambda m: {k: v for k, v in m.items() if k != 'seconds'}
    assert no_time(cli.read_metrics()) == no_time(nb.read_metrics())
    assert (cli.path/'metrics.md').read_text() == (nb.path/'metrics.md').read_text()
