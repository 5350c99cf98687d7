"nbs/seeds.ipynb as papermill runs it: on the committed laptop-domain runs of the CPU and of one GPU (whose tables it must redraw exactly, never pooling the two), refusing a folder without any; the GPU grid and the README's GPU section against them."
import json, re

import pandas as pd
import pytest

from conftest import ROOT

NB = ROOT/'nbs'/'seeds.ipynb'
COMMITTED = ROOT/'figures'/'arithmetic'
GPU = ROOT/'figures'/'gpu'
GPU_PARAMETERS = dict(runs_dir='figures/runs/gpu', scale='gpu', shared_start=False, reference='')  # the README's command


def _run(tmp_path, **parameters):
    import papermill as pm
    pm.execute_notebook(str(NB), str(tmp_path/'seeds.ipynb'), kernel_name='python3', cwd=str(ROOT), progress_bar=False,
                        parameters=dict(out_dir=str(tmp_path/'out'), png=False, **parameters))
    return tmp_path/'out'


@pytest.mark.slow
def test_the_committed_tables_come_from_the_committed_runs(tmp_path):
    "Every committed table is what the notebook computes from figures/runs/cpu now: nothing typed in, nothing stale."
    out = _run(tmp_path)
    for name in ('seeds', 'levels', 'summary', 'checks', 'rollouts', 'rollout_checks', 'readout', 'readout_per_seed',
                 'readout_checks', 'expected_levels'):
        pd.testing.assert_frame_equal(pd.read_csv(out/f'{name}.csv'), pd.read_csv(COMMITTED/f'{name}.csv'), obj=name)
    seeds = pd.read_csv(out/'seeds.csv', dtype={'seed': str})
    pooled = seeds[seeds.seed == 'all'].set_index('method')['n']
    assert (pooled == seeds[seeds.seed != 'all'].groupby('method')['n'].sum()[pooled.index]).all()
    assert (seeds.groupby('method').size() >= 4).all()  # at least three seeds and the pooled row
    assert {'graded_stated', 'n_distinct'} <= set(seeds.columns)  # how graded the stated confidence is
    levels = pd.read_csv(out/'levels.csv', dtype={'seed': str})
    assert {'auroc', 'auroc_lo', 'auroc_hi', 'graded_stated'} <= set(levels.columns) and set(levels.seed) == {'0', '1', '2', 'all'}
    assert (out/'levels.html').is_file()
    costs = pd.read_csv(out/'rollouts.csv', dtype={'seed': str})  # the K = 8 reference scored 8 of every prompt, and
    ref = costs[costs.method == 'CaOPD (SDFT), num_confidence_rollouts=8']  # each run's log holds 6 steps x 4 prompts
    assert (ref['rollouts_per_prompt'] == 8).all() and (costs[costs.seed != 'all']['prompts'] == 24).all()


@pytest.mark.slow
def test_the_gpu_tables_come_from_the_committed_gpu_runs(tmp_path):
    """figures/gpu is what the notebook computes from figures/runs/gpu alone; the run that did not finish is left out, with a
    note. Its run compares no rollouts (reference ''), so the rollout tables an earlier run wrote into out_dir are removed,
    and only those: checked here too rather than in a papermill run of its own."""
    (tmp_path/'out').mkdir()
    for name in ('rollouts.csv', 'rollout_checks.md', 'notes.txt'): (tmp_path/'out'/name).write_text('earlier\n')
    out = _run(tmp_path, **GPU_PARAMETERS)
    assert not (out/'rollout_checks.md').exists() and (out/'notes.txt').read_text() == 'earlier\n'  # only its own outputs go
    for name in ('seeds', 'levels', 'summary', 'checks'):
        pd.testing.assert_frame_equal(pd.read_csv(out/f'{name}.csv'), pd.read_csv(GPU/f'{name}.csv'), obj=name)
    assert not (out/'rollouts.csv').exists() and (out/'levels.html').is_file()
    printed = ''.join(''.join(o.get('text', '')) for c in json.loads((tmp_path/'seeds.ipynb').read_text())['cells']
                      for o in c.get('outputs', []))
    assert 'left out: figures/runs/gpu/main-s3: its run did not finish' in printed, printed[:2000]
    seeds = pd.read_csv(out/'seeds.csv', dtype={'seed': str})
    runs = seeds[~seeds.method.str.startswith('start') & (seeds.seed != 'all')]
    assert len(runs) == 13  # the 14 folders but main-s3
    assert set(runs.loc[runs.method.str.startswith('CaOPD (SDFT), 6 steps'), 'seed']) == {'0', '1', '2'}
    assert (seeds.loc[seeds.method.str.startswith('start of'), 'n'] > 0).all()  # each group against its own start


READOUT = ROOT/'figures'/'gpu-readout'

