"""Time the expected stated confidence (`caopd.readout`) against the generation of the answers it reads: a run folder's
evaluation before training (the README main job's: its warmed model, 142 answers), evaluated again as the run did.

Run from the repository root, on a finished run folder of the README main job; its output is committed beside it:

    .ci/env python tests/benchmarks/bench_readout.py RUN_FOLDER > tests/benchmarks/bench_readout.txt

A script, not a pytest test: it prints seconds and ratios measured within this one run (the machine may be busy: each
way is timed `--repeat` times, alternating, and the best is kept). Three readings of the same answers:
- now: `caopd.evaluate` with the run's evaluation settings, which reads each batch's answers from the generation's own
  cache as the batch ends; the generation's seconds are the evaluation's less the readout's;
- own passes: `transformers_readouts` over the records' completions with passes of its own (a resumed evaluation's);
- before: the readout of commit `--old` (its `caopd/readout.py`, read from git), which copied the batch's whole
  key-value cache for every 16 nodes and read each node's whole suffix again.
It checks that the evaluation generates the records' answers again, and that the three readings agree on every
answer (expected value, mass, outside, pruned) to 1e-5, float32's rounding in passes of other shapes; it fails otherwise.
"""
import argparse, dataclasses, importlib.util, os, platform, subprocess, sys, time
from pathlib import Path

import caopd, caopd.readout
from caopd.arguments import RunSettings
from caopd.evaluation import evaluate
from caopd.io import read_jsonl
from caopd.models import chat_template_kwargs, load_model
from caopd.pipeline import run_eval_arguments
from caopd.runfolder import RunFolder
from caopd.run_config import readout_decimals

p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
p.add_argument('run', help="a finished run folder with warmup/checkpoint and eval/before (the README main job's)")
p.add_argument('--old', default='562d78a', help='the commit whose readout is timed as before (the last one that copied the cache)')
p.add_argument('--repeat', type=int, default=2, help='rounds; the best time of each way is kept')
a = p.parse_args()

root = Path(caopd.__file__).resolve().parents[1]
source = subprocess.run(['git', 'show', f'{a.old}:caopd/readout.py'], cwd=root, capture_output=True, text=True, check=True).stdout
before = importlib.util.module_from_spec(importlib.util.spec_from_loader('caopd._readout_before', loader=None))
before.__package__ = 'caopd'
sys.modules[before.__name__] = before  # its dataclasses look their module up
exec(compile(source, f'{a.old}:caopd/readout.py', 'exec'), before.__dict__)

folder = RunFolder(a.run)
settings = RunSettings(**folder.read_settings())  # a run made by today's caopd records every field
model = str(folder.warmup/'checkpoint')
records = read_jsonl(folder.eval('before')/'records.jsonl')
args = dataclasses.replace(run_eval_arguments(settings, model, folder.eval('before')), out=None, backend='transformers')  # written nowhere
decimals = readout_decimals(settings)
assert args.readout and args.readout_decimals == decimals, (args.readout, args.readout_decimals, decimals)
lm, tok = load_model(model, dtype=settings.dtype)
kw = chat_template_kwargs(settings.model, tok)
texts = [tok.apply_chat_template(r['prompt'], tokenize=False, add_generation_prompt=True, **kw) for r in records]
comps = [r['completion'] for r in records]

def evaluation():
    "caopd.evaluate as the run called it; (records, seconds, readout seconds, readouts by completion)."
    spent, read, real = [0.0], {}, caopd.readout.transformers_readouts
    def timed(model, tokenizer, prompt_texts, completions, *rest, **kw):
        t0 = time.perf_counter()
        out = real(model, tokenizer, prompt_texts, completions, *rest, **kw)
        spent[0] += time.perf_counter() - t0
        read.update(zip(zip(prompt_texts, completions), out))
        return out
    caopd.readout.transformers_readouts = timed  # evaluate imports it where it reads, so it finds this one
    try:
        t0 = time.perf_counter()
        got, _ = evaluate(model, args=args, name='bench', progress=False)
        return got, time.perf_counter() - t0, spent[0], read
    finally: caopd.readout.transformers_readouts = real

def timed(f):
    t0 = time.perf_counter(); out = f(); return out, time.perf_counter() - t0

best = {}
for _ in range(a.repeat):
    got, total, reading, now = evaluation()
    ways = dict(evaluation=total, generation=total - reading, now=reading)
    own, ways['own passes'] = timed(lambda: caopd.readout.transformers_readouts(lm, tok, texts, comps, decimals))
    old, ways['before'] = timed(lambda: before.transformers_readouts(lm, tok, texts, comps, decimals))
    for k, v in ways.items(): best[k] = min(best.get(k, float('inf')), v)

assert [r['completion'] for r in got] == comps, 'the evaluation did not generate the records\' answers again'
fields = ('expected', 'mass', 'outside', 'pruned')
worst = {f: 0.0 for f in fields}
for k, c in enumerate(comps):
    trio = [now.get((texts[k], c)), own[k], old[k]]
    if None in trio: assert trio == [None] * 3, (records[k]['id'], trio); continue
    for f in fields:
        vals = [getattr(x, f) for x in trio]
        if None in vals: assert vals == [None] * 3, (records[k]['id'], f, vals); continue
        worst[f] = max(worst[f], max(vals) - min(vals))
read = sum(x is not None for x in own)
g = best['generation']
commit = subprocess.run(['git', 'describe', '--always', '--dirty'], cwd=root, capture_output=True, text=True).stdout.strip()
print(f"commit {commit}; {platform.machine()}, {os.cpu_count()} cores, torch threads {__import__('torch').get_num_threads()}; {a.run}: "
      f"{len(records)} answers ({read} with a label), {args.max_new_tokens} new tokens, batches of {args.batch_size}, "
      f"readout decimals {decimals}, best of {a.repeat}")
print(f"evaluation: {best['evaluation']:.1f} s, of which generation {g:.1f} s ({g / len(records):.3f} s an answer)")
for way, what in (('now', "readout now, from the generation's cache"), ('own passes', 'readout now, with passes of its own'),
                  ('before', f'readout before ({a.old})')):
    print(f"{what}: {best[way]:.1f} s ({best[way] / len(records):.3f} s an answer), ratio to generation {best[way] / g:.3f}")
print(f"ratio, before / now: {best['before'] / best['now']:.1f}")
print('largest difference between the three readings of an answer: '
      + ', '.join(f'{f} {worst[f]:.1e}' for f in fields))
# float32 sums in another order (another batch, another padding, a cache made by the generation's decoding steps) move
# a probability by a few 1e-6; a different reading of the tree would move it by far more
assert all(v <= 1e-5 for v in worst.values()), worst
print('every answer was generated again as recorded, and its three readouts agree to 1e-5')
