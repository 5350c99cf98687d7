"""Fewer rollouts for the same target (issue 22, item 3): estimators of mu(x) against plain K = 8, on real rollouts.

Run from the repository root, after the README's main command (its warm-up is the start measured here):

    .ci/env python tests/benchmarks/estimators.py [--start RUN/warmup/checkpoint] [--prompts 64] [--draws 40]

It draws `--draws` rollouts of each of the first `--prompts` training prompts of the laptop domain (integer addition)
from the warmed start, sampled as the cpu preset's rollouts are (`rollout_sampling='eval'`: temperature 0.6, top-p
0.95, top-k 50, 64 tokens), with `caopd.evaluate.evaluate` into `--out` (a rerun resumes the draw). Then, over
`--reps` random orders of each prompt's rollouts, every estimator reads rollouts from the front (at most 16) and is
compared with a reference: the mean of the last `draws - 16` rollouts, disjoint from what the estimator saw.

Printed per estimator: mean rollouts per prompt, the MSE against the reference and the MSE against mu(x) (the first
minus the reference's own variance, estimated unbiasedly as ref (1 - ref) / (n_ref - 1): the two are independent given
mu(x)), the bias against the reference, and the ratios of rollouts and of MSE to plain K = 8 with 95% intervals over
prompts (bootstrap of the prompts; the reps are averaged within a prompt first). The estimators are the functions
training uses: `caopd.trainer.empirical_confidence` (frequency, leave-one-out, shrunken) and
`caopd.theory.early_stopped_mean`. The shrunken prior of a prompt is fitted on the other prompts' counts (training fits
it on the step's other prompts and the last `shrinkage_window` = 32). The issue's goal: K = 8's MSE or better with
at most half its rollouts.
"""
import argparse, sys
from pathlib import Path

import numpy as np

MAIN_RUN = 'runs/train/smollm2-135m-instruct-arithmetic-caopd-sdft-seed0'  # the README's main command's run folder
K_MAX = 16  # the most rollouts any estimator reads


def check_start(start:str):
    "Leave with one line when `start` (a benchmark's --start) is not a model folder, saying how to make the warmed start."
    if not (Path(start)/'config.json').is_file():
        sys.exit(f"--start {start}: no model there; make the warmed start with the README's main command "
                 f"(its run folder's warmup/checkpoint), or pass another model folder")


def draw(start:str, prompts:int, draws:int, out:Path, seed:int) -> np.ndarray:
    "(prompts, draws) verifier outcomes of the start's rollouts, in sample order."
    from caopd.evaluate import evaluate
    from caopd.train import PRESETS
    cpu = PRESETS['cpu']
    records, _ = evaluate(start, 'arithmetic', 'train', limit=prompts, n_samples=draws, temperature=cpu['eval_temperature'],
                          top_p=cpu['eval_top_p'], max_new_tokens=cpu['max_completion_length'], out=str(out), seed=seed)
    ids = list(dict.fromkeys(r['id'] for r in records))
    o = np.zeros((len(ids), draws))
    row = {i: k for k, i in enumerate(ids)}
    for r in records: o[row[r['id']], r['sample']] = float(r['correct'])
    return o


