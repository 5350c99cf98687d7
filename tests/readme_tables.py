"""The tables of the README and of the pages in `docs/`, each built from the committed outputs it quotes: nothing in a
table there is typed in, nor any number in the README.

README.md and docs/*.md hold each table between cog markers (cogapp, https://nedbatchelder.com/code/cog):

    <!-- [[[cog import readme_tables as t; t.out(t.laptop_pooled())]]] -->
    | ... the table, written by cog ... |
    <!-- [[[end]]] -->

`tests/test_readme_tables.py` fails when a table differs from what these functions give now. After the outputs change
(a new run, a benchmark run again, a notebook renamed or described anew), write the tables again from the repository
root:

    .ci/env cog -r -I tests README.md docs/*.md

The sources: the laptop grid's tables (`figures/arithmetic/*.csv` and `summary.md`, which `tests/test_seeds.py`
remakes from the runs in `figures/runs/cpu/`; `figures/gpu/summary.md` likewise from `figures/runs/gpu/`, and
`figures/gpu-readout/` from `figures/runs/gpu-readout/`), the Chemistry L3 runs' evaluation records
(`figures/runs/cpu/chemistry-*/eval/`, whose metrics are recomputed here), the memory plans of the recipes and the
paper's grid (`caopd.grid.nodes_report`), the benchmarks' committed outputs beside their scripts
(`tests/benchmarks/estimators_outcomes.json`, `tests/benchmarks/adaptive_rollouts.json`), and the notebooks' own
title cells (the README's reading order, the reproduce notebooks of `docs/paper-tables.md`).
"""
import functools, json, re, sys, textwrap
from pathlib import Path

import pandas as pd

from caopd.tables import START_NAME as START, group_name  # the row of a run's start, in every table and figure

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT/'tests'/'benchmarks'
ARITHMETIC = ROOT/'figures'/'arithmetic'
RUNS = ROOT/'figures'/'runs'/'cpu'



def _benchmark(name:str):
    "A benchmark's module from `tests/benchmarks` (its own table functions), importable whatever cog left of sys.path."
    import importlib
    if str(BENCHMARKS) not in sys.path: sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def out(text:str):
    "Write `text` into the README at the cog block being run (`cog.out`: cog makes `cog` importable while it runs one)."
    import cog
    cog.out(text)


def _table(header, rows) -> str:
    from caopd.io import markdown_table
    return markdown_table(rows, header=header, right=[])


def ci(row, key:str, decimals:int=2) -> str:
    "'0.34 [0.24, 0.42]': a value and its 95% interval, from the columns `key`, `key_lo` and `key_hi` of a table row."
    from caopd.metrics import interval_text
    if row[key] is None or pd.isna(row[key]): return 'n/a'  # e.g. the ECE of a rank, which is no probability
    return f"{row[key]:.{decimals}f} {interval_text(row[f'{key}_lo'], row[f'{key}_hi'], decimals)}".strip()


# --- integer addition, the laptop grid (figures/arithmetic) ---

LAPTOP_METHODS = ['start', 'SDFT', 'CaOPD (SDFT)', 'CaOPD (SDFT), calibration_weight=10', 'SDPO', 'CaOPD (SDPO)']


def _seeds() -> pd.DataFrame:
    return pd.read_csv(ARITHMETIC/'seeds.csv', dtype={'seed': str})


def _levels() -> pd.DataFrame:
    return pd.read_csv(ARITHMETIC/'levels.csv', dtype={'seed': str})




def _row(table:pd.DataFrame, **where) -> pd.Series:
    "The one row of `table` where each column equals its value."
    hit = table
    for k, v in where.items(): hit = hit[hit[k] == v]
    if len(hit) != 1: raise LookupError(f'{len(hit)} rows where {where}; expected one')
    return hit.iloc[0]


def laptop_pooled() -> str:
    "Each method pooled over the grid's seeds (`seeds.csv`, seed 'all')."
    seeds = _seeds()
    n, k = _row(seeds, method='start', seed='all')['n'], (seeds[seeds.method == 'start'].seed != 'all').sum()
    header = [f'integer addition, {n // k} test questions x {k} seeds', 'accuracy', 'mean confidence', 'ECE', 'AUROC',
              'SPR', 'AURC']
    keys = ['accuracy', 'mean_confidence', 'ece', 'auroc', 'spr', 'aurc']
    return _table(header, [[group_name(m), *(ci(_row(seeds, method=m, seed='all'), key) for key in keys)]
                           for m in LAPTOP_METHODS])


def laptop_per_seed() -> str:
    "Each method's AUROC (accuracy) seed by seed."
    seeds = _seeds()
    each = sorted(s for s in seeds.seed.unique() if s != 'all')
    rows = [[group_name(m), *(f"{r['auroc']:.2f} ({r['accuracy']:.2f})" for r in (_row(seeds, method=m, seed=s) for s in each))]
            for m in LAPTOP_METHODS]
    return _table(['per seed: AUROC (accuracy)', *(f'seed {s}' for s in each)], rows)


def _start_levels(levels:pd.DataFrame, seed:str) -> pd.DataFrame:
    "The start's rows by level: every method's 'before' rows of one seed are the same start (checked)."
    before = levels[(levels.stage == 'before') & (levels.seed == seed) & levels.method.isin(LAPTOP_METHODS)]
    cols = ['level', 'n', 'accuracy', 'mean_confidence']
    first = before[before.method == before.method.iloc[0]][cols].reset_index(drop=True)
    for m, g in before.groupby('method'):
        pd.testing.assert_frame_equal(g[cols].reset_index(drop=True), first, obj=f'the start of {m}, seed {seed}')
    return before[before.method == before.method.iloc[0]].set_index('level')


def laptop_levels() -> str:
    "Accuracy / mean confidence by level, pooled over seeds: the start, then each method after training."
    levels = _levels()
    start = _start_levels(levels, 'all')
    lv = sorted(start.index)
    rows = [[START, *(f"{start.loc[l, 'accuracy']:.2f} / {start.loc[l, 'mean_confidence']:.2f}" for l in lv)]]
    for m in LAPTOP_METHODS[1:]:
        after = levels[(levels.method == m) & (levels.stage == 'after') & (levels.seed == 'all')].set_index('level')
        rows.append([m, *(f"{after.loc[l, 'accuracy']:.2f} / {after.loc[l, 'mean_confidence']:.2f}" for l in lv)])
    return _table(['level: accuracy / mean confidence', *(f'L{l}' for l in lv)], rows)


