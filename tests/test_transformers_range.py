"""The transformers range of settings.ini, both ends: the environments the README builds can train. The plain install
resolves to the newest transformers (the rest of the suite runs on it); the vllm extra to the oldest, because vLLM 0.31
(the newest TRL 1.16 supports) needs transformers<5.18. This file runs the trainer configs and a paper plan under that
oldest version, put in front of the project's environment (downloaded from PyPI, with the huggingface_hub it needs)."""
import configparser, os, subprocess, sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from conftest import ROOT
from trainer_helpers import tiny_model_dir


pytestmark = pytest.mark.slow  # resolves pip environments: not in the quick loop (README, "Working on caopd")

def transformers_range() -> Requirement:
    "settings.ini's transformers requirement, the one statement of the range."
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini', encoding='utf-8')
    return next(r for r in map(Requirement, cfg['DEFAULT']['requirements'].split()) if r.name == 'transformers')


def oldest() -> str:
    "The range's lower end, as `X.Y`: its newest patch release is what pip gives the vllm extra."
    return next(s.version for s in transformers_range().specifier if s.operator == '>=')


def _pip(*args, cwd=None):
    return subprocess.run([sys.executable, '-m', 'pip', *args, '--quiet', '--disable-pip-version-check'], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope='module')
def vllm_extra_transformers(tmp_path_factory) -> str:
    "The transformers version pip resolves for the vllm extra (TRL's, at the installed TRL and torch), without installing it."
    import importlib.metadata as md, json
    report = tmp_path_factory.mktemp('resolve')/'report.json'
    got = _pip('install', '--dry-run', '--ignore-installed', '--report', str(report), f"trl[vllm]=={md.version('trl')}",
               f"torch=={md.version('torch').split('+')[0]}")  # about 2.5 min: vLLM's whole tree is resolved
    if got.returncode: pytest.skip(f'PyPI is not reachable here: {got.stderr.strip().splitlines()[-1:]}')
    return next(i['metadata']['version'] for i in json.loads(report.read_text())['install']
                if i['metadata']['name'] == 'transformers')


def test_the_range_starts_where_the_vllm_extra_resolves(vllm_extra_transformers):
    "The vllm extra's transformers is in the range, and in the release series of its lower end (so that end is tested)."
    assert transformers_range().specifier.contains(vllm_extra_transformers)
    assert vllm_extra_transformers.split('.')[:2] == oldest().split('.')[:2], \
        f'the vllm extra resolves to transformers {vllm_extra_transformers}: make it the lower end in settings.ini'


@pytest.fixture(scope='module')
def old_transformers(tmp_path_factory, vllm_extra_transformers) -> Path:
    "A folder holding the vllm extra's transformers and the newest huggingface_hub it admits (nothing else)."
    target = tmp_path_factory.mktemp('transformers-oldest')
    got = _pip('install', '--no-deps', '--target', str(target), f'transformers=={vllm_extra_transformers}')
    assert got.returncode == 0, got.stderr[-2000:]
    meta = next(target.glob('transformers-*.dist-info'))/'METADATA'
    hub = next(Requirement(line.split(':', 1)[1].split(';')[0].strip()) for line in meta.read_text().splitlines()
               if line.startswith('Requires-Dist: huggingface-hub'))
    assert _pip('install', '--no-deps', '--target', str(target), str(hub)).returncode == 0
    return target


