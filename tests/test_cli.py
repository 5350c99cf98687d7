"The README's main command, end to end on a tiny model and the fixtures (the embedded model is exercised by the slow cells)."
import json, subprocess, sys
from conftest import ROOT

def test_evaluate_cli(tmp_path):
    from caopd.models import tiny_model
    tiny_model(seed=0, save_to=tmp_path/'tiny')
    out = tmp_path/'run'
    res = subprocess.run([sys.executable, '-m', 'caopd.evaluate', '--model', str(tmp_path/'tiny'),
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