def main_command() -> str:
    "The README's main command (seed 0's CaOPD (SDFT) run of the grid): before and after, 95% intervals over questions."
    seeds = _seeds()
    keys = ['accuracy', 'mean_confidence', 'ocg', 'ece', 'auroc', 'spr', 'format_adherence']
    before, after = _row(seeds, method='start', seed='0'), _row(seeds, method='CaOPD (SDFT)', seed='0')
    header = [f"integer addition, {after['n']} test questions", 'accuracy', 'mean confidence', 'OCG', 'ECE', 'AUROC',
              'SPR', 'format adherence']
    return _table(header, [[START, *(ci(before, k) for k in keys)], ['CaOPD (SDFT), after', *(ci(after, k) for k in keys)]])


def main_command_levels() -> str:
    "The main command's accuracy and mean confidence by level, before and after."
    levels = _levels()
    run = levels[(levels.method == 'CaOPD (SDFT)') & (levels.seed == '0')]
    rows = []
    for level, g in run.groupby('level'):
        b, a = _row(g, stage='before'), _row(g, stage='after')
        rows.append([str(level), str(b['n']), ci(b, 'accuracy'), ci(b, 'mean_confidence'), ci(a, 'accuracy'),
                     ci(a, 'mean_confidence')])
    return _table(['level', 'n', 'accuracy before', 'mean confidence before', 'accuracy after', 'mean confidence after'], rows)


def rollout_costs() -> str:
    "What each estimate of mu_hat cost in the grid (`rollouts.csv`) beside what it gave (`seeds.csv`), pooled over seeds."
    costs, seeds = pd.read_csv(ARITHMETIC/'rollouts.csv', dtype={'seed': str}), _seeds()
    runs = [('CaOPD (SDFT), num_confidence_rollouts=8', '8 of every prompt (`num_confidence_rollouts=8`), the reference'),
            ('CaOPD (SDFT), confidence_allocation=adaptive, num_confidence_rollouts=8',
             'adaptive 4 -> 8 (`confidence_allocation=adaptive`)'),
            ('CaOPD (SDFT), confidence_estimator=shrunken', '4, shrunken (`confidence_estimator=shrunken`)'),
            ('CaOPD (SDFT)', '4, plain (the `cpu` preset)')]
    k = (costs[costs.method == runs[0][0]].seed != 'all').sum()
    rows = []
    for method, label in runs:
        c, s = _row(costs, method=method, seed='all'), _row(seeds, method=method, seed='all')
        rows.append([label, f"{c['rollouts_per_prompt']:.2f} ({c['rollouts_ratio']:.2f})",
                     f"{c['train_seconds']:.0f} ({c['seconds_ratio']:.2f})",
                     *(ci(s, key) for key in ('ece', 'auroc', 'spr', 'accuracy'))])
    return _table(['CaOPD (SDFT), mu_hat from', 'rollouts / prompt (x K=8)', f'training s, mean of {k} (x K=8)', 'ECE',
                   'AUROC', 'SPR', 'accuracy'], rows)


# --- Chemistry L3, the committed grid (figures/runs/cpu/chemistry-*) ---

CHEMISTRY_RUNS = ['sdft', 'caopd-sdft', 'sdpo', 'caopd-sdpo', 'grpo', 'rlcr']  # the folders chemistry-<method>


def _records(folder:Path, stage:str) -> list[dict]:
    from caopd.io import read_jsonl
    return read_jsonl(folder/'eval'/stage/'records.jsonl')


@functools.cache
def _report(name:str, stage:str) -> dict:
    "The all-sample report of the run folder `name`'s evaluation `stage`, recomputed from its records (once per table run)."
    from caopd.evaluation import records_report
    return records_report(_records(RUNS/name, stage))


def _questions(name:str) -> int:
    "How many questions the run folder `name` was tested on (after training)."
    return len({r['id'] for r in _records(RUNS/name, 'after')})


CHEMISTRY_KEYS = ['accuracy', 'mean_confidence', 'ocg', 'ece', 'spr', 'format_adherence']  # the columns of its tables
CHEMISTRY_HEADER = ['accuracy', 'mean confidence', 'OCG', 'ECE', 'SPR', 'format adherence']


def chemistry() -> str:
    "The Chemistry L3 runs, all-sample metrics recomputed from each run's evaluation records (`records_report`)."
    from caopd.methods import METHODS
    aurc = lambda r: f"{ci(r, 'aurc')} ({r['aurc_oracle']:.2f}, {r['aurc_random']:.2f})"
    cell = lambda r: [*(ci(r, k) for k in CHEMISTRY_KEYS), aurc(r)]
    starts = [_records(RUNS/f'chemistry-{m}', 'before') for m in CHEMISTRY_RUNS]
    if any(s != starts[0] for s in starts): raise ValueError('the Chemistry runs do not start from the same evaluation')
    rows = [[START, *cell(_report('chemistry-sdft', 'before'))]]
    for m in CHEMISTRY_RUNS:
        settings = json.loads((RUNS/f'chemistry-{m}'/'settings.json').read_text())
        if settings['method'] != m: raise ValueError(f"chemistry-{m}/settings.json names method {settings['method']!r}")
        rows.append([METHODS[m].name, *cell(_report(f'chemistry-{m}', 'after'))])
    return _table([f"Chemistry L3, {_questions('chemistry-sdft')} test questions", *CHEMISTRY_HEADER,
                   'AURC (oracle, random)'], rows)


def _chemistry_rows(rows:list) -> list:
    "(label, folder, stage) rows of Chemistry runs: the all-sample metrics of each evaluation, recomputed from its records."
    return [[label, *(ci(_report(folder, stage), k) for k in CHEMISTRY_KEYS)] for label, folder, stage in rows]


