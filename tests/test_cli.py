"""The console scripts as users type them: the README's evaluation end to end on a tiny model and the fixtures (the
embedded model is exercised by the slow cells), and issue 21's inputs: one-line refusals with exit status 2 that write
nothing, one flag rule for every command, --help that imports no model library, and grid commands that work when pasted."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from conftest import ROOT

BIN = Path(sys.executable).parent  # the console scripts sit beside the interpreter

def test_evaluate_cli(tmp_path):
    from caopd.models import tiny_model
    tiny_model(seed=0, save_to=tmp_path/'tiny')
    out = tmp_path/'run'
    out.mkdir(); (out/'notes.txt').write_text('a file of the user, left there before the evaluation')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    script = Path(sys.executable).parent/'caopd-evaluate'  # the console script (exits with main()'s value)
    res = subprocess.run([str(script), '--model', str(tmp_path/'tiny'),
                          '--data-dir', str(ROOT/'data'/'fixtures'), '--split', 'test', '--limit', '2',
                          '--n_samples', '2', '--max-new-tokens', '8', '--batch_size', '4', '--out', str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert '| Samples | 4 |' in res.stdout, res.stdout
    records = [json.loads(l) for l in (out/'records.jsonl').read_text().splitlines()]
    assert len(records) == 4 and {r['sample'] for r in records} == {0, 1}
    report = json.loads((out/'report.json').read_text())
    assert report['report']['n'] == 4 and report['settings']['n_samples'] == 2
    for f in ('report.md', 'reliability.html', 'confidence.html'): assert (out/f).exists(), f
    wrote = res.stdout.strip().splitlines()[-1]  # the last line names the files the evaluation wrote (PNGs when made)
    made = {p.name for p in out.iterdir() if p.is_file() and before.get(p.name) != p.read_bytes()}  # new or changed
    assert wrote.startswith(f'wrote {out}/: ') and set(wrote.split(': ', 1)[1].split(', ')) == made, (wrote, made)
    assert 'risk_coverage.html' in made and 'notes.txt' not in made, made  # the user's file is left as it was

def test_evaluate_names_what_it_wrote_whatever_the_clock(tmp_path, monkeypatch, capsys):
    "A file of the user dated ahead of this machine's clock (copied from another machine, unpacked from an archive) is not named."
    import caopd.evaluation as E
    from caopd.io import write_jsonl
    out = tmp_path/'run'
    out.mkdir(); (out/'notes.txt').write_text('a file of the user, dated by another clock')
    ahead = 4102444800  # 2100-01-01 00:00 UTC
    os.utime(out/'notes.txt', (ahead, ahead))
    def evaluate(*args, **kwargs):  # stands in for the generation: writes one record into `out`
        records = [dict(id='q1', sample=0, correct=True, confidence=0.9)]
        write_jsonl(out/'records.jsonl', records)
        return records, E.records_report(records)
    monkeypatch.setattr(E, 'evaluate', evaluate)
    E.main(['--model', 'm', '--out', str(out)])  # the command line's path
    assert capsys.readouterr().out.strip().splitlines()[-1] == f'wrote {out}/: records.jsonl'

def test_evaluate_cli_bad_domain(tmp_path):
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluation', '--domain', 'biology', '--limit', '1'],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 2 and res.stderr.startswith("caopd-evaluate: error: domain='biology': unknown domain"), res.stderr

def _scripted_cli(args, url, tmp_path):
    import os
    env = dict(os.environ, OPENAI_API_KEY='test-key', CAOPD_PNG='0')
    return subprocess.run([sys.executable, '-m', 'caopd.evaluation', '--model', 'openai:scripted', '--base_url', url,
                           '--data_dir', str(ROOT/'data'/'fixtures'), '--split', 'test', '--n_samples', '2', *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)

def test_evaluate_cli_api_flags_and_resume_guard(tmp_path):
    "--workers, --timeout, --max_retries, --api_kwargs reach the API and report.json; a rerun with other settings is refused."
    from caopd.data import load_domain
    from caopd.testing import ScriptedAPI
    rows = load_domain('chemistry', 'test', data_dir=ROOT/'data'/'fixtures')
    script = {r['prompt'][-1]['content']: [f"<answer>{r['answer']}</answer>\nConfidence: 0.8", 'no idea'] for r in rows}
    out = tmp_path/'api'
    flags = ['--workers', '2', '--timeout', '30', '--max_retries', '1', '--seed', '3', '--out', str(out),
             '--api_kwargs', '{"reasoning_effort": "low", "max_completion_tokens": 64}']
    with ScriptedAPI(script) as api:
        res = _scripted_cli(flags, api.url, tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        assert '| Samples | 4 |' in res.stdout, res.stdout
        assert len(api.requests) == 2
        assert all((r['reasoning_effort'], r['max_completion_tokens'], r['seed'], r['n']) == ('low', 64, 3, 2)
                   and 'max_tokens' not in r for r in api.requests), api.requests
    settings = json.loads((out/'report.json').read_text())['settings']
    assert (settings['workers'], settings['timeout'], settings['max_retries'], settings['seed']) == (2, 30, 1, 3)
    assert settings['api_kwargs'] == {'reasoning_effort': 'low', 'max_completion_tokens': 64}
    assert settings['environment']['caopd'] and 'git_commit' in settings['environment']
    with ScriptedAPI(script) as api:
        res = _scripted_cli([*flags[:-2], '--api_kwargs', '{"reasoning_effort": "high", "max_completion_tokens": 64}'], api.url, tmp_path)
        assert res.returncode == 2 and 'api_kwargs:' in res.stderr and 'Use a new `out`' in res.stderr, res.stderr[-3000:]
        assert len(res.stderr.splitlines()) == 1, res.stderr  # the refusal of a mixed folder: one line
        assert api.requests == []
        res = _scripted_cli([*flags, '--workers', '1'], api.url, tmp_path)  # same settings, finished folder: nothing to ask
        assert res.returncode == 0 and api.requests == [], res.stderr[-3000:]
        res = _scripted_cli(['--out', str(tmp_path/'bad'), '--api_kwargs', '[1, 2]'], api.url, tmp_path)
        assert res.returncode == 2 and "api_kwargs is not an object: it must be a JSON object" in res.stderr, res.stderr[-3000:]
        assert not (tmp_path/'bad').exists()

def test_evaluate_cli_help_lists_new_flags():
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluation', '--help'], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    for flag in ('--timeout', '--max_retries', '--workers', '--api_kwargs', '--tensor_parallel_size', '--max_model_len', '--overwrite'):
        assert flag in res.stdout, (flag, res.stdout)


def _run(script, *args, timeout=300, **kw):
    return subprocess.run([str(BIN/script), *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw)

def _refused(res, *says, alone=True):
    "Exit status 2, one line on stderr that names what was refused (`alone`: nothing else), no traceback."
    assert res.returncode == 2, (res.returncode, res.stderr[-3000:])
    lines = res.stderr.splitlines()
    assert lines and lines[-1].startswith(Path(res.args[0]).name + ': error: ') and 'Traceback' not in res.stderr, res.stderr[-3000:]
    assert len(lines) == 1 or not alone, res.stderr[-3000:]
    for s in says: assert s in lines[-1], (s, res.stderr)

# issue 21, as typed: each refused before any model or data loads, naming the parameter, the value and the bound
TRAIN_REFUSALS = [
    (['--K', '0'], 'K=0: K must be an integer >= 1'), (['--K', '-2'], 'K=-2: K must be an integer >= 1'),
    (['--prompts_per_step', '0'], 'prompts_per_step=0: prompts_per_step must be an integer >= 1'),
    (['--learning_rate', '0'], 'learning_rate=0.0: learning_rate must be a number in (0, 1)'),
    (['--learning_rate', '5'], 'learning_rate=5.0: learning_rate must be a number in (0, 1)'),
    (['--learning_rate=-1e-4'], 'learning_rate=-0.0001: learning_rate must be a number in (0, 1)'),
    (['--max_steps', '0'], 'max_steps=0: max_steps must be an integer >= 1 or -1'),
    (['--n_train', '-3'], 'n_train=-3: n_train must be an integer >= 0'),
    (['--method', 'cpo'], "method='cpo': unknown method 'cpo'"), (['--domain', 'biology'], "domain='biology': unknown domain"),
    (['--learning_rate', 'fast'], "--learning_rate/--learning-rate: invalid float value: 'fast'"),
    (['--dry_run', 'maybe'], "argument --dry_run/--dry-run: Truthy value expected: got maybe"),
    (['stray'], "unexpected argument 'stray'"),
]

@pytest.mark.parametrize('args,says', TRAIN_REFUSALS, ids=[' '.join(a) for a, _ in TRAIN_REFUSALS])
def test_train_refuses_in_one_line_and_writes_nothing(args, says, tmp_path):
    out = tmp_path/'run'
    _refused(_run('caopd-train', *args, '--out', out), 'caopd-train: error: ', says)
    assert not out.exists()

def _imported_after(code:str, names) -> dict:
    "Run `code` in a fresh interpreter; which of the modules `names` it imported, and its exit status."
    check = f"\nimport json, sys\nprint(json.dumps([m for m in {list(names)!r} if m in sys.modules]))"
    res = subprocess.run([sys.executable, '-c', code + check], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])

HEAVY = ('torch', 'transformers', 'trl', 'datasets', 'vllm')  # what loading a model or data needs
# caopd-train parses with TRL's parser (TrlParser, on transformers' HfArgumentParser), as TRL's scripts do: it loads the
# two packages' lazy top modules and their parsers, none of what loads a model, a trainer or data
LOADING = ('torch', 'datasets', 'vllm', 'transformers.modeling_utils', 'trl.trainer', 'caopd.trainer')

def test_train_refusals_load_no_model_or_data():
    "Every refusal of TRAIN_REFUSALS comes before torch, datasets or a model or trainer module is imported: no model or data can have loaded."
    code = ("from caopd.train import main\nfor args in " + repr([a for a, _ in TRAIN_REFUSALS]) + ":\n"
            "    try: main(args + ['--out', '/nonexistent/caopd-refused'])\n"
            "    except SystemExit as e: assert e.code == 2, (args, e.code)\n"
            "    else: raise AssertionError(f'{args} was not refused')")
    assert _imported_after(code, LOADING) == []

@pytest.mark.slow
def test_train_unknown_flag_and_recipe_key_are_refused_alike(tmp_path):
    "No abbreviations: --learning_rat is not --learning_rate; a recipe's learning_rat: gets the same message."
    said = ("unknown argument --learning_rat{}: not a parameter of caopd-train nor a field of CaOPDSDFTConfig (method "
            "'caopd-sdft'); did you mean --learning_rate?")
    _refused(_run('caopd-train', '--learning_rat', '5', '--out', tmp_path/'a'), said.format(''))
    recipe = tmp_path/'r.yaml'
    recipe.write_text('method: caopd-sdft\nlearning_rat: 5\n')
    _refused(_run('caopd-train', '--config', recipe, '--out', tmp_path/'b'), said.format(f' (in {recipe})'))
    assert not (tmp_path/'a').exists() and not (tmp_path/'b').exists()

def test_train_recipe_env_sets_only_the_variables_caopd_knows(tmp_path, monkeypatch):
    "A recipe's env: sets only caopd.arguments.RECIPE_ENV; any other variable is refused by name (exit 2, one line) and none is set."
    from caopd.arguments import parse_args
    recipe = tmp_path/'r.yaml'
    recipe.write_text('method: caopd-sdft\nenv:\n  CAOPD_CACHE: /tmp/set-by-the-recipe\n  NCCL_BUFFSIZE: 1\n')
    res = _run('caopd-train', '--config', recipe, '--preset', 'cpu', '--dry_run', '--out', tmp_path/'run')
    _refused(res, f'--config {recipe}: env sets NCCL_BUFFSIZE, which a recipe may not set', 'nothing was set')
    assert not (tmp_path/'run').exists()
    monkeypatch.setenv('CAOPD_CACHE', 'before'); monkeypatch.setenv('NCCL_BUFFSIZE', 'before')
    with pytest.raises(ValueError, match='env sets NCCL_BUFFSIZE'): parse_args(['--config', str(recipe), '--out', str(tmp_path/'run')])
    assert os.environ['CAOPD_CACHE'] == os.environ['NCCL_BUFFSIZE'] == 'before'  # neither set, not even the known one
    recipe.write_text('method: caopd-sdft\nenv:\n  CAOPD_CACHE: /tmp/set-by-the-recipe\n')
    parse_args(['--config', str(recipe), '--out', str(tmp_path/'run')])
    from caopd.arguments import RECIPE_ENV
    assert os.environ['CAOPD_CACHE'] == '/tmp/set-by-the-recipe' and 'CAOPD_CACHE' in RECIPE_ENV

def test_train_refusal_of_the_method_config_comes_before_any_data(tmp_path):
    "CaOPD with K = 1 is refused by caopd.config's own check, before prompts load or the warm-up trains; nothing written."
    out = tmp_path/'run'
    res = _run('caopd-train', '--preset', 'cpu', '--K', '1', '--prompts_per_step', '1', '--out', out,
               '--data_dir', tmp_path/'no-data')  # no data there: a refusal after loading would say so instead
    # after TRL's import, whose warnings may come first (transformers' FutureWarning about gradient_checkpointing)
    _refused(res, 'calibrate=True needs at least 2 scored rollouts', 'Set num_generations >= 2', alone=False)
    assert not out.exists()

def _console_scripts() -> dict:
    "settings.ini's console scripts, name -> (module, function): what each command runs (tests/test_packaging.py checks the installed ones match)."
    import configparser
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini')
    return {name: tuple(target.split(':')) for name, target in (s.split('=', 1) for s in cfg['DEFAULT']['console_scripts'].split())}

def _help_imports(script:str, names) -> list:
    "The modules of `names` that `script --help` imports, run as its console script runs it (its entry point's function)."
    module, func = _console_scripts()[script]
    code = (f"import sys\nsys.argv = [{script!r}, '--help']\nfrom {module} import {func}\n"
            f"try: {func}()\nexcept SystemExit as e: assert e.code in (0, None), e.code")
    return _imported_after(code, names)

@pytest.mark.parametrize('script', ['caopd-train', 'caopd-evaluate', 'caopd-runs', 'caopd-smoke'])
def test_help_imports_nothing_heavy(script):
    "Each command answers --help with its usage, without importing torch, transformers, TRL, datasets or vLLM (caopd-train: TRL's parser, no model library; pytest --durations reports how long it took)."
    res = _run(script, '--help')
    assert res.returncode == 0 and res.stdout.startswith('usage: '), res.stderr[-2000:]
    assert _help_imports(script, LOADING if script == 'caopd-train' else HEAVY) == [], script

@pytest.mark.parametrize('script', ['caopd-train', 'caopd-evaluate'])
def test_train_and_evaluate_help_import_no_plotly_or_pandas(script):
    "caopd-train --help and caopd-evaluate --help import neither plotly nor pandas: the figures and tables are not theirs to load for a usage line."
    assert _help_imports(script, ('plotly', 'pandas')) == [], script

def test_every_command_takes_both_spellings_and_booleans_alike(tmp_path):
    "--dry-run and --dry_run, --dry_run true and --no_dry_run, --max-new-tokens: one rule for caopd-train, -evaluate, -runs."
    for script in ('caopd-train', 'caopd-evaluate', 'caopd-runs', 'caopd-smoke'):
        help = _run(script, '--help').stdout
        for flag in {'caopd-train': ('--dry-run', '--no_dry_run', '--max-completion-length'),
                     'caopd-evaluate': ('--max-new-tokens', '--max_new_tokens', '--overwrite [BOOL]', '--no-overwrite'),
                     'caopd-runs': ('--dry-run', '--dry_run [BOOL]', '--no_force', '--log-output'),
                     'caopd-smoke': ('--echo [BOOL]', '--max-completion-length')}[script]:
            assert flag in help, (script, flag)
    _refused(_run('caopd-evaluate', '--max-new-tokens', '0'), 'caopd-evaluate: error: max_new_tokens=0')
    _refused(_run('caopd-evaluate', '--n-samples', '0', '--top_p', '0.9'), 'n_samples=0')
    _refused(_run('caopd-evaluate', '--max_new_token', '8'), 'did you mean --max_new_tokens?')  # no abbreviations
    _refused(_run('caopd-runs', tmp_path/'none.yaml', '--dry-run'), 'caopd-runs: error: grid=', 'does not exist')
    _refused(_run('caopd-smoke', '--timeout', '0', '--out', tmp_path/'s'), 'caopd-smoke: error: timeout=0.0')
    assert not (tmp_path/'s').exists()

@pytest.mark.slow
def test_runs_dry_run_prints_commands_that_work_when_pasted(tmp_path):
    "Every spelling of the dry run prints, per run, a command that makes its folder before papermill writes into it."
    grid = tmp_path/'grid.yaml'
    grid.write_text(f"root: {tmp_path/'runs'}\nruns:\n  - name: a b\n    method: sdft\n  - name: c\n    method: caopd-sdft\n")
    outs = [_run('caopd-runs', *args) for args in ([grid, '--dry_run'], [grid, '--dry-run'], ['--dry_run', grid],
                                                   [grid, '--dry_run', 'true'], [grid, '--dry-run=yes'])]
    assert all(r.returncode == 0 for r in outs), [r.stderr[-2000:] for r in outs]
    assert len({r.stdout for r in outs}) == 1
    cmds = [l[len('[run] '):] for l in outs[0].stdout.splitlines() if l.startswith('[run] ')]
    assert len(cmds) == 2 and not (tmp_path/'runs').exists()  # a dry run makes nothing
    fake = tmp_path/'bin'; fake.mkdir()  # papermill stands in: it fails unless its output notebook's folder exists
    (fake/'papermill').write_text('#!/bin/sh\n[ -d "$(dirname "$2")" ] && echo "wrote $2"\n')
    (fake/'papermill').chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    for cmd in cmds:
        res = subprocess.run(['bash', '-c', cmd], capture_output=True, text=True, env=env, timeout=60)
        assert res.returncode == 0 and res.stdout.startswith('wrote '), (cmd, res.stderr)
    assert (tmp_path/'runs'/'a b').is_dir() and (tmp_path/'runs'/'c').is_dir()
    _refused(_run('caopd-runs', grid, '--dry_run', 'maybe'), "unexpected argument 'maybe'")

@pytest.mark.slow
def test_grids_splits_and_trackers_are_refused_before_any_work(tmp_path):
    "A grid's runs are checked before the first notebook starts; a split or a tracker that is not there, before any model."
    grid = lambda defaults: (tmp_path/'g.yaml').write_text(f"notebook: nbs/train.ipynb\nroot: {tmp_path/'runs'}\n"
                                                            f"defaults: {defaults}\nruns:\n  - name: a\n    method: sdft\n") and tmp_path/'g.yaml'
    _refused(_run('caopd-runs', grid('{preset: cpu, K: 0}')), "g.yaml: run 'a': K=0: K must be an integer >= 1")
    _refused(_run('caopd-runs', grid('{preset: cpu, learning_rat: 5}')), "sets ['learning_rat']", 'did you mean learning_rate?')
    _refused(_run('caopd-runs', grid('{preset: cpu}'), '--only', 'zzz'), "no run name matches only='zzz'")
    assert not (tmp_path/'runs').exists()
    _refused(_run('caopd-evaluate', '--domain', 'arithmetic', '--split', 'foo'), "unknown arithmetic split 'foo'")
    _refused(_run('caopd-train', '--report_to', 'foo', '--out', tmp_path/'foo'), "foo is not a tracker transformers reports to")
    assert not (tmp_path/'foo').exists()
    import importlib.util
    if importlib.util.find_spec('wandb') is None:
        _refused(_run('caopd-train', '--report_to', 'wandb', '--out', tmp_path/'wb'), "wandb is not installed: pip install wandb")
        assert not (tmp_path/'wb').exists()
