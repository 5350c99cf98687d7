"""No credentials on disk or screen. Given as arguments (a flag, trainer_overrides, a recipe, a grid, a URL with user
info) they are refused before any work, naming the environment variable to use and never the value; passed through
the environment they reach the processes that need them and no file a run writes."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from conftest import ROOT
from trainer_helpers import tiny_model_dir

S = 'hf_NotARealSecret0123456789'  # must never be written or printed
TINY = ['--preset', 'cpu', '--K', '2', '--prompts_per_step', '1', '--n_train', '2', '--max_completion_length', '8',
        '--format_warmup', 'off', '--save_steps', '1', '--max_steps', '1']
CREDENTIAL_ENV = {'HF_TOKEN': S, 'OPENAI_API_KEY': S, 'WANDB_API_KEY': S}


def _leaks(folder, *texts) -> list[str]:
    "Every file under `folder` (binary ones too: TRL pickles its config into training_args.bin) and text that holds S."
    files = [p for p in Path(folder).rglob('*') if p.is_file()] if Path(folder).exists() else []
    return [str(p) for p in files if S.encode() in p.read_bytes()] + [f'text {i}: ...{t[max(0, t.find(S) - 200):t.find(S) + 50]}'
                                                                    for i, t in enumerate(texts) if S in t]


def _recipe(tmp_path) -> list[str]:
    (tmp_path/'recipe.yaml').write_text(f'method: sdft\nhub_token: {S}\n')
    return ['--config', str(tmp_path/'recipe.yaml')]

TRAIN_ARGS = {  # each way a credential can reach caopd-train, and what the refusal must name
    'flag': (lambda tmp: ['--hub_token', S], 'HF_TOKEN'),
    'trainer_overrides': (lambda tmp: ['--trainer_overrides', json.dumps({'hub_token': S})], 'HF_TOKEN'),
    'malformed JSON': (lambda tmp: ['--trainer_overrides', '{"hub_token": "' + S], 'not JSON'),
    'wandb key': (lambda tmp: ['--trainer_overrides', json.dumps({'report_to': 'wandb', 'wandb_api_key': S})], 'WANDB_API_KEY'),
    'URL with user info': (lambda tmp: ['--data_dir', f'https://me:{S}@example.org/data'], 'user info'),
    'recipe': (_recipe, 'the recipe '),  # named as the recipe's, not the command line's
}

@pytest.mark.parametrize('kind', TRAIN_ARGS)
def test_train_refuses_credentials_given_as_arguments(kind, tmp_path, capsys):
    "caopd-train refuses each, before anything is written, naming the environment variable; the value is never shown."
    from caopd.train import main
    argv, fix = TRAIN_ARGS[kind]
    out = tmp_path/'run'
    with pytest.raises((ValueError, SystemExit)) as e: main([*argv(tmp_path), '--preset', 'cpu', '--out', str(out)])
    printed = capsys.readouterr()
    said = f'{e.value}\n{printed.out}\n{printed.err}'
    assert fix in said, said
    if kind == 'recipe': assert 'recipe.yaml: hub_token holds a credential: set the environment variable HF_TOKEN' in said
    assert not _leaks(tmp_path/'run', said) and not out.exists()


def test_grid_refuses_credentials_before_papermill_writes_them(tmp_path, capsys):
    "A grid run's parameters become the executed notebook's parameters cell: caopd-runs refuses them first."
    from caopd.runs import run_grid
    grid = tmp_path/'grid.yaml'
    grid.write_text(f'root: {tmp_path/"runs"}\nruns:\n  - {{name: a, trainer_overrides: {{hub_token: {S}}}}}\n')
    with pytest.raises(ValueError) as e: run_grid(grid, dry_run=True)
    printed = capsys.readouterr()
    assert 'trainer_overrides.hub_token holds a credential: set the environment variable HF_TOKEN' in str(e.value)
    assert not _leaks(tmp_path/'runs', str(e.value), printed.out, printed.err)


def test_evaluate_refuses_credentials_in_the_endpoint(tmp_path, monkeypatch):
    "A password in --base_url (or $OPENAI_BASE_URL) or an Authorization header in --api_kwargs is refused, never echoed."
    from caopd.sources import fixtures_dir
    out = tmp_path/'eval'
    cmd = [sys.executable, '-m', 'caopd.evaluation', '--model', 'openai:m', '--data_dir', str(fixtures_dir()), '--out', str(out)]
    res = subprocess.run([*cmd, '--base_url', f'http://me:{S}@127.0.0.1:9/v1'], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env=dict(os.environ, OPENAI_API_KEY='k'))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1  # a refusal: one line, no traceback
    assert 'base_url is a URL with user info' in res.stderr and 'OPENAI_API_KEY' in res.stderr, res.stderr[-2000:]
    assert res.stderr.startswith('caopd-evaluate: error: base_url is'), res.stderr  # the command's name once
    assert not _leaks(out, res.stdout, res.stderr) and not out.exists()
    from caopd.evaluation import evaluate
    monkeypatch.setenv('OPENAI_BASE_URL', f'http://me:{S}@127.0.0.1:9/v1')
    for kw in (dict(), dict(base_url=None, api_kwargs={'extra_headers': {'Authorization': f'Bearer {S}'}})):
        with pytest.raises(ValueError) as e: evaluate('openai:m', data_dir=fixtures_dir(), out=str(out), api_key='k', **kw)
        assert not _leaks(out, str(e.value)) and not out.exists()
    assert 'api_kwargs.extra_headers.Authorization holds a credential' in str(e.value)


def test_credentials_in_the_environment_reach_no_file(tmp_path, monkeypatch):
    "HF_TOKEN, OPENAI_API_KEY and WANDB_API_KEY set: a dry run, a one-step training run and an API evaluation write them nowhere."
    from caopd.sources import fixtures_dir
    from caopd.evaluation import evaluate, load_domain
    from caopd.testing import ScriptedAPI
    from caopd.launch import run_logged
    from caopd.train import dry_run
    from caopd.arguments import cli_args, parse_args
    for k, v in CREDENTIAL_ENV.items(): monkeypatch.setenv(k, v)
    out = tmp_path/'run'
    run = parse_args(['--model', tiny_model_dir(tmp_path/'tiny'), '--out', str(out), *TINY])
    plan = dry_run(run, verbose=False)
    cmd = [sys.executable, '-m', 'caopd.train', *cli_args(run)]  # the training stage alone, as a user starts it
    out.mkdir()
    rc = run_logged(cmd, out/'train_output.log', echo=False)  # the child inherits the env
    assert rc == 0, (out/'train_output.log').read_text()[-3000:]
    assert (out/'trainer'/'checkpoint-1'/'training_args.bin').is_file() and (out/'settings.json').is_file()
    rows = load_domain('chemistry', 'test', data_dir=fixtures_dir())
    script = {r['prompt'][-1]['content']: [f"<answer>{r['answer']}</answer> Confidence: 0.8"] for r in rows}
    with ScriptedAPI(script) as api:
        evaluate('openai:m', data_dir=fixtures_dir(), base_url=api.url, out=str(out/'eval'), progress=False)
    assert {r['authorization'] for r in api.requests} == {f'Bearer {S}'}  # the key went where it is needed
    assert not _leaks(out, json.dumps(plan['settings'].record()), ' '.join(cmd), str(plan['config']))


@pytest.mark.parametrize('name', ['api_key', 'key', 'token', 'access_token', 'api-key'])
def test_a_credential_in_the_query_string_is_refused_like_one_in_the_user_part(name, monkeypatch):
    "`http://host/v1?api_key=...` as --base_url or $OPENAI_BASE_URL: refused, naming the parameter and OPENAI_API_KEY, never the value."
    from caopd.provenance import CredentialError
    from caopd.generation import api_base_url
    url = f'http://127.0.0.1:9/v1?model=m&{name}={S}'
    monkeypatch.delenv('OPENAI_BASE_URL', raising=False)
    for given, where in ((url, 'base_url'), (None, 'OPENAI_BASE_URL')):
        if given is None: monkeypatch.setenv('OPENAI_BASE_URL', url)
        with pytest.raises(CredentialError) as e: api_base_url(given)
        said = str(e.value)
        assert said.startswith(f'{where}?{name} is a credential carried in a URL') and 'OPENAI_API_KEY' in said, said
        assert S not in said
    monkeypatch.delenv('OPENAI_BASE_URL')
    azure = 'https://r.openai.azure.com/openai/deployments/d?api-version=2024-02-01'  # a query without a credential
    assert api_base_url(azure) == azure


def test_commands_refuse_a_credential_in_a_query_string(tmp_path, capsys):
    "caopd-evaluate --base_url and caopd-train --data_dir with `?token=...`: exit 2, one line, nothing written, the value not shown."
    from caopd.sources import fixtures_dir
    from caopd.train import main
    out = tmp_path/'eval'
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluation', '--model', 'openai:m', '--data_dir', str(fixtures_dir()),
                          '--out', str(out), '--base_url', f'http://127.0.0.1:9/v1?api_key={S}'], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env=dict(os.environ, OPENAI_API_KEY='k'))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr[-2000:]
    assert res.stderr.startswith('caopd-evaluate: error: base_url?api_key is a credential') and 'OPENAI_API_KEY' in res.stderr
    assert not _leaks(out, res.stdout, res.stderr) and not out.exists()
    with pytest.raises(SystemExit) as e:
        main(['--data_dir', f'https://example.org/data?token={S}', '--preset', 'cpu', '--out', str(tmp_path/'run')])
    said = capsys.readouterr().err
    assert e.value.code == 2 and 'data_dir?token is a credential carried in a URL' in said, said
    assert not _leaks(tmp_path/'run', said) and not (tmp_path/'run').exists()


def test_a_recipe_cannot_set_a_credential_in_the_environment(tmp_path, monkeypatch, capsys):
    "A recipe's `env: {HF_TOKEN: ...}` is refused by name (one line, exit 2); the variable keeps its value, never shown."
    from caopd.train import main
    monkeypatch.setenv('HF_TOKEN', 'the one the user set')
    (tmp_path/'recipe.yaml').write_text(f'method: sdft\nenv:\n  HF_TOKEN: {S}\n')
    with pytest.raises(SystemExit) as e:
        main(['--config', str(tmp_path/'recipe.yaml'), '--preset', 'cpu', '--dry_run', '--out', str(tmp_path/'run')])
    said = capsys.readouterr().err
    assert e.value.code == 2 and len(said.strip().splitlines()) == 1 and 'env sets HF_TOKEN, which a recipe may not set' in said, said
    assert os.environ['HF_TOKEN'] == 'the one the user set' and not _leaks(tmp_path/'run', said)