def chemistry_k() -> str:
    "The K ablation on Chemistry L3 (CaOPD (SDFT) from the same warmed start; K = 4 is the main grid's run), in a list item."
    body = _chemistry_rows([('K = 2', 'k-ablation-chemistry-2', 'after'), ('K = 4', 'chemistry-caopd-sdft', 'after'),
                            ('K = 8', 'k-ablation-chemistry-8', 'after')])
    for name, K in (('k-ablation-chemistry-2', 2), ('chemistry-caopd-sdft', 4), ('k-ablation-chemistry-8', 8)):
        if json.loads((RUNS/name/'settings.json').read_text())['K'] != K: raise ValueError(f'{name} was not run with K = {K}')
    return _table([f"CaOPD (SDFT), Chemistry L3, {_questions('chemistry-caopd-sdft')} test questions", *CHEMISTRY_HEADER],
                  body)


def chemistry_transfer() -> str:
    "Out of distribution (trained on ToolAlpaca, tested on Chemistry) and continual training (then Chemistry), in a list item."
    ood = 'ood-tooluse-to-chemistry-'
    if _records(RUNS/f'{ood}sdft', 'before') != _records(RUNS/f'{ood}caopd-sdft', 'before'):
        raise ValueError('the two OOD runs do not start from the same evaluation')
    body = _chemistry_rows([(f'OOD {START}', f'{ood}sdft', 'before'), ('OOD SDFT', f'{ood}sdft', 'after'),
                            ('OOD CaOPD (SDFT)', f'{ood}caopd-sdft', 'after'),
                            ('CT SDFT', 'ct-tooluse-chemistry-sdft', 'after'),
                            ('CT CaOPD (SDFT)', 'ct-tooluse-chemistry-caopd-sdft', 'after')])
    return _table([f"tested on Chemistry L3, {_questions(f'{ood}sdft')} questions", *CHEMISTRY_HEADER], body)


def chemistry_tasc() -> str:
    "CaOPD (SDFT) with the TA-SC target beside the verifier's (Table 4), from the same warmed start, in a list item."
    from caopd.methods import METHODS
    if _records(RUNS/'chemistry-caopd-sdft-tasc', 'before') != _records(RUNS/'chemistry-caopd-sdft', 'before'):
        raise ValueError('the TA-SC run does not start from the verifier run\'s evaluation')
    body = _chemistry_rows([('CaOPD (SDFT), verifier target', 'chemistry-caopd-sdft', 'after'),
                            (METHODS['caopd-sdft-tasc'].name, 'chemistry-caopd-sdft-tasc', 'after'),
                            ('SDFT', 'chemistry-sdft', 'after')])
    return _table([f"Chemistry L3, {_questions('chemistry-caopd-sdft')} test questions", *CHEMISTRY_HEADER], body)


# --- the benchmarks (tests/benchmarks) ---

@functools.cache
def _estimator_results() -> dict:
    bench = _benchmark('estimators')
    return bench.results(bench.load_outcomes())


def estimators() -> str:
    "The estimator benchmark's lines on its draw, its table and its verdict, recomputed from its committed outcomes."
    return _benchmark('estimators').readme_text(_estimator_results())


def adaptive() -> str:
    "The adaptive-allocation benchmark's table, from its committed per-step measurements, and what it saved."
    bench = _benchmark('adaptive_rollouts')
    data = bench.load_steps()
    a, early = bench.summary(data)['adaptive 4->8'], _estimator_results()['rows']['early-stopped k0=4 -> K=8']
    return bench.readme_table(data) + '\n' + textwrap.fill(
        f"Adaptive drew {a['rollouts_ratio']:.0%} of fixed K = 8's rollouts (the estimator benchmark's k0 = 4 -> 8: "
        f"{early['rollouts_ratio']:.0%}, at {early['mse_mu_ratio']:.2f} times K = 8's error) and took {a['ratio']:.2f} of "
        f"its time per step: scored-only rollouts are generation alone, and the loss on the distilled ones is the same "
        f"work in all three.", 118) + '\n'


def timings() -> str:
    "How long the README's commands took in a fresh clone, from `tests/benchmarks/timings.py`'s committed output."
    bench = _benchmark('timings')
    COMMANDS, minutes = bench.COMMANDS, bench.minutes
    if not (BENCHMARKS/'timings.txt').is_file():
        return 'Not measured yet: `.ci/env python tests/benchmarks/timings.py > tests/benchmarks/timings.txt`.\n'
    got = _last_json('timings')
    what = dict(main="the main job (one training run, end to end; the environment built before)",
                quick="the quick loop: the tests not marked slow, every library notebook's lessons among them",
                suite="the whole suite as CI runs it (`bash .ci/run`), with the environment build before it",
                site="the site (into `_site/`), every lesson notebook executed (a fresh clone has none cached)")
    commits = got.get('commits', {})  # each command's commit (timings.py --keep keeps earlier ones)
    suite_env = got.get('suite_environment', got['environment'])  # the environment build of the suite's own run
    rows = [[f"`{COMMANDS[k]}`", what[k], minutes(got[k] + (suite_env if k == 'suite' else 0)),
             commits.get(k, got['commit'])] for k in COMMANDS if k in got]
    rows.insert(0, ['`.ci/env true`', 'the environment build alone (a new `.venv`)', minutes(got['environment']), got['commit']])
    return (_table(['command', 'what it runs', f"time (a fresh clone, {got['cores']} cores)", 'commit'], rows)
            + "\nMeasured by `tests/benchmarks/timings.py` (`tests/benchmarks/timings.txt`).\n")


def _last_json(name:str) -> dict:
    "The JSON last line of a benchmark's committed output `tests/benchmarks/<name>.txt`."
    return json.loads((BENCHMARKS/f'{name}.txt').read_text().splitlines()[-1])


def _output(name:str, json_last:bool=False) -> str:
    "A benchmark's committed output `tests/benchmarks/<name>.txt` as a code block (less its JSON last line, if it has one)."
    lines = (BENCHMARKS/f'{name}.txt').read_text().rstrip('\n').splitlines()
    return '```\n' + '\n'.join(lines[:-1] if json_last else lines) + '\n```\n'


