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
"""
import argparse, sys, time
from pathlib import Path

import numpy as np

from estimators import MAIN_RUN, check_start  # beside this script: the README main run folder, the --start check

VARIANTS = {'K=4': {}, 'fixed K=8': dict(num_confidence_rollouts=8),
            'adaptive 4->8': dict(num_confidence_rollouts=8, confidence_allocation='adaptive')}


def trainers(start:str, out:Path, seed:int):
    "{variant: CaOPD-SDFT trainer} built as `caopd.train` builds the cpu preset's, and the training rows."
    from caopd.baselines import build_trainer
    from caopd.runs import RunFolder
    from caopd.train import RunArguments, check_run, resolve_settings, select_prompts, trainer_config
    run = RunArguments(preset='cpu', domain='arithmetic', seed=seed, out=str(out / 'settings'))
    check_run(run)
    settings = resolve_settings(run)
    rows, _ = select_prompts(settings)
    cfg = trainer_config(settings, RunFolder(out / 'settings'))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--start', default=f'{MAIN_RUN}/warmup/checkpoint', help='the warmed start (a model folder)')
    ap.add_argument('--steps', type=int, default=8, help='steps of 4 training prompts each (the cpu preset trains 6)')
    ap.add_argument('--out', default='runs/bench/adaptive', help='scratch folder for the trainers')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    check_start(a.start)
    if a.steps < 1: sys.exit(f"--steps {a.steps}: need at least 1")
    import torch
    torch.manual_seed(a.seed)
    built, rows, settings = trainers(a.start, Path(a.out), a.seed)
    P = settings['per_device_train_batch_size'] * settings['gradient_accumulation_steps'] // settings['K']
    K = settings['K']
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
    base = np.array(res['fixed K=8'])
    print(f"\n{a.steps} steps of {P} prompts from {a.start} (cpu preset, arithmetic), the three variants in turn each step")
    print('| variant | rollouts / prompt | x fixed K=8 | s / step (batch + loss) | x fixed K=8 (median, range over steps) |')
    print('|---|---|---|---|---|')
    for name, r in res.items():
        r = np.array(r)
        t = r[:, 0] + r[:, 1]
        ratio = t / (base[:, 0] + base[:, 1])
        print(f"| {name} | {r[:, 2].mean():.2f} | {r[:, 2].mean() / base[:, 2].mean():.2f} | {t.mean():.1f} "
              f"({r[:, 0].mean():.1f} + {r[:, 1].mean():.1f}) | {t.sum() / (base[:, 0] + base[:, 1]).sum():.2f} "
              f"(median {np.median(ratio):.2f}, {ratio.min():.2f}-{ratio.max():.2f}) |")


if __name__ == '__main__': main()
