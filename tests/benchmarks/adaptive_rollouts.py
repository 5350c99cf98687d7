"""Adaptive allocation in the trainer (issue 22, item 1): rollouts drawn and time per step against a fixed budget, one run.

Run from the repository root, after the README's main command (its warm-up is the start measured here):

    .ci/env python tests/benchmarks/adaptive_rollouts.py [--start RUN/warmup/checkpoint] [--steps 8]

It builds CaOPD-SDFT as the cpu preset trains it on the laptop domain (4 prompts x num_generations = 4 distilled
rollouts per step, rollouts sampled as the evaluation samples), three times from the same start:
  - 'K=4': mu_hat from the 4 distilled rollouts (the README's run);
  - 'fixed K=8': 4 more scored-only rollouts of every prompt (`num_confidence_rollouts=8`);
  - 'adaptive 4->8': 4 more only for prompts whose first 4 disagree (`confidence_allocation='adaptive'`).
For each of `--steps` steps of the same training prompts it prepares a batch with each trainer in turn (the same
`_prepare_training_batch` a training step runs: rollouts, verifier, targets, teacher inputs) and runs the loss forward and
backward on it (no optimizer step: every step measures the start, so the three see the same policy). Printed: rollouts
per prompt, seconds per step (batch and loss), and the ratios to 'fixed K=8', measured in this one run, with each
step's ratio's spread. The targets' agreement with the fixed K=8 ones says nothing of their quality on its own (the
two draw different rollouts); tests/benchmarks/estimators.py measures the estimators' error against a 24-rollout
reference.

The committed run (each step's measurements and what it printed, both beside this script; the README's table is built
from the JSON by `readme_table`, checked by tests/test_readme_tables.py):

    .ci/env python tests/benchmarks/adaptive_rollouts.py --save tests/benchmarks/adaptive_rollouts.json > tests/benchmarks/adaptive_rollouts.txt

`--steps-from tests/benchmarks/adaptive_rollouts.json` prints the table again without measuring.
"""
import argparse, json, os, sys, time
from pathlib import Path

import numpy as np

from estimators import MAIN_RUN, check_start  # beside this script: the README main run folder, the --start check

VARIANTS = {'K=4': {}, 'fixed K=8': dict(num_confidence_rollouts=8),
            'adaptive 4->8': dict(num_confidence_rollouts=8, confidence_allocation='adaptive')}
BASE = 'fixed K=8'  # what every ratio is to
STEPS = Path(__file__).with_name('adaptive_rollouts.json')  # the committed measurements
README_ROWS = {'K=4': 'K = 4, no scored-only rollouts (the README\'s run)', 'fixed K=8': 'fixed K = 8 (4 more of every prompt)',
               'adaptive 4->8': 'adaptive 4 -> 8 (4 more only where the first 4 disagree)'}


def trainers(start:str, out:Path, seed:int):
    "{variant: CaOPD-SDFT trainer} built as `caopd.train` builds the cpu preset's, and the training rows."
    from caopd.baselines import build_trainer
    from caopd.runfolder import RunFolder
    from caopd.arguments import RunArguments, check_run, resolve_settings
    from caopd.stages import select_prompts
    from caopd.run_config import trl_config_fields
    run = RunArguments(preset='cpu', domain='arithmetic', seed=seed, out=str(out / 'settings'))
    check_run(run)
    settings = resolve_settings(run)
    rows, _, settings = select_prompts(settings)
    cfg = trl_config_fields(settings, RunFolder(out / 'settings'))
    cfg.update(save_strategy='no', report_to='none', disable_tqdm=True)
    built = {name: build_trainer('caopd-sdft', start, 'arithmetic', train_dataset=rows, output_dir=out / name,
                                 **cfg, **extra) for name, extra in VARIANTS.items()}
    return built, rows, settings


def step(trainer, rows):
    "Seconds to prepare the batch and run the loss forward and backward; the rollouts per prompt it drew."
    t0 = time.perf_counter()
    batch = trainer._prepare_training_batch(rows)
    t1 = time.perf_counter()
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.zero_grad()
    trainer.compute_loss(trainer.model, batch).backward()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, trainer._metrics['train']['caopd/rollouts_per_prompt'][-1]


def load_steps(path=STEPS) -> dict:
    "Saved measurements: {'variants': {name: [[batch s, loss s, rollouts per prompt], ...] one per step}, and what ran}."
    return json.loads(Path(path).read_text())