def main_job_stages() -> str:
    "Where the README main job's time went, stage by stage (`tests/benchmarks/main_job_stages.py`'s committed output)."
    return _output('main_job_stages', json_last=True)


MAIN_JOB_AIM = 7 * 60  # seconds: the main job's aim on 2 quiet cores, the environment built before (issue 48)

def main_job_time() -> str:
    """The main job's time in its fresh clone against its aim, and that machine's speed against the committed run of the same
    settings (`timings.txt` and `main_job_stages.txt`, both from one `timings.py --runs` clone), in a sentence."""
    minutes = _benchmark('timings').minutes
    timed, speed = _last_json('timings'), _last_json('main_job_stages')
    mine, same = speed['warmup_tokens_per_second'], speed['committed_run_warmup_tokens_per_second']
    where = 'within' if timed['main'] <= MAIN_JOB_AIM else 'above'
    return textwrap.fill(f"In the fresh clone of {timed['commits'].get('main', timed['commit'])} the main job took "
                         f"{minutes(timed['main'])}, {where} the {minutes(MAIN_JOB_AIM)} the project aims for; its "
                         f"warm-up ran at {mine:.0f} tokens/s, {mine / same:.0%} of the speed of the committed run of the "
                         f"same settings ({same:.0f} tokens/s).", 118) + '\n'


def main_job_profile() -> str:
    "Where the README main job's compute went, by profile (`tests/benchmarks/profile_main_job.py`'s committed output, whole)."
    return _output('profile_main_job')


def main_job_limit() -> str:
    "How far from this machine's matrix-product ceiling the main job's parts run (`tests/benchmarks/limit.py`'s committed output, whole)."
    return _output('limit')


def readout_benchmark() -> str:
    "The readout benchmark's committed output, whole."
    return _output('bench_readout')


# --- tables quoted from committed files whole or by rows ---

def nodes() -> str:
    "Which node each recipe and each run of the paper's grid fits (`caopd.grid.nodes_report`)."
    from caopd.grid import nodes_report
    return nodes_report()


SLURM_EXAMPLE = ['nbs/grids/paper.yaml', '--executor', 'slurm', '--gpu', 'H200', '--partition', 'gpu', '--account', 'my-lab', '--time', '24:00:00']
SLURM_SHOWN = 'qwen3-8b-tooluse-caopd-sdft,ct-qwen3-8b-tooluse-chemistry-caopd-sdft,scaling-chemistry-Qwen3-32B-caopd-sdft'

def slurm_jobs() -> str:
    "What each job of the paper's grid asks SLURM for (`caopd.cluster.jobs_markdown`), with SLURM_EXAMPLE's options."
    from caopd.cluster import cluster_options, jobs_markdown
    from caopd.grid import read_grid
    grid = read_grid(SLURM_EXAMPLE[0])
    return jobs_markdown(grid['runs'], cluster_options(grid, time=SLURM_EXAMPLE[-1]))

def slurm_dry_run() -> str:
    "What `caopd-runs` SLURM_EXAMPLE `--dry_run --only` SLURM_SHOWN prints: three runs' commands, jobs and plans."
    import contextlib, io, shlex
    from caopd.runs import main
    args = [*SLURM_EXAMPLE, '--dry_run', '--only', SLURM_SHOWN]
    with contextlib.redirect_stdout(io.StringIO()) as printed: main(args)
    return f"```\n$ caopd-runs {shlex.join(args)}\n{printed.getvalue()}```"


def gpu_summary() -> str:
    "The GPU runs' one line per run (`figures/gpu/summary.md`, which tests/test_seeds.py remakes from figures/runs/gpu)."
    return (ROOT/'figures'/'gpu'/'summary.md').read_text()


def graded_start() -> str:
    "The rows of `figures/arithmetic/summary.md` for CaOPD (SDFT) from the usual warm-up and from the 'graded' one."
    lines = (ARITHMETIC/'summary.md').read_text().splitlines()
    keep = ('CaOPD (SDFT)', 'CaOPD (SDFT), format_warmup=graded')
    return '\n'.join(lines[:2] + [l for l in lines[2:] if l.split(' | ')[0].removeprefix('| ') in keep]) + '\n'


# --- a budget that keeps accuracy? (issue 64, item 4; nbs/grids/budget.yaml) ---

BUDGET_RUNS = ROOT/'figures'/'runs'/'budget'
BUDGET_REFERENCES = ('arithmetic-caopd-sdft', 'arithmetic-calweight10')  # the laptop grid's runs the budgets are read beside


def _budget_rows(name:str, folders:list) -> list:
    """A budget's rows: each seed, then (for several) every answer of every seed pooled; what it trained with, accuracy,
    mean stated confidence and ECE before and after, and after training the Brier skill over a constant at its accuracy and the AUROC within a level
    (95% intervals over questions, pooled: over seeds, then questions)."""
    from caopd.runfolder import RunFolder
    from caopd.seeds import pooled_report, seed_records, seed_report
    s = RunFolder(folders[0]).read_settings()
    weight = (s.get('trainer_overrides') or {}).get('calibration_weight', 1)
    what = [s['max_steps'], f"{s['learning_rate']:g}", f'{weight:g}']
    parts = [(str(RunFolder(f).read_settings()['seed']), [seed_records(f, w) for w in ('before', 'after')]) for f in folders]
    if len(folders) > 1: parts.append(('all', [sum((p[1][i] for p in parts), []) for i in (0, 1)]))
    rows = []
    for seed, (before, after) in parts:
        b, a = (pooled_report(r) if seed == 'all' else seed_report(r) for r in (before, after))
        rows.append([name, seed, *what, ci(b, 'accuracy'), ci(a, 'accuracy'), ci(b, 'mean_confidence'),
                     ci(a, 'mean_confidence'), ci(b, 'ece'), ci(a, 'ece'), ci(a, 'brier_skill'), ci(a, 'level_auroc'), 'yes' if a['accuracy_hi'] >= b['accuracy'] else 'no',
                     'yes' if a['ece_hi'] < b['ece_lo'] else 'no'])
    return rows