@pytest.mark.slow
def test_the_readout_tables_come_from_the_gpu_runs_with_the_readout(tmp_path):
    "figures/gpu-readout is what the notebook computes from figures/runs/gpu-readout: both readouts side by side, checked, over every run of the pair (CaOPD (SDFT) seeds 0-3, SDFT seeds 0-2), none left out."
    out = _run(tmp_path, **dict(GPU_PARAMETERS, runs_dir='figures/runs/gpu-readout'))
    for name in ('seeds', 'levels', 'summary', 'checks', 'readout', 'readout_per_seed', 'readout_checks', 'expected_levels'):
        pd.testing.assert_frame_equal(pd.read_csv(out/f'{name}.csv'), pd.read_csv(READOUT/f'{name}.csv'), obj=name)
    printed = ''.join(''.join(o.get('text', '')) for c in json.loads((tmp_path/'seeds.ipynb').read_text())['cells']
                      for o in c.get('outputs', []))
    assert 'left out' not in printed, printed[:2000]
    readout = pd.read_csv(out/'readout.csv').set_index('method')
    assert list(readout.columns[1:3]) == ['auroc stated', 'auroc expected']  # the paper's readout first, then ours
    assert readout.loc['SDFT', 'n'] == 3 * 568 and readout.loc['CaOPD (SDFT)', 'n'] == 4 * 568

def test_cpu_and_gpu_runs_are_never_pooled():
    "A folder holding both is refused unless a scale is named; naming one reads exactly that scale's runs."
    from caopd.seeds import seed_runs
    with pytest.raises(ValueError, match='never pooled'):
        seed_runs(ROOT/'figures'/'runs')
    runs = ROOT/'figures'/'runs'
    read = lambda folder: sorted(p.relative_to(runs).as_posix() for v in seed_runs(folder, scale='cpu').values() for p in v)
    assert read(runs) == sorted([*read(runs/'cpu'), *read(runs/'budget')])  # the CPU runs, every one, and no GPU run
    with pytest.raises(ValueError, match=r'gpu/caopd-sdft-s0-n24 and .*gpu-readout/caopd-sdft-s0-n24 .* with seed 0: keep one of them'):  # two GPU makings of one run: never counted twice
        seed_runs(ROOT/'figures'/'runs', scale='gpu')
    assert len(seed_runs(ROOT/'figures'/'runs'/'gpu', scale='gpu')) == 5  # each folder alone: 3 budgets, 2 methods


def test_the_gpu_grid_remakes_the_committed_gpu_runs():
    "Every run of nbs/grids/gpu.yaml resolves to the run its committed folder holds (run.json), the code's commit aside."
    import dataclasses
    from caopd.runfolder import RunFolder, identity_diff, run_identity
    from caopd.grid import read_grid
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.stages import process_record, select_prompts
    grid = read_grid(ROOT/'nbs'/'grids'/'gpu.yaml')
    assert grid['root'] == 'figures/runs/gpu'
    folders = sorted(p.name for p in (ROOT/grid['root']).iterdir() if p.is_dir())
    assert sorted(name for name, _ in grid['runs']) == folders and len(folders) == 14
    fields = {f.name for f in dataclasses.fields(RunArguments)}
    for name, params in grid['runs']:
        settings = resolve_settings(RunArguments(**{k: v for k, v in params.items() if k in fields}, out=f'unused/{name}'))
        settings = dataclasses.replace(settings, **process_record())  # the code's version, as caopd.stages.prepare adds it
        settings = select_prompts(settings)[2]  # the prompts' digests
        diff = identity_diff(RunFolder(ROOT/grid['root']/name).read_identity(), run_identity(settings.record()))
        assert set(diff) <= {'caopd_commit'}, (name, diff)


def test_the_readme_gpu_section_quotes_the_tables():
    """docs/results-gpu.md, 'The main job and the larger budgets' (the README's 'On one GPU' until issue 40) quotes
    figures/gpu/summary.md whole, and every other number it gives is in the committed tables."""
    readme = (ROOT/'docs'/'results-gpu.md').read_text()
    start = readme.index('\n## The main job and the larger budgets (before the readout)\n')
    end = readme.find('\n## ', start + 1)
    section = readme[start:end if end >= 0 else None]  # to the next section, or the page's end
    summary = (GPU/'summary.md').read_text()
    assert summary in section, 'docs/results-gpu.md does not quote figures/gpu/summary.md as it is: paste it again'
    prose = section.replace(summary, '')
    tables = ''.join(p.read_text() for d in (GPU, COMMITTED) for p in sorted(d.glob('*.md')))
    numbers = re.findall(r'(?<![\d.])-?[01]\.\d\d(?!\d|\.\d)', prose) + re.findall(r'\[-?[01]\.\d\d, -?[01]\.\d\d\]', prose)
    assert len(numbers) > 50, len(numbers)
    missing = sorted({n for n in numbers if n not in tables})
    assert not missing, f'docs/results-gpu.md gives numbers no table of figures/gpu or figures/arithmetic holds: {missing}'


