"""Issue 47's done-when for the settings: a run typed on caopd-train's command line reads as the notebook's parameters
read, for every run of nbs/grids/*.yaml and the README main job, and the committed run folders record what their grid's
runs resolve to today."""
import dataclasses, json
from pathlib import Path

from conftest import ROOT

def _train_runs() -> list:
    "(name, RunArguments, run folder or None) of the README main job (the notebook's defaults) and of every run of the train notebook's grids."
    from caopd.arguments import RunArguments
    from caopd.grid import read_grid, run_params
    runs = [('README main job', RunArguments(), None)]
    for path in sorted((ROOT/'nbs'/'grids').glob('*.yaml')):
        grid = read_grid(path)
        if Path(grid['notebook']).name != 'train.ipynb': continue
        runs += [(f'{path.name}: {name}', RunArguments(**run_params(params)), Path(grid['root'])/name) for name, params in grid['runs']]
    return runs

def test_every_run_reads_alike_from_its_command_line():
    "cli_args (a run as caopd-train's flags) and parse_args (one TrlParser) give back each run's arguments, its trainer_overrides (TRL fields) among them."
    from caopd.arguments import cli_args, parse_args
    runs = _train_runs()
    assert len(runs) > 40 and any(a.trainer_overrides for _, a, _ in runs)  # the grids' TRL fields are among them
    for name, args, _ in runs: assert parse_args(cli_args(args)) == args, name

def test_committed_run_folders_record_todays_settings():
    "Every field a committed run folder's settings.json holds is what its grid's run resolves to today, but those a stage fills (the warm-up's start, this process's record) and the machine's versions; a field an older record lacks is not compared."
    from caopd.arguments import RunSettings, resolve_settings
    later = {f.name for f in dataclasses.fields(RunSettings) if f.default is None} | {'start', 'versions'}
    compared = 0
    for name, args, folder in _train_runs():
        record = ROOT/folder/'settings.json' if folder else None
        if record is None or not record.is_file(): continue
        old = json.loads(record.read_text())
        if args.init_from: continue  # continual training resolves from the earlier run's trained weights, not committed
        if old.get('scale') != 'cpu': continue  # made on a GPU node (figures/runs/gpu): its machine resolved it
        new = resolve_settings(dataclasses.replace(args, out=str(folder))).record()
        diff = {k: (old[k], new[k]) for k in new if k not in later and old.get(k) is not None and old[k] != new[k]}
        assert not diff, (name, diff)
        compared += 1
    assert compared >= 30, compared  # the arithmetic grid's committed runs, at least