def budgets() -> str:
    """Each budget of `nbs/grids/budget.yaml` (figures/runs/budget) beside the laptop grid's CaOPD (SDFT) runs at the
    preset's budget and with calibration_weight=10, seed by seed and pooled: accuracy kept means the trained model's
    interval reaches the start's accuracy; ECE apart, that its ECE's interval lies below the start's."""
    from caopd.grid import read_grid
    grid = read_grid(ROOT/'nbs'/'grids'/'budget.yaml')
    missing = [name for name, _ in grid['runs'] if not (BUDGET_RUNS/name/'metrics.json').is_file()]
    if missing: raise FileNotFoundError(f"{', '.join(missing)} of nbs/grids/budget.yaml not run: python -m caopd.runs "
                                        "nbs/grids/budget.yaml makes them")
    tried = {}  # budget -> its run folders, seeds in order (a grid run is named <budget>-<seed>)
    for name, _ in grid['runs']: tried.setdefault(name.rsplit('-', 1)[0], []).append(BUDGET_RUNS/name)
    seeds = sorted({p.name.rsplit('-', 1)[1] for v in tried.values() for p in v})
    refs = {f'cpu/{r}': [RUNS/f'{r}-{seed}' for seed in seeds] for r in BUDGET_REFERENCES}
    rows = [row for name, folders in [*refs.items(), *((f'budget/{k}', v) for k, v in tried.items())]
            for row in _budget_rows(name, folders)]
    return _table(['run', 'seed', 'steps', 'learning rate', 'calibration weight', 'accuracy before', 'accuracy after',
                   'mean confidence before', 'mean confidence after', 'ECE before', 'ECE after', 'Brier skill after', 'AUROC within a level after', 'accuracy kept',
                   'ECE apart'], rows)


# --- the expected stated confidence (ours; issue 41) ---

def readout(folder:str='gpu-readout') -> str:
    "Both readouts, pooled over seeds (`figures/<folder>/readout.csv`, which tests/test_seeds.py remakes from its runs)."
    t = pd.read_csv(ROOT/'figures'/folder/'readout.csv')
    names = {'auroc': 'AUROC', 'ece': 'ECE', 'brier': 'Brier'}  # the CSV's columns, as the other tables name them
    cols = [(m, r) for m in names for r in ('stated', 'expected')]
    return _table(['method', 'n', *(f'{names[m]} {r}' for m, r in cols)],
                  [[group_name(row['method']), row['n'], *(row[f'{m} {r}'] for m, r in cols)]
                   for row in t.astype(str).to_dict('records')])


def readout_checks(folder:str='gpu-readout') -> str:
    "Issue 41's questions of the expected readout (`figures/<folder>/readout_checks.md`)."
    return (ROOT/'figures'/folder/'readout_checks.md').read_text()


def cascade(folder:str='gpu-readout', share:float=0.25) -> str:
    "A cascade with the oracle at one share deferred, each small model on either readout (`figures/cascade/<folder>`)."
    t = pd.read_csv(ROOT/'figures'/'cascade'/folder/'cascade_table.csv')
    t = t[(t['deferred'] - share).abs() < 1e-9]
    return _table(['small model (routed on)', 'accuracy', 'random routing', 'gain over random'],
                  [[m, f"{a:.3f} {ai}", f"{r:.3f}", f"{g:+.3f} {gi}"] for m, a, ai, r, g, gi in
                   t[['small model', 'accuracy', 'accuracy interval', 'random routing', 'gain', 'gain interval']].values])


READOUT_EXAMPLE = {'1.0': 0.55, '0.8': 0.20, '0.5': 0.15, '0': 0.05, 'high': 0.05}  # what follows `Confidence:`


def readout_example(strings:dict=READOUT_EXAMPLE) -> str:
    """`docs/readout.md`'s worked example: a model that writes each of `strings` after its label with the probability
    given, one character a token, then a newline; `caopd.readout.expected_value` reads it."""
    from caopd.readout import TokenTable, expected_value, value_grammar
    is_value = value_grammar(2)[1]
    chars = sorted({c for t in strings for c in t}) + ['\n']
    def next_probs(prefixes):  # P(next character | the characters so far), from the strings' probabilities
        out = []
        for ids in prefixes:
            done = ''.join(chars[i] for i in ids)
            below = {t: p for t, p in strings.items() if (t + '\n').startswith(done) and len(t) + 1 > len(done)}
            nxt = {}
            for t, p in below.items(): c = (t + '\n')[len(done)]; nxt[chars.index(c)] = nxt.get(chars.index(c), 0) + p
            out.append({i: p / sum(below.values()) for i, p in nxt.items()})
        return out
    r = expected_value(next_probs, TokenTable.from_texts(chars))
    rows = [[f'`{t}`', f'{p:.2f}', 'yes' if is_value(t) else 'no'] for t, p in strings.items()]
    return (_table(['what follows `Confidence:`', 'probability', 'a value CaOPD writes'], rows)
            + f"\nexpected stated confidence {r.expected:.4f}, mass {r.mass:.2f}, outside {r.outside:.2f}, pruned "
              f"{r.pruned:.2f} ({r.nodes} next-token distributions read)\n")


# --- the README's headline: stated against expected confidence, pooled over seeds ---

HEADLINE = {'arithmetic': ['start', 'SDFT', 'CaOPD (SDFT)'],  # the rows, as figures/<folder>/readout.csv names them
            'gpu-readout': ['start of CaOPD (SDFT)', 'SDFT', 'CaOPD (SDFT)']}


def per_seed(folder:str) -> str:
    """The headline's AUROC, ECE and Brier skill per seed beside pooled (`figures/<folder>/readout_per_seed.csv`,
    `caopd.seeds.per_seed_table`): the mean of the seeds' own values [lowest, highest seed], and the pooled value [95%
    interval]."""
    t = pd.read_csv(ROOT/'figures'/folder/'readout_per_seed.csv')
    rows = []
    for readout in ('stated', 'expected'):
        for m in HEADLINE[folder]:
            r = _row(t, method=m, readout=readout)
            label = group_name(m)
            rows.append([label, readout + (' (ours)' if readout == 'expected' else ''), str(r['seeds']),
                         *(ci(r, f'{k} {how}') for k in ('auroc', 'ece', 'brier_skill') for how in ('per seed', 'pooled'))])
    return _table(['method', 'confidence', 'seeds', 'AUROC per seed', 'AUROC pooled', 'ECE per seed', 'ECE pooled',
                   'Brier skill per seed', 'Brier skill pooled'], rows)


