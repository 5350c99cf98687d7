"Every nbs/reproduce/*.ipynb as papermill runs it: with no runs (the paper's numbers alone) and with made-up run folders."
import json, random
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # runs papermill notebooks: not in the quick loop (README, "Working on caopd")

REPRODUCE = sorted((ROOT/'nbs'/'reproduce').glob('*.ipynb'))

# the files each notebook writes under out_dir (PNGs are off: png=False), and the table that must hold our runs
EXPECTED = {
    'table1_mean_confidence': (['table1_mean_confidence.csv', 'table1_mean_confidence.md', 'table1_mean_confidence.html'],
                               'table1_mean_confidence.csv'),
    'table2_main_results_sdft': (['table2_main_results_sdft.csv', 'table2_main_results_sdft.md',
                                  'table2_main_results_sdft.html'], 'table2_main_results_sdft.csv'),
    'table3_main_results_rl': (['table3_main_results_rl.csv', 'table3_main_results_rl.md', 'table3_main_results_rl.html'],
                               'table3_main_results_rl.csv'),
    'table4_tasc_ablation': (['table4_tasc_ablation.csv', 'table4_tasc_ablation.md', 'table4_tasc_ablation.html'],
                             'table4_tasc_ablation.csv'),
    'table6_hyperparameters': (['table6_hyperparameters.csv', 'table6_hyperparameters.md'], None),
    'table7_figure3_chemistry_generalization': (['table7_chemistry_appendix.csv', 'table7_chemistry_appendix.md',
                                                 'figure3_generalization.html'], 'table7_chemistry_appendix.csv'),
    'table8_tooluse_generalization': (['table8_tooluse_appendix.csv', 'table8_tooluse_appendix.md',
                                       'figure3_generalization_tooluse.html'], 'table8_tooluse_appendix.csv'),
    'table9_cost_summary': (['table9_cost_summary.csv', 'table9_cost_summary.md', 'table9_step_time_this_machine.csv',
                             'table9_step_time_this_machine.md'], 'table9_step_time_this_machine.csv'),
    'figure1_table10_hero': (['table10_api_chemistry.csv', 'table10_api_chemistry.md', 'figure1_hero.html'],
                             'table10_api_chemistry.csv'),
    'figure2_training_curves': (['figure2_training_curves.html'], None),
    'figure4_scaling': (['figure4_scaling.csv', 'figure4_scaling.md', 'figure4_scaling.html'], 'figure4_scaling.csv'),
    'figure6_effect_k_confidence': (['figure6_k_ablation.csv', 'figure6_k_ablation.md', 'figure6_k_ablation.html',
                                     'figure6_confidence_distributions.html'], 'figure6_k_ablation.csv'),
    'figure7_dynamics_scales': (['figure7_dynamics_scales.html'], None),
    'figure5_pipeline': (['figure5_pipeline.html', 'figure5_pipeline_tokens.csv', 'figure5_pipeline_tokens.md'], None),
}


def test_every_reproduce_notebook_is_listed():
    assert sorted(p.stem for p in REPRODUCE) == sorted(EXPECTED)


def _report(rng, acc, conf):
    "A calibration report shaped like caopd.metrics.calibration_report's (numbers made up)."
    return dict(accuracy=acc, ece=abs(conf - acc) + 0.02, brier=abs(conf - acc) * 0.8 + 0.1, ocg=conf - acc,
                spr=rng.uniform(0.2, 0.6), auroc=rng.uniform(0.5, 0.7), mean_confidence=conf, format_adherence=0.9, n=16)


