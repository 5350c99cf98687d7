"""docs/your-task.md ("CaOPD in your TRL script") as a reader runs it, on a tiny model: its code block, run whole in a
fresh folder with only the model line changed, trains SDFT and CaOPD on a task of its own and prints both readouts'
reports, with the sections of the output the page shows (`tests/benchmarks/your_task.txt`, the embedded model's). The
page cannot go stale without this failing."""
import re, subprocess, sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT/'tests'/'benchmarks'))
from your_task import PAGE, page_code  # the page's script, read as its benchmark reads it

pytestmark = pytest.mark.slow  # trains in a process of its own: not in the quick loop (README, "Working on caopd")

MODEL_LINE = 'model = model_path("smollm2-135m-instruct")'


def test_the_page_runs_on_a_tiny_model(tmp_path):
    from caopd.models import tiny_model
    code = page_code()
    lines = [l for l in code.splitlines() if l.startswith(MODEL_LINE)]
    assert len(lines) == 1, f'{PAGE.name}: no line starting {MODEL_LINE!r} to point at the tiny model'
    tiny_model(seed=0, save_to=tmp_path/'tiny')
    script = tmp_path/'your_task.py'
    script.write_text(code.replace(lines[0], f'model = {str(tmp_path/"tiny")!r}'))
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                         env={'CAOPD_PNG': '0', **__import__('os').environ})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    for name in ('sdft', 'caopd'):
        folder = tmp_path/'runs'/'your-task'/name
        assert (folder/'model'/'config.json').is_file() and (folder/'eval'/'records.jsonl').is_file()
        report = (folder/'eval'/'report.md').read_text()
        assert report in res.stdout and 'on rows of your own (n=16): stated confidence' in report
        assert '### Expected stated confidence (ours' in report, report
    # the page shows what the script printed with the embedded model (tests/benchmarks/your_task.txt): the same reports
    committed = (ROOT/'tests'/'benchmarks'/'your_task.txt').read_text()
    assert _skeleton(committed) == _skeleton(res.stdout), (_skeleton(committed), _skeleton(res.stdout))


def _skeleton(printed:str) -> list[str]:
    "The reports' headings, their numbers masked: what a run prints whatever its model (a tiny one reads no values)."
    return [re.sub(r'\d+(\.\d+)?', '#', l.strip()) for l in printed.splitlines() if l.startswith('#')]