def calibration(folder:str='calibration') -> str:
    """Issue 49, item 3: each seed of the laptop default and of each candidate (`figures/<folder>/readout_seeds.csv`,
    `caopd.seeds.readout_seeds`), then each group's verdict (`readout_candidates.csv`)."""
    seeds = pd.read_csv(ROOT/'figures'/folder/'readout_seeds.csv', dtype={'seed': str})
    verdicts = pd.read_csv(ROOT/'figures'/folder/'readout_candidates.csv')
    rows = [[r['method'], r['seed'], f"{r['accuracy']:.2f}", f"{r['mean_confidence']:.2f}", f"{r['mean_mu_hat']:.2f}",
             ci(r, 'ece'), ci(r, 'auroc')] for _, r in seeds.iterrows()]
    each = _table(['method', 'seed', 'accuracy', 'mean expected confidence', 'mean training mu_hat', 'expected ECE',
                   'expected AUROC'], rows)
    from caopd.seeds import READOUT_TARGETS
    yes = lambda v: 'not decided' if pd.isna(v) else 'yes' if v in (True, 'True') else 'no'  # NaN: seeds not run decide it
    rows = [[r['method'], str(r['seeds']), r['ece per seed'], r['auroc per seed'], f"{r['mean_auroc']:.2f}", r['accuracy'],
             yes(r['ece_every_seed']), yes(r['auroc_mean']), yes(r['accuracy_kept']),
             '-' if i == 0 else yes(r['ece_below_default_every_seed']), '-' if i == 0 else yes(r['becomes default'])]
            for i, (_, r) in enumerate(verdicts.iterrows())]
    return each + '\n' + _table(['method', 'seeds', 'ECE per seed', 'AUROC per seed', 'mean AUROC', 'accuracy (pooled)',
                                 f"ECE <= {READOUT_TARGETS['ece']:.2f} each seed", f"mean AUROC >= {READOUT_TARGETS['auroc']:.2f}", 'accuracy kept',
                                 "ECE below the default's each seed", 'becomes the default'], rows)


def answer_level(folder:str='calibration', # a folder of figures/ that nbs/calibration.ipynb wrote
                 paradigms=('expected', 'stated', 'completion_likelihood', 'expected_likelihood'), # the scores shown
                ) -> str:
    """Issue 60, item 3: per group and seed, each score's accuracy, ECE, Brier skill, AUROC overall and within a level,
    and level spread (`figures/<folder>/answer_level.csv`, `caopd.paradigm_runs.seed_scores`)."""
    from caopd.paradigms import PARADIGMS
    t = pd.read_csv(ROOT/'figures'/folder/'answer_level.csv')
    t = t[t.paradigm.isin(paradigms)]
    two = lambda v: 'n/a' if pd.isna(v) else f'{v:.2f}'
    rows = [[r['method'], str(r['seed']), PARADIGMS[r['paradigm']].label, two(r['accuracy']), ci(r, 'ece'), two(r['brier_skill']),
             ci(r, 'auroc'), ci(r, 'level_auroc'), two(r['level_spread'])]
            for _, r in t.iterrows()]  # in the table's order: each group, its seeds, their scores
    return _table(['method', 'seed', 'score', 'accuracy', 'ECE', 'Brier skill', 'AUROC', 'AUROC within a level',
                   'level spread'], rows)


def answer_level_targets(folder:str='calibration') -> str:
    """Issue 60's targets for the expected confidence on every seed (`figures/<folder>/answer_level_targets.csv`,
    `caopd.paradigm_runs.answer_level_targets`): each group's worst seed, and whether it reaches each."""
    from caopd.paradigm_runs import ANSWER_TARGETS as T
    t = pd.read_csv(ROOT/'figures'/folder/'answer_level_targets.csv')
    mark = lambda ok: 'yes' if ok in (True, 'True') else 'no' if ok in (False, 'False') else 'not decided'
    rows = [[r['method'], str(r['seeds']), f"{r['worst brier_skill']:.2f} ({mark(r['brier_skill every seed'])})",
             f"{r['worst ece']:.2f} ({mark(r['ece every seed'])})", f"{r['worst level_auroc']:.2f} ({mark(r['level_auroc every seed'])})",
             f"{r['worst level_spread']:.2f} ({mark(r['level_spread every seed'])})",
             f"{r['accuracy']:.2f} ({mark(r['accuracy_kept'])})", mark(r['reaches'])] for _, r in t.iterrows()]
    return _table(['method', 'seeds', f"worst Brier skill (> {T['brier_skill']:g})", f"worst ECE (<= {T['ece']:.2f})",
                   f"worst AUROC within a level (>= {T['level_auroc']:.2f})", f"worst level spread (>= {T['level_spread']:.1f})",
                   "accuracy (not below the default's interval)", 'reaches them all'], rows)


def headline(folder:str) -> str:
    """The few columns that say the headline of a seeded grid: accuracy (`seeds.csv`), AUROC and ECE by the stated and
    the expected confidence (`readout.csv`), pooled over its seeds with intervals over seeds and questions, each ECE
    with its seeds' range beside it (`readout_per_seed.csv`: a pooled ECE can hide seeds far apart), and the expected
    confidence's Brier skill over a constant at each seed's accuracy (0: no better than the constant)."""
    seeds = pd.read_csv(ROOT/'figures'/folder/'seeds.csv', dtype={'seed': str})
    readout = pd.read_csv(ROOT/'figures'/folder/'readout.csv')
    each = pd.read_csv(ROOT/'figures'/folder/'readout_per_seed.csv')
    span = lambda r, k: f"{r[f'{k} per seed_lo']:.2f} to {r[f'{k} per seed_hi']:.2f}"
    rows = []
    for m in HEADLINE[folder]:
        s, r = _row(seeds, method=m, seed='all'), _row(readout, method=m)
        st, ex = _row(each, method=m, readout='stated'), _row(each, method=m, readout='expected')
        k = (seeds[seeds.method == m].seed != 'all').sum()
        if r['n'] != s['n']: raise ValueError(f'{folder}: {m} pools {r["n"]} answers in readout.csv, {s["n"]} in seeds.csv')
        label = group_name(m)  # on the GPU: 'start of CaOPD (SDFT)', its own seeds
        rows.append([label, f"{k} x {s['n'] // k}", ci(s, 'accuracy'), r['auroc stated'], r['auroc expected'],
                     f"{r['ece stated']}; seeds {span(st, 'ece')}", f"{r['ece expected']}; seeds {span(ex, 'ece')}",
                     f"{ci(ex, 'brier_skill pooled')}; seeds {span(ex, 'brier_skill')}"])
    return _table(['method', 'seeds x questions', 'accuracy', 'AUROC stated', 'AUROC expected (ours)',
                   'ECE stated: pooled; each seed', 'ECE expected (ours): pooled; each seed',
                   'Brier skill expected (ours): pooled; each seed'], rows)