def summary(data:dict) -> dict:
    "Per variant: mean rollouts per prompt and seconds (batch, loss, both), their ratios to `BASE`, each step's time ratio."
    base = np.array(data['variants'][BASE])
    out = {}
    for name, r in data['variants'].items():
        r = np.array(r)
        t = r[:, 0] + r[:, 1]
        out[name] = dict(rollouts=r[:, 2].mean(), rollouts_ratio=r[:, 2].mean() / base[:, 2].mean(), batch=r[:, 0].mean(),
                         loss=r[:, 1].mean(), total=t.mean(), ratio=t.sum() / (base[:, 0] + base[:, 1]).sum(),
                         step_ratios=t / (base[:, 0] + base[:, 1]))
    return out


def table(data:dict) -> str:
    "What the script prints after its steps."
    lines = [f"{len(data['variants'][BASE])} steps of {data['prompts']} prompts from {data['start']} (cpu preset, arithmetic), "
             f"the three variants in turn each step; {data['machine']}",
             '| variant | rollouts / prompt | x fixed K=8 | s / step (batch + loss) | x fixed K=8 (median, range over steps) |',
             '|---|---|---|---|---|']
    for name, r in summary(data).items():
        q = r['step_ratios']
        lines.append(f"| {name} | {r['rollouts']:.2f} | {r['rollouts_ratio']:.2f} | {r['total']:.1f} ({r['batch']:.1f} + "
                     f"{r['loss']:.1f}) | {r['ratio']:.2f} (median {np.median(q):.2f}, {q.min():.2f}-{q.max():.2f}) |")
    return '\n'.join(lines) + '\n'


def readme_table(data:dict) -> str:
    "The README's table (`README_ROWS`): rollouts and seconds per step, each beside its ratio to fixed K = 8."
    from caopd.io import markdown_table
    rows = []
    for name, r in summary(data).items():
        q = r['step_ratios']
        spread = '' if name == BASE else f'; {q.min():.2f}-{q.max():.2f} over steps'
        rows.append([README_ROWS[name], f"{r['rollouts']:.2f} ({r['rollouts_ratio']:.2f})",
                     f"{r['batch']:.1f} + {r['loss']:.1f} = {r['total']:.1f} ({r['ratio']:.2f}{spread})"])
    return markdown_table(rows, header=['allocation (4 distilled rollouts per prompt)', 'rollouts / prompt (x fixed K=8)',
                                        's / step: batch + loss (x fixed K=8)'], right=[])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--start', default=f'{MAIN_RUN}/warmup/checkpoint', help='the warmed start (a model folder)')
    ap.add_argument('--steps', type=int, default=8, help='steps of 4 training prompts each (the cpu preset trains 6)')
    ap.add_argument('--out', default='runs/bench/adaptive', help='scratch folder for the trainers')
    ap.add_argument('--save', default=None, help=f"write each step's measurements there (the committed run: {STEPS.name} beside this script)")
    ap.add_argument('--steps-from', default=None, help='saved measurements to print instead of measuring')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    if a.steps_from:
        print(table(load_steps(a.steps_from)), end='')
        return
    check_start(a.start)
    if a.steps < 1: sys.exit(f"--steps {a.steps}: need at least 1")
    import torch
    torch.manual_seed(a.seed)
    built, rows, settings = trainers(a.start, Path(a.out), a.seed)
    P = settings.per_device_train_batch_size * settings.gradient_accumulation_steps // settings.K
    K = settings.K
    res = {name: [] for name in built}
    for s in range(-1, a.steps):  # step -1: untimed, the last prompts
        prompts = [rows[(s * P + p) % len(rows)] for p in range(P)]
        batch_rows = [r for r in prompts for _ in range(K)]  # TRL's sampler: each prompt K times in a row
        for name, tr in built.items():
            tr.model.train()
            res[name].append(step(tr, batch_rows))
        if s < 0:
            for r in res.values(): r.clear()
            continue
        print(f"step {s + 1}: " + ', '.join(f"{n} {r[-1][2]:.1f} rollouts/prompt {sum(r[-1][:2]):.1f} s"
                                             for n, r in res.items()), flush=True)
    data = dict(start=a.start, prompts=P, seed=a.seed, variants={n: [list(map(float, x)) for x in r] for n, r in res.items()},
                machine=f'{os.cpu_count()} CPU cores, torch threads {torch.get_num_threads()}')
    if a.save:
        from caopd.io import write_json
        write_json(a.save, data)
    print('\n' + table(data), end='')


if __name__ == '__main__': main()