def estimators(first:np.ndarray) -> dict:
    "{name: (estimate, rollouts drawn)}, each (reps, prompts), from the rollouts `first` (reps, prompts, K_MAX) in order."
    import torch
    from caopd.theory import early_stopped_mean
    from caopd.trainer import empirical_confidence
    R, P, _ = first.shape
    out = {}
    def grouped(K, **kw):  # every prompt's first K outcomes as one step of P groups, one row per rollout
        s = torch.as_tensor(first[..., :K]).reshape(R, P * K)
        return empirical_confidence(s, K, **kw).reshape(R, P, K).numpy()
    for K in (2, 4, 8, 16):
        out[f'plain K={K}'] = grouped(K)[..., 0], np.full((R, P), K)
    out['leave-one-out K=8 (a distilled rollout: the other 7)'] = grouped(8, leave_one_out=True)[..., 0], np.full((R, P), 8)
    for K in (2, 4, 8):
        out[f'shrunken K={K}'] = grouped(K, estimator='shrunken')[..., 0], np.full((R, P), K)
    for k0, K in ((2, 8), (3, 8), (4, 8), (2, 16), (4, 16)):
        est, n = early_stopped_mean(first[..., :K], k0)
        out[f'early-stopped k0={k0} -> K={K}'] = est, n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--start', default=f'{MAIN_RUN}/warmup/checkpoint', help='the warmed start (a model folder)')
    ap.add_argument('--prompts', type=int, default=64, help='training prompts (the cpu preset trains on 64)')
    ap.add_argument('--draws', type=int, default=40, help='rollouts per prompt (16 for estimators, the rest reference)')
    ap.add_argument('--reps', type=int, default=2000, help='random orders of each prompt\'s rollouts')
    ap.add_argument('--out', default='runs/bench/estimators', help='where the drawn rollouts are kept')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    check_start(a.start)
    if a.draws < K_MAX + 8: sys.exit(f"--draws {a.draws}: need at least {K_MAX + 8} ({K_MAX} for estimators, 8+ reference)")
    o = draw(a.start, a.prompts, a.draws, Path(a.out), a.seed)
    P, D = o.shape
    rng = np.random.default_rng(a.seed)
    perm = np.argsort(rng.random((a.reps, P, D)), axis=-1)
    shuffled = np.take_along_axis(np.broadcast_to(o, (a.reps, P, D)), perm, axis=-1)
    first, ref = shuffled[..., :K_MAX], shuffled[..., K_MAX:].mean(-1)
    n_ref = D - K_MAX
    ref_var = ref * (1 - ref) / (n_ref - 1)  # unbiased for the reference mean's variance
    print(f"{P} prompts x {D} rollouts from {a.start}: success rate {o.mean():.3f}; per prompt "
          f"{np.mean(o.mean(1) == 0):.0%} never right, {np.mean(o.mean(1) == 1):.0%} always right; reference = mean of "
          f"{n_ref} rollouts disjoint from the estimator's; {a.reps} random orders")
    res = {k: ((est - ref) ** 2, est - ref, n) for k, (est, n) in estimators(first).items()}
    per = {k: (se.mean(0), (se - ref_var).mean(0), b.mean(0), n.mean(0)) for k, (se, b, n) in res.items()}  # per prompt
    base = per['plain K=8']
    boot = rng.integers(0, P, size=(1000, P))
    ci = lambda num, den: np.percentile(num[boot].mean(1) / den[boot].mean(1), [2.5, 97.5])
    print('| estimator | rollouts / prompt | x K=8 | MSE vs reference | x K=8 [95%] | MSE vs mu | x K=8 [95%] | bias |')
    print('|---|---|---|---|---|---|---|---|')
    for k, (se, se_mu, b, n) in per.items():
        r1, r2 = ci(se, base[0]), ci(se_mu, base[1])
        print(f'| {k} | {n.mean():.2f} | {n.mean() / base[3].mean():.2f} | {se.mean():.4f} | {se.mean() / base[0].mean():.2f} '
              f'[{r1[0]:.2f}, {r1[1]:.2f}] | {se_mu.mean():.4f} | {se_mu.mean() / base[1].mean():.2f} [{r2[0]:.2f}, {r2[1]:.2f}] '
              f'| {b.mean():+.4f} |')
    good = [k for k, (se, se_mu, b, n) in per.items()
            if n.mean() <= 0.5 * base[3].mean() and se_mu.mean() <= base[1].mean()]
    print('goal (MSE vs mu at most K=8\'s with at most half its rollouts):', ', '.join(good) if good else 'not met by any')


if __name__ == '__main__': main()