def your_task_output() -> str:
    """What docs/your-task.md's script printed with the embedded model (`tests/benchmarks/your_task.txt`): its first
    line, then the reports as Markdown, each heading as a bold line (the page's own headings stay its sections)."""
    head, _, printed = (BENCHMARKS/'your_task.txt').read_text().partition('\n\n')
    body = re.sub(r'^#+ (.*)$', r'**\1**', printed.strip(), flags=re.M)
    return f'*{head.strip()}:*\n\n{body}\n'


# --- the README's first screen: what the runs show, in words chosen by the intervals ---

VERDICT = {'arithmetic': ('On a laptop', 'two CPU cores', 'laptop'),  # headline folder: its words, its paradigms folder
           'gpu-readout': ('On one GPU', 'one H200', 'gpu')}


def _span(r, key:str) -> tuple[float, float, float]: return r[key], r[f'{key}_lo'], r[f'{key}_hi']

def _num(v:tuple) -> str: return f'{v[0]:.2f}'
def _iv(v:tuple) -> str: return ci({'v': v[0], 'v_lo': v[1], 'v_hi': v[2]}, 'v')

def _order(a:tuple, b:tuple) -> str:
    "'below', 'above' where the 95% intervals of `a` and `b` do not overlap, else 'overlap'."
    return 'below' if a[2] < b[1] else 'above' if a[1] > b[2] else 'overlap'


def verdict_line(folder:str) -> str:
    """One machine's result in a sentence, each comparison's word chosen by whether its intervals overlap: CaOPD's
    stated confidence against SDFT's (ECE) and chance (AUROC), accuracy before and after training, and the expected
    confidence (ours) against a constant at the model's accuracy (Brier skill) and the agreement of samples (AUROC)."""
    where, machine, paradigms = VERDICT[folder]
    start, sdft, caopd = HEADLINE[folder]
    seeds = pd.read_csv(ROOT/'figures'/folder/'seeds.csv', dtype={'seed': str})
    each = pd.read_csv(ROOT/'figures'/folder/'readout_per_seed.csv')
    acc = {m: _span(_row(seeds, method=m, seed='all'), 'accuracy') for m in (start, sdft, caopd)}
    stated = {m: _row(each, method=m, readout='stated') for m in (sdft, caopd)}
    ece = {m: _span(r, 'ece pooled') for m, r in stated.items()}
    auroc = _span(stated[caopd], 'auroc pooled')
    expected = _row(each, method=caopd, readout='expected')
    k = int(expected['seeds'])
    rows = {r['paradigm']: r for r in json.loads((ROOT/'figures'/'paradigms'/paradigms/'paradigms.json').read_text())['rows']
            if r['method'] == caopd}
    agree, mine = _span(rows['agreement'], 'auroc'), _span(rows['expected'], 'auroc')

    calibrated = {'below': 'better calibrated than', 'above': 'worse calibrated than',
                  'overlap': 'calibrated no better than'}[_order(ece[caopd], ece[sdft])]
    chance = ('no better than chance' if auroc[2] <= 0.5 else 'better than chance' if auroc[1] > 0.5
              else 'about as well as chance')
    moved = {'below': 'falls', 'above': 'rises', 'overlap': 'goes'}[_order(acc[caopd], acc[start])]
    overlap = ', the intervals overlapping' if moved == 'goes' else ''
    skill = _span(expected, 'brier_skill pooled')
    constant = 'beats' if skill[1] > 0 else 'is worse than' if skill[2] < 0 else 'is no better than'
    ranks = {'above': 'better than', 'below': 'worse than', 'overlap': 'about as well as'}[_order(agree, mine)]
    return (f"- **{where}** ({machine}, {k} seeds): CaOPD's stated confidence is {calibrated} SDFT's (ECE "
            f"{_num(ece[caopd])} against {_num(ece[sdft])}) and ranks answers {chance} (AUROC {_num(auroc)}); accuracy "
            f"{moved} from {_num(acc[start])} before training to {_num(acc[caopd])}{overlap} (SDFT's: "
            f"{_num(acc[sdft])}). Its expected confidence has ECE {_num(_span(expected, 'ece pooled'))} and "
            f"{constant} a constant at its accuracy (Brier skill {_iv(skill)}); the agreement of "
            f"{rows['agreement']['extra_samples']:g} more samples ranks answers {ranks} it (AUROC {_num(agree)} "
            f"against {_num(mine)}).")


def verdict() -> str:
    "The README's first screen: each machine's `verdict_line`, wrapped as the README's prose is."
    return '\n'.join(textwrap.fill(verdict_line(f), 118, subsequent_indent='  ') for f in VERDICT) + '\n'


def headline_checks(folder:str) -> str:
    "One sentence: how many of the expected readout's checks hold for CaOPD (SDFT) (`readout_checks.csv`), and which fail."
    t = pd.read_csv(ROOT/'figures'/folder/'readout_checks.csv')
    t = t[t.method == 'CaOPD (SDFT)']
    failed = [c.split(' (')[0].replace(': ', ' ') for c, ok in t[['check', 'holds']].values if not ok]
    text = f"{int(t.holds.sum())} of {len(t)} checks of CaOPD (SDFT)'s expected confidence hold (`figures/{folder}/readout_checks.md`)"
    return textwrap.fill(text + (f"; not: {'; '.join(failed)}." if failed else '.'), 118) + '\n'