@pytest.mark.slow
def test_a_folder_without_runs_is_refused(tmp_path):
    with pytest.raises(Exception, match='no finished run tested on'):
        _run(tmp_path, runs_dir=str(tmp_path))


def test_the_readme_graded_section_quotes_the_tables():
    """docs/lab-notebook.md, 'A graded confidence on a laptop' (issue 30, item 3; in the README until issue 40): its
    table lines are lines of the committed figures/arithmetic tables, and every number its prose gives is in them."""
    readme = (ROOT/'docs'/'lab-notebook.md').read_text()
    start = readme.index('\n## A graded confidence on a laptop (ours)\n')
    end = readme.find('\n## ', start + 1)
    section = readme[start:end if end >= 0 else None]  # to the next section, or the page's end
    tables = {line for p in sorted(COMMITTED.glob('*.md')) for line in p.read_text().splitlines()}
    rows = [line for line in section.splitlines() if line.startswith('|')]
    assert len(rows) >= 8 and any('format_warmup=graded' in r for r in rows), rows
    assert not [r for r in rows if r not in tables], 'a table line of the section is not in figures/arithmetic/*.md'
    prose = '\n'.join(line for line in section.splitlines() if not line.startswith('|'))
    numbers = re.findall(r'(?<![\d.])-?[01]\.\d\d(?!\d|\.\d)', prose) + re.findall(r'\[-?[01]\.\d\d, -?[01]\.\d\d\]', prose)
    text = '\n'.join(tables)
    assert not sorted({n for n in numbers if n not in text}), 'the prose gives numbers no committed table holds'


CALIBRATION_NB = ROOT/'nbs'/'calibration.ipynb'

def _calibrate(tmp_path, **parameters):
    import papermill as pm
    pm.execute_notebook(str(CALIBRATION_NB), str(tmp_path/'calibration.ipynb'), kernel_name='python3', cwd=str(ROOT),
                        progress_bar=False, parameters=dict(out_dir=str(tmp_path/'out'), **parameters))
    return tmp_path/'out'


@pytest.mark.slow
def test_the_calibration_tables_come_from_the_committed_runs(tmp_path):
    """figures/calibration (issue 49, item 3; issue 60, item 3) is what nbs/calibration.ipynb computes from the
    default's runs and the candidates' (figures/runs-calibration): each seed's expected ECE and AUROC, each seed's scores
    answer by answer, and each candidate's verdicts."""
    out = _calibrate(tmp_path)
    for name in ('readout_seeds', 'readout_candidates', 'answer_level', 'answer_level_targets'):
        pd.testing.assert_frame_equal(pd.read_csv(out/f'{name}.csv'), pd.read_csv(ROOT/'figures'/'calibration'/f'{name}.csv'), obj=name)
    seeds = pd.read_csv(out/'readout_seeds.csv', dtype={'seed': str})
    each = seeds.groupby('method')['seed'].apply(set)
    assert each['CaOPD (SDFT)'] == {'0', '1', '2'} and all(s <= each['CaOPD (SDFT)'] for s in each)  # on the default's seeds
    verdicts = pd.read_csv(out/'readout_candidates.csv').set_index('method')
    assert verdicts.index[0] == 'CaOPD (SDFT)' and len(verdicts) >= 3  # the default and at least two candidates
    for m, r in verdicts.iloc[1:].iterrows():  # a candidate on fewer seeds than the default is never said to pass on every seed
        if r['seeds'] != '0, 1, 2':
            assert r['ece_every_seed'] not in (True, 'True') and r['becomes default'] in (False, 'False'), (m, r['seeds'])
    scores = pd.read_csv(out/'answer_level.csv')
    default = scores[(scores.method == 'CaOPD (SDFT)') & (scores.paradigm == 'expected')]
    assert sorted(default.seed) == [0, 1, 2] and (default.brier_skill < 0).all()  # issue 60: the default judges no answer
    assert {'stated', 'expected', 'completion_likelihood', 'agreement', 'expected_likelihood'} <= set(scores.paradigm)


def test_the_calibration_notebook_refuses_a_missing_folder(tmp_path):
    "Without the candidates' runs the notebook says, in one line, how to make them."
    from papermill.exceptions import PapermillExecutionError
    with pytest.raises(PapermillExecutionError, match='python -m caopd.runs nbs/grids/calibration.yaml'):
        _calibrate(tmp_path, candidates_dir=str(tmp_path/'none'))