def _under(target, *args):
    "caopd.train with `target` in front of the environment."
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT), os.environ.get('PYTHONPATH', '')]))
    return subprocess.run([sys.executable, '-c', 'import sys, transformers; print("transformers", transformers.__version__, '
                           'flush=True); from caopd.train import main; main(sys.argv[1:])', *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)


def test_the_oldest_transformers_builds_a_caopd_run(old_transformers, tmp_path):
    """A CaOPD-SDFT run on CPU builds its config under the oldest transformers (5.17 has no `activation_checkpointing`: the
    switch goes to its old name, and is shown because it differs from TRL's default)."""
    res = _under(old_transformers, '--model', tiny_model_dir(tmp_path/'tiny'), '--preset', 'cpu', '--K', '2',
                 '--prompts_per_step', '1', '--max_completion_length', '8', '--gradient_checkpointing', 'false',
                 '--teacher_update_rate', '0.25',  # a TRL field: the one parser (TrlParser) under that transformers
                 '--out', str(tmp_path/'run'), '--dry_run', 'true')
    assert res.returncode == 0, res.stderr[-3000:]
    assert f'transformers {oldest()}.' in res.stdout and 'CaOPDSDFTConfig' in res.stdout and 'gradient_checkpointing = False' in res.stdout
    assert 'teacher_update_rate = 0.25' in res.stdout, res.stdout


def test_the_oldest_transformers_plans_a_paper_run(old_transformers):
    "The README's paper plan under the oldest transformers: its config builds and its memory plan prints."
    res = _under(old_transformers, '--model', 'Qwen3-0.6B', '--preset', 'paper', '--num_processes', '1', '--dry_run', 'true')
    assert res.returncode == 0, res.stderr[-3000:]
    assert f'transformers {oldest()}.' in res.stdout and 'memory: ' in res.stdout and 'launch: ' in res.stdout


def test_the_version_table_judges_by_the_range():
    "caopd.machine.version_table reads the range settings.ini states (through the installed metadata)."
    from caopd.machine import declared_ranges
    assert (str(transformers_range().specifier), 'caopd') in declared_ranges()['transformers'], \
        'the installed metadata is stale: re-run .ci/env (it reinstalls when settings.ini changes)'


READOUT_UNDER_OLDEST = '''
import torch, transformers
from transformers import LlamaConfig, LlamaForCausalLM
from caopd.generation import _generate_batches
from caopd.models import tiny_model
from caopd.readout import TokenTable, expected_value, expected_values, plain_next_probs, transformers_batch_next_probs
from caopd.readout import transformers_readouts
torch.manual_seed(0)
texts = ['0', '1', '2', '5', '.', '0.', '.5', '25', ' 0', '1.0', '5\\n', ' ', '\\n', 'a', '%']
lm = LlamaForCausalLM(LlamaConfig(vocab_size=len(texts), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, num_key_value_heads=1)).eval()
prefixes, table = [[13, 11], [3, 7, 13, 11]], TokenTable.from_texts(texts)
tree = expected_values(transformers_batch_next_probs(lm, prefixes), 2, table, prune=0)
plain = [expected_value(plain_next_probs(lm, p), table, prune=0) for p in prefixes]
assert all(abs(a.expected - b.expected) < 1e-6 and a.nodes == b.nodes for a, b in zip(tree, plain)), (tree, plain)
model, tok = tiny_model(seed=0)
heads, got = ['It is 4.\\nConfidence:', 'Maybe 5.\\nConfidence:'], []
_generate_batches(model, tok, [0, 1], heads, 2, lambda k, t, c: got.append((t, c)), with_cache=True, max_new_tokens=3,
                  do_sample=False)
(conts, cont), = got
comps = [h + t for h, t in zip(heads, conts)]
shared = transformers_readouts(model, tok, ['', ''], comps, continued=cont)
own = transformers_readouts(model, tok, ['', ''], comps)
assert all(cont.holds(k, tok(h, add_special_tokens=False)['input_ids']) for k, h in enumerate(heads))
assert all(abs(a.mass - b.mass) + abs(a.outside - b.outside) < 1e-5 and a.nodes == b.nodes for a, b in zip(shared, own)), (shared, own)
import caopd.generation as G  # sampling: NucleusSampler into a growing cache draws what transformers' own sampling draws
msgs, kw = [[dict(role='user', content=q)] for q in ('Say A.', 'Say B, please.')], dict(n=2, temperature=0.9, max_new_tokens=5, progress=False, seed=3)
fast = G.generate(model, tok, msgs, **kw)
G.SAMPLER = G.GROWING_CACHE = False
assert G.generate(model, tok, msgs, **kw) == fast
print('transformers', transformers.__version__, 'readout ok')
'''


def test_the_oldest_transformers_reads_the_expected_confidence(old_transformers):
    """The readout's own attention (`caopd_tree`) and the generation's cache under the oldest transformers: the trees read
    as the definition reads them, the answers read from the generation's cache as with a pass of their own, and sampling
    with caopd's `NucleusSampler` into a growing cache draws what transformers' own sampling draws."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(old_transformers), str(ROOT), os.environ.get('PYTHONPATH', '')]))
    res = subprocess.run([sys.executable, '-c', READOUT_UNDER_OLDEST], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f'transformers {oldest()}.' in res.stdout and 'readout ok' in res.stdout