def paradigms(folder:str, # a folder of `figures/paradigms` (`python -m caopd.paradigm_runs ... --out` wrote it)
              full:bool=False, # every column (`paradigms.md` as written); False: the few the README shows
             ) -> str:
    "The paradigms of uncertainty on the same answers (`figures/paradigms/<folder>/paradigms.json`, its rows)."
    from caopd.paradigms import PARADIGMS
    path = ROOT/'figures'/'paradigms'/folder
    if full: return (path/'paradigms.md').read_text()
    saved = json.loads((path/'paradigms.json').read_text())
    rows = []
    for r in saved['rows']:
        tokens = 'n/a' if r['extra_tokens'] is None else f"{r['extra_tokens']:.0f}"
        rows.append([group_name(r['method']), PARADIGMS[r['paradigm']].label,
                     r.get('access') or PARADIGMS[r['paradigm']].access, ci(r, 'auroc'), _seeds_text(r, 'auroc'),
                     ci(r, 'level_auroc'), ci(r, 'ece'), _seeds_text(r, 'ece'), _seeds_text(r, 'brier_skill'),
                     ci(r, 'ece_fit'), f"{r['extra_samples']:g} / {tokens}"])
    table = _table(['method', 'score', 'needs', 'AUROC pooled', 'AUROC per seed', 'AUROC within a level', 'ECE pooled',
                    'ECE per seed', 'Brier skill per seed', 'ECE after a Platt fit', 'more samples / tokens per answer'], rows)
    missing = saved.get('without_scores') or []
    return table + (f"\nNot scored: {', '.join(missing)}.\n" if missing else '')


def paradigm_starts(folder:str) -> str:
    "Which run's evaluation before training is each seed's start in `figures/paradigms/<folder>` (`caopd.paradigm_runs.start_folders`)."
    from caopd.paradigm_runs import start_folders
    from caopd.seeds import run_label
    from caopd.runfolder import RunFolder
    groups = json.loads((ROOT/'figures'/'paradigms'/folder/'paradigms.json').read_text())['groups']
    by = {}
    for seed, f in sorted(start_folders({k: [ROOT/p for p in v] for k, v in groups.items()}).items()):
        by.setdefault(run_label(RunFolder(f).read_settings()), []).append(str(seed))
    return '; '.join(f"seed{'s' if len(s) > 1 else ''} {', '.join(s)}: {label}'s run" for label, s in by.items()) + '\n'


def _seeds_text(r:dict, m:str) -> str:
    "A paradigm's metric per seed: 'mean [lowest, highest seed]', or 'n/a'."
    if r.get(f'{m}_seed_mean') is None: return 'n/a'
    return f"{r[f'{m}_seed_mean']:.2f} [{r[f'{m}_seed_min']:.2f}, {r[f'{m}_seed_max']:.2f}]"


# --- the notebooks, from their own title cells ---

NBS = ROOT/'nbs'


def title_cell(nb:Path) -> tuple[str, str]:
    "A notebook's title (`# ...`) and description (`> ...`), from its first markdown cell."
    cells = json.loads(nb.read_text())['cells']
    lines = ''.join(next(c for c in cells if c['cell_type'] == 'markdown')['source']).splitlines()
    title = next((l[2:].strip() for l in lines if l.startswith('# ')), '')
    description = ' '.join(l[1:].strip() for l in lines if l.startswith('>'))
    if not title or not description: raise ValueError(f'{nb}: its first markdown cell has no `# title` and `> description`')
    return title, description


def _what(title:str, description:str) -> str:
    "A papermill notebook's row: its title, then its description without the command it ends with."
    d = re.sub(r':\s*`[^`]*papermill [^`]*`\s*$', '', description).rstrip('.')
    return f'{title}. {d}'


def _module(nb:Path) -> str | None:
    "The module a library notebook exports (`#| default_exp`), or None for a papermill notebook (a `parameters` cell)."
    cells = json.loads(nb.read_text())['cells']
    for c in cells:
        m = re.match(r'#\|\s*default_exp\s+(\w+)', ''.join(c['source']))
        if c['cell_type'] == 'code' and m: return m.group(1)
    if any('parameters' in c.get('metadata', {}).get('tags', []) for c in cells): return None
    raise ValueError(f'{nb} is neither a library notebook (`#| default_exp`) nor a papermill one (a `parameters` cell)')


def notebooks(prefix:str='') -> str:
    """The notebooks in reading order, each row from the notebook's own title cell: the library notebooks in their
    numbered order (each after the notebooks whose modules it imports), then the papermill notebooks of `nbs/`, then
    one row for `nbs/reproduce/`. `prefix` goes before every link (`../` on a page in `docs/`)."""
    rows = []
    nbs = sorted(NBS.glob('*.ipynb'))
    for nb in nbs:
        if (mod := _module(nb)) is None: continue
        rows.append([f'[{nb.stem}]({prefix}nbs/{nb.name})', f'`caopd.{mod}`', title_cell(nb)[1]])
    for nb in nbs:
        if _module(nb) is None: rows.append([f'[{nb.stem}]({prefix}nbs/{nb.name})', '(papermill)', _what(*title_cell(nb))])
    rows.append([f'[reproduce/]({prefix}docs/paper-tables.md)', '(papermill)',
                 f'Every table and figure of the paper, one notebook each ({len(list((NBS/"reproduce").glob("*.ipynb")))}), '
                 f'from run folders'])
    return _table(['notebook', 'module', 'what it holds'], rows)


def reproduce_notebooks(prefix:str='../') -> str:
    "The reproduce notebooks, each row from its own title cell, with the figure and table files it writes."
    rows = []
    for nb in sorted((NBS/'reproduce').glob('*.ipynb')):
        rows.append([f'[{nb.stem}]({prefix}nbs/reproduce/{nb.name})', _what(*title_cell(nb))])
    return _table(['notebook', 'what it makes'], rows)