def make_run(folder:Path, rng, model='smollm2-135m-instruct', domain='chemistry', method='caopd-sdft',
             eval_domain=None, train_domains=None, K=4, steps=3):
    "A finished run folder of nbs/train.ipynb (RUNS.md layout) with made-up numbers."
    eval_domain = eval_domain or domain
    train_domains = train_domains or [domain]
    protocol = 'ct' if len(train_domains) > 1 else 'id' if eval_domain in train_domains else 'ood'
    folder.mkdir(parents=True)
    caopd = method.startswith('caopd')
    settings = dict(model=model, domain=domain, method=method, eval_domain=eval_domain, train_domains=train_domains,
                    protocol=protocol, K=K, scale='cpu', max_steps=steps, preset='cpu', n_train_prompts=8, n_eval_prompts=16)
    (folder/'settings.json').write_text(json.dumps(settings))
    after_conf = rng.uniform(0.3, 0.6) if caopd else rng.uniform(0.9, 1.0)
    metrics = dict(before=_report(rng, 0.2, 0.85), after=_report(rng, rng.uniform(0.2, 0.4), after_conf))
    (folder/'metrics.json').write_text(json.dumps(metrics))
    log = [dict(step=s, loss=1 / s, step_time=2.0 + rng.random(), **({'caopd/rollout_accuracy': 0.2 + 0.05 * s,
           'caopd/calibration_loss': 0.5 / s, 'caopd/format_adherence': min(1.0, 0.6 + 0.15 * s)} if caopd else
           {'rewards/mcq_reward/mean': 0.2}))
           for s in range(1, steps + 1)] + [dict(step=steps, train_runtime=10.0)]
    (folder/'train_log.jsonl').write_text(''.join(json.dumps(l) + '\n' for l in log))
    for which, conf in [('before', 0.85), ('after', after_conf)]:
        (folder/'eval'/which).mkdir(parents=True)
        recs = [dict(id=str(i), sample=0, correct=rng.random() < 0.3,
                     confidence=None if i == 0 else round(min(1.0, max(0.0, rng.gauss(conf, 0.15))), 2)) for i in range(16)]
        (folder/'eval'/which/'records.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    if caopd:
        (folder/'rollouts.jsonl').write_text(''.join(json.dumps(dict(step=1, mu_hat=rng.randint(0, K) / K)) + '\n'
                                                   for _ in range(32)))


@pytest.fixture(scope='module')
def fake_runs(tmp_path_factory):
    "Made-up CPU runs for every protocol of the paper on both domains, a K ablation, and a second model size."
    root, rng = tmp_path_factory.mktemp('runs'), random.Random(0)
    for m in ('sdft', 'caopd-sdft', 'sdpo', 'caopd-sdpo', 'grpo', 'rlcr'): make_run(root/f'chemistry-{m}', rng, method=m)
    for m in ('sdft', 'caopd-sdft'):
        make_run(root/f'tooluse-{m}', rng, domain='tooluse', method=m)
        make_run(root/f'ood-tooluse-to-chemistry-{m}', rng, domain='tooluse', eval_domain='chemistry', method=m)
        make_run(root/f'ct-tooluse-chemistry-{m}', rng, domain='chemistry', method=m, train_domains=['tooluse', 'chemistry'])
        make_run(root/f'qwen3-0.6b-chemistry-{m}', rng, model='Qwen3-0.6B', method=m)
    for k in (2, 8): make_run(root/f'k-ablation-chemistry-K{k}', rng, method='caopd-sdft', K=k)
    return root


def run_reproduce(nb:Path, runs_dir:Path, out:Path, tmp_path:Path, **params):
    import papermill as pm
    before = nb.read_bytes()
    pm.execute_notebook(str(nb), str(tmp_path/nb.name), kernel_name='python3', cwd=str(ROOT), progress_bar=False,
                        parameters=dict(runs_dir=str(runs_dir), out_dir=str(out), png=False, **params))
    assert nb.read_bytes() == before, f'{nb.name}: papermill changed the source notebook'
    files, table = EXPECTED[nb.stem]
    missing = [f for f in files if not (out/f).is_file()]
    assert not missing, f'{nb.name} did not write {missing}; it wrote {sorted(p.name for p in out.iterdir())}'
    assert not list(out.glob('*.png')), f'{nb.name} wrote PNGs although png=False'
    return table


def tiny_params(tmp_path:Path) -> dict:
    "Figure 5 runs a model: a tiny random one, a few tokens, the fixture records instead of the real data."
    from trainer_helpers import tiny_model_dir
    return dict(model=tiny_model_dir(tmp_path/'tiny'), K=4, max_new_tokens=12, data_dir=str(ROOT/'data'/'fixtures'),
                split='all', index=1)


@pytest.mark.parametrize('nb', REPRODUCE, ids=lambda p: p.stem)
def test_reproduce_without_runs(nb, tmp_path):
    "No run folder: every notebook still writes its tables and figures from the paper's numbers alone."
    (tmp_path/'runs').mkdir()
    params = tiny_params(tmp_path) if nb.stem == 'figure5_pipeline' else {}
    table = run_reproduce(nb, tmp_path/'runs', tmp_path/'out', tmp_path, **params)
    if nb.stem == 'figure5_pipeline':  # the tiny model states no confidence: sampled tokens (I_a), then mu_hat appended (I_c)
        t = pd.read_csv(tmp_path/'out'/'figure5_pipeline_tokens.csv')
        assert t['confidence_token'].any() and not t['confidence_token'].all(), t
        assert t.loc[t['confidence_token'], 'position'].min() > t.loc[~t['confidence_token'], 'position'].max(), t
    if table and 'source' in (t := pd.read_csv(tmp_path/'out'/table)).columns:
        assert set(t['source']) == {'paper'}, f'{table}: rows from this machine although there is no run'


# with runs: one notebook per way of reading them (tables and figures from runs_table, logs, records and mu_hat,
# the three protocols, step times); the other notebooks read runs the same way as one of these
WITH_RUNS = ('table2_main_results_sdft', 'table7_figure3_chemistry_generalization', 'table9_cost_summary',
             'figure1_table10_hero', 'figure2_training_curves', 'figure4_scaling', 'figure6_effect_k_confidence')

@pytest.mark.parametrize('nb', [p for p in REPRODUCE if p.stem in WITH_RUNS], ids=lambda p: p.stem)
def test_reproduce_with_runs(nb, fake_runs, tmp_path):
    "Made-up run folders: our runs appear beside the paper's numbers in the table each notebook writes."
    table = run_reproduce(nb, fake_runs, tmp_path/'out', tmp_path)
    if nb.stem == 'figure2_training_curves':  # the curves of both made-up runs are in the figure
        html = (tmp_path/'out'/'figure2_training_curves.html').read_text()
        assert 'CaOPD (SDPO) (cpu, K=4, 3 steps)' in html and 'SDPO (cpu, K=4, 3 steps)' in html
    if table is None: return
    t = pd.read_csv(tmp_path/'out'/table)
    if 'source' in t.columns: assert 'this machine' in set(t['source']), f'{table} has no row of our runs'
    else: assert len(t), f'{table} is empty although there are runs'
