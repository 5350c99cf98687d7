"""Time the expected stated confidence (`caopd.readout`) of an evaluation's answers: read one at a time, as
`caopd.evaluate` did before, against read in batches (`transformers_readouts`, what it does now).

Run from the repository root, on a run folder of the README main job (its warmed model and its evaluation before
training; a few minutes on 2 cores); its output is committed beside it:

    .ci/env python tests/benchmarks/bench_readout.py RUN_FOLDER > tests/benchmarks/bench_readout.txt

A script, not a pytest test: it prints the seconds of each way and their RATIO, measured within this one run (the
machine may be busy: the two alternate, best of `--repeat` each), and checks nothing but that both give each answer
the same readout (to 1e-4: a padded batch computes in another order than one sequence) and the one its records hold.
"""
import argparse, os, platform, time

from caopd.io import read_jsonl
from caopd.models import chat_template_kwargs, load_model
from caopd.readout import transformers_readouts
from caopd.runfolder import RunFolder

p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
p.add_argument('run', help="a finished run folder with warmup/checkpoint and eval/before (the README main job's)")
p.add_argument('--n', type=int, default=64, help='answers read (the first n of the evaluation before training)')
p.add_argument('--batch', type=int, default=16, help='answers read together')
p.add_argument('--repeat', type=int, default=2, help='rounds; the best time of each way is kept')
a = p.parse_args()
folder = RunFolder(a.run)
settings = folder.read_settings()
model = str(folder.warmup/'checkpoint')
records = read_jsonl(folder.eval('before')/'records.jsonl')[:a.n]
lm, tok = load_model(model, dtype='float32')
kw = chat_template_kwargs(settings['model'], tok)
texts = [tok.apply_chat_template(r['prompt'], tokenize=False, add_generation_prompt=True, **kw) for r in records]
comps = [r['completion'] for r in records]
from caopd.arguments import RunSettings
from caopd.train import readout_decimals
decimals = readout_decimals(RunSettings(**settings))  # a run made by today's caopd records every field
best = {}
for _ in range(a.repeat):
    for way, size in (('one at a time', 1), (f'batches of {a.batch}', a.batch)):
        t0 = time.perf_counter()
        got = transformers_readouts(lm, tok, texts, comps, decimals, batch_size=size)
        best[way] = min(best.get(way, float('inf')), time.perf_counter() - t0)
        best[way + ' readouts'] = got
one, many = best['one at a time readouts'], best[f'batches of {a.batch} readouts']
for r, x, y in zip(records, one, many):
    vals = [v.expected if v is not None else None for v in (x, y)] + [r.get('expected_confidence')]
    if None in vals: assert vals == [None] * 3, (r['id'], vals)
    else: assert abs(vals[0] - vals[1]) < 1e-4 and abs(vals[0] - vals[2]) < 1e-4, (r['id'], vals)
read = sum(v is not None for v in one)
print(f"{platform.node() and platform.machine()}, {os.cpu_count()} cores; {a.run}: {len(records)} answers ({read} with a label), "
      f"readout decimals {decimals}, best of {a.repeat}")
print(f"one at a time: {best['one at a time']:.1f} s ({best['one at a time'] / len(records):.3f} s an answer)")
print(f"batches of {a.batch}: {best[f'batches of {a.batch}']:.1f} s ({best[f'batches of {a.batch}'] / len(records):.3f} s an answer)")
print(f"ratio, one at a time / batched: {best['one at a time'] / best[f'batches of {a.batch}']:.2f}")
print("every answer's readout agrees both ways, and with its records, to 1e-4")
