"The README's main command, end to end on a tiny model and the fixtures (the embedded model is exercised by the slow cells)."
import json, subprocess, sys
from pathlib import Path
from conftest import ROOT

def test_evaluate_cli(tmp_path):
    from caopd.models import tiny_model
    tiny_model(seed=0, save_to=tmp_path/'tiny')
    out = tmp_path/'run'
    script = Path(sys.executable).parent/'caopd-evaluate'  # the console script (exits with main()'s value)
    res = subprocess.run([str(script), '--model', str(tmp_path/'tiny'),
                          '--data_dir', str(ROOT/'data'/'fixtures'), '--split', 'test', '--limit', '2',
                          '--n_samples', '2', '--max_new_tokens', '8', '--batch_size', '4', '--out', str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert '| Samples | 4 |' in res.stdout, res.stdout
    records = [json.loads(l) for l in (out/'records.jsonl').read_text().splitlines()]
    assert len(records) == 4 and {r['sample'] for r in records} == {0, 1}
    report = json.loads((out/'report.json').read_text())
    assert report['report']['n'] == 4 and report['settings']['n_samples'] == 2
    for f in ('report.md', 'reliability.html', 'confidence.html'): assert (out/f).exists(), f

def test_evaluate_cli_bad_domain(tmp_path):
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluate', '--domain', 'biology', '--limit', '1'],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode != 0 and 'biology' in res.stderr, res.stderr[-2000:]

def _scripted_cli(args, url, tmp_path):
    import os
    env = dict(os.environ, OPENAI_API_KEY='test-key', CAOPD_PNG='0')
    return subprocess.run([sys.executable, '-m', 'caopd.evaluate', '--model', 'openai:scripted', '--base_url', url,
                           '--data_dir', str(ROOT/'data'/'fixtures'), '--split', 'test', '--n_samples', '2', *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)

def test_evaluate_cli_api_flags_and_resume_guard(tmp_path):
    "--workers, --timeout, --max_retries, --api_kwargs reach the API and report.json; a rerun with other settings is refused."
    from caopd.data import load_domain
    from caopd.evaluate import ScriptedAPI
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
        assert res.returncode != 0 and 'api_kwargs:' in res.stderr and 'Use a new `out`' in res.stderr, res.stderr[-3000:]
        assert api.requests == []
        res = _scripted_cli([*flags, '--workers', '1'], api.url, tmp_path)  # same settings, finished folder: nothing to ask
        assert res.returncode == 0 and api.requests == [], res.stderr[-3000:]
        res = _scripted_cli(['--out', str(tmp_path/'bad'), '--api_kwargs', '[1, 2]'], api.url, tmp_path)
        assert res.returncode != 0 and '--api_kwargs must be a JSON object' in res.stderr, res.stderr[-3000:]

def test_evaluate_cli_help_lists_new_flags():
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluate', '--help'], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    for flag in ('--timeout', '--max_retries', '--workers', '--api_kwargs', '--tensor_parallel_size', '--max_model_len', '--overwrite'):
        assert flag in res.stdout, (flag, res.stdout)
