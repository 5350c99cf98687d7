"""Fewer rollouts for the same target (issue 22, item 3): estimators of mu(x) against plain K = 8, on real rollouts.

Run from the repository root, after the README's main command (its warm-up is the start measured here):

    .ci/env python tests/benchmarks/estimators.py [--start RUN/warmup/checkpoint] [--prompts 64] [--draws 40]
    .ci/env python tests/benchmarks/estimators.py --outcomes tests/benchmarks/estimators_outcomes.json  # no drawing

The committed run (its draw's verifier outcomes, the rollouts behind them as `estimators_outcomes.rollouts.jsonl.gz`,
and what it printed, all beside this script):

    .ci/env python tests/benchmarks/estimators.py --save tests/benchmarks/estimators_outcomes.json > tests/benchmarks/estimators.txt

Everything after the draw is a function of the outcomes alone (`results`), so `tests/test_readme_tables.py` recomputes
the printed report and the README's table from the committed outcomes.

It draws `--draws` rollouts of each of the first `--prompts` training prompts of the laptop domain (integer addition)
from the warmed start, sampled as the cpu preset's rollouts are (`rollout_sampling='eval'`: temperature 0.6, top-p
0.95, top-k 50, 64 tokens), with `caopd.evaluation.evaluate` into `--out` (a rerun resumes the draw). Then, over
`--reps` random orders of each prompt's rollouts, every estimator reads rollouts from the front (at most 16) and is
compared with a reference: the mean of the last `draws - 16` rollouts, disjoint from what the estimator saw.

Printed per estimator: mean rollouts per prompt, the MSE against the reference and the MSE against mu(x) (the first
minus the reference's own variance, estimated unbiasedly as ref (1 - ref) / (n_ref - 1): the two are independent given
mu(x)), the bias against the reference, and the ratios of rollouts and of MSE to plain K = 8 with 95% intervals over
prompts (bootstrap of the prompts; the reps are averaged within a prompt first). The estimators are the functions
training uses: `caopd.estimators.empirical_confidence` (frequency, leave-one-out, shrunken) and
`caopd.theory.early_stopped_mean`. The shrunken prior of a prompt is fitted on the other prompts' counts (training fits
it on the step's other prompts and the last `shrinkage_window` = 32). The issue's goal: K = 8's MSE or better with
at most half its rollouts.
"""
import argparse, contextlib, json, sys, textwrap
from pathlib import Path

import numpy as np

MAIN_RUN = 'runs/train/smollm2-135m-instruct-arithmetic-caopd-sdft-seed0'  # the README's main command's run folder
K_MAX = 16  # the most rollouts any estimator reads
REPS = 2000  # random orders of each prompt's rollouts
OUTCOMES = Path(__file__).with_name('estimators_outcomes.json')  # the committed draw
BASE = 'plain K=8'  # what every ratio is to
README_ROWS = {  # the rows of the README's table, with the words it adds to a name
    'plain K=2': '', 'plain K=4': '', 'plain K=8': '', 'plain K=16': '',
    'leave-one-out K=8': " (a distilled rollout's target: the other 7)",
    'shrunken K=4': ' (empirical-Bayes Beta prior from the other prompts)', 'shrunken K=8': '',
    'early-stopped k0=2 -> K=8': ' (stop when the first 2 agree)', 'early-stopped k0=3 -> K=8': '',
    'early-stopped k0=4 -> K=8': '', 'early-stopped k0=4 -> K=16': ''}


def check_start(start:str):
    "Leave with one line when `start` (a benchmark's --start) is not a model folder, saying how to make the warmed start."
    if not (Path(start)/'config.json').is_file():
        sys.exit(f"--start {start}: no model there; make the warmed start with the README's main command "
                 f"(its run folder's warmup/checkpoint), or pass another model folder")


def draw(start:str, prompts:int, draws:int, out:Path, seed:int) -> tuple[dict, list[dict]]:
    "The start's rollouts' verifier outcomes (`outcomes_of`, with what drew them), and the rollouts' records."
    from caopd.evaluation import evaluate
    from caopd.arguments import PRESETS
    cpu = PRESETS['cpu']
    sampling = dict(temperature=cpu['eval_temperature'], top_p=cpu['eval_top_p'], max_new_tokens=cpu['max_completion_length'])
    records, _ = evaluate(start, 'arithmetic', 'train', limit=prompts, n_samples=draws, out=str(out), seed=seed, **sampling)
    return dict(start=start, domain='arithmetic', split='train', seed=seed, sampling=sampling, records=str(out),
                **outcomes_of(records, draws)), records


def outcomes_of(records:list[dict], draws:int) -> dict:
    "{'ids': the prompts in order, 'outcomes': one string of 0s and 1s per prompt, its rollouts' verdicts in sample order}."
    ids = list(dict.fromkeys(r['id'] for r in records))
    o = np.zeros((len(ids), draws), dtype=int)
    row = {i: k for k, i in enumerate(ids)}
    for r in records: o[row[r['id']], r['sample']] = int(r['correct'])
    return dict(ids=ids, outcomes=[''.join(map(str, r)) for r in o])


def rollouts_path(outcomes_path) -> Path:
    "Where the rollouts behind a saved draw are kept: beside it, `<name>.rollouts.jsonl.gz`."
    return Path(outcomes_path).with_suffix('.rollouts.jsonl.gz')


def load_rollouts(outcomes_path=OUTCOMES) -> list[dict]:
    "The records of the rollouts behind a saved draw (prompt, completion, answer, verdict, stated confidence)."
    import gzip
    return [json.loads(line) for line in gzip.decompress(rollouts_path(outcomes_path).read_bytes()).decode().splitlines()]


def load_outcomes(path=OUTCOMES) -> dict:
    "A saved draw (`draw`'s dict, outcomes as one string of 0s and 1s per prompt)."
    return json.loads(Path(path).read_text())


def estimators(first:np.ndarray) -> dict:
    "{name: (estimate, rollouts drawn)}, each (reps, prompts), from the rollouts `first` (reps, prompts, K_MAX) in order."
    import torch
    from caopd.estimators import empirical_confidence
    from caopd.theory import early_stopped_mean
    R, P, _ = first.shape
    out = {}
    def grouped(K, **kw):  # every prompt's first K outcomes as one step of P groups, one row per rollout
        s = torch.as_tensor(first[..., :K]).reshape(R, P * K)
        return empirical_confidence(s, K, **kw).reshape(R, P, K).numpy()
    for K in (2, 4, 8, 16):
        out[f'plain K={K}'] = grouped(K)[..., 0], np.full((R, P), K)
    out['leave-one-out K=8'] = grouped(8, leave_one_out=True)[..., 0], np.full((R, P), 8)  # a distilled rollout: the other 7
    for K in (2, 4, 8):
        out[f'shrunken K={K}'] = grouped(K, estimator='shrunken')[..., 0], np.full((R, P), K)
    for k0, K in ((2, 8), (3, 8), (4, 8), (2, 16), (4, 16)):
        est, n = early_stopped_mean(first[..., :K], k0)
        out[f'early-stopped k0={k0} -> K={K}'] = est, n
    return out


def results(draw:dict, reps:int|None=None, seed:int|None=None) -> dict:
    """Every estimator's error against the reference, over `reps` random orders of each prompt's rollouts: a function of
    the draw alone (`reps` and the seed of the orders default to the ones saved with it). The shrunken estimate is
    float32 torch arithmetic, so another torch or platform could move a fourth decimal."""
    reps = draw.get('reps', REPS) if reps is None else reps
    seed = draw['seed'] if seed is None else seed
    o = np.array([[int(c) for c in r] for r in draw['outcomes']], dtype=float)
    P, D = o.shape
    if D < K_MAX + 8: raise ValueError(f"{D} rollouts per prompt: need at least {K_MAX + 8} ({K_MAX} for estimators, 8+ reference)")
    rng = np.random.default_rng(seed)
    perm = np.argsort(rng.random((reps, P, D)), axis=-1)
    shuffled = np.take_along_axis(np.broadcast_to(o, (reps, P, D)), perm, axis=-1)
    first, ref = shuffled[..., :K_MAX], shuffled[..., K_MAX:].mean(-1)
    n_ref = D - K_MAX
    ref_var = ref * (1 - ref) / (n_ref - 1)  # unbiased for the reference mean's variance
    res = {k: ((est - ref) ** 2, est - ref, n) for k, (est, n) in estimators(first).items()}
    per = {k: (se.mean(0), (se - ref_var).mean(0), b.mean(0), n.mean(0)) for k, (se, b, n) in res.items()}  # per prompt
    base = per[BASE]
    boot = rng.integers(0, P, size=(1000, P))
    ci = lambda num, den: np.percentile(num[boot].mean(1) / den[boot].mean(1), [2.5, 97.5])
    rows = {}
    for k, (se, se_mu, b, n) in per.items():
        rows[k] = dict(rollouts=n.mean(), rollouts_ratio=n.mean() / base[3].mean(), mse_ref=se.mean(),
                       mse_ref_ratio=se.mean() / base[0].mean(), mse_ref_ci=ci(se, base[0]), mse_mu=se_mu.mean(),
                       mse_mu_ratio=se_mu.mean() / base[1].mean(), mse_mu_ci=ci(se_mu, base[1]), bias=b.mean())
    rate, s = o.mean(1), o.sum(1)
    between = (rate > 0) & (rate < 1)
    agree = (s * (s - 1) + (D - s) * (D - s - 1)) / (D * (D - 1))  # P(two of a prompt's rollouts agree)
    return dict(prompts=P, draws=D, n_ref=n_ref, reps=reps, start=draw['start'], success=o.mean(), never=np.mean(rate == 0),
                always=np.mean(rate == 1), agree_between=agree[between].mean(), rows=rows)


def goal(res:dict) -> list[str]:
    "The estimators that meet the issue's goal: MSE vs mu at most K = 8's with at most half its rollouts."
    return [k for k, r in res['rows'].items() if r['rollouts_ratio'] <= 0.5 and r['mse_mu_ratio'] <= 1]


def report(res:dict) -> str:
    "What the script prints: the draw, every estimator's row, and the goal."
    lines = [f"{res['prompts']} prompts x {res['draws']} rollouts from {res['start']}: success rate {res['success']:.3f}; "
             f"per prompt {res['never']:.0%} never right, {res['always']:.0%} always right; reference = mean of "
             f"{res['n_ref']} rollouts disjoint from the estimator's; {res['reps']} random orders",
             '| estimator | rollouts / prompt | x K=8 | MSE vs reference | x K=8 [95%] | MSE vs mu | x K=8 [95%] | bias |',
             '|---|---|---|---|---|---|---|---|']
    for k, r in res['rows'].items():
        (a, b), (c, d) = r['mse_ref_ci'], r['mse_mu_ci']
        lines.append(f"| {k} | {r['rollouts']:.2f} | {r['rollouts_ratio']:.2f} | {r['mse_ref']:.4f} | {r['mse_ref_ratio']:.2f} "
                     f"[{a:.2f}, {b:.2f}] | {r['mse_mu']:.4f} | {r['mse_mu_ratio']:.2f} [{c:.2f}, {d:.2f}] | {r['bias']:+.4f} |")
    lines.append("goal (MSE vs mu at most K=8's with at most half its rollouts): " + (', '.join(goal(res)) or 'not met by any'))
    return '\n'.join(lines) + '\n'


def readme_text(res:dict) -> str:
    "The README's lines on the draw, its table (`README_ROWS`), and what it says of the goal."
    from caopd.io import markdown_table
    rows = []
    for k, words in README_ROWS.items():
        r = res['rows'][k]
        c = r['mse_mu_ci']
        ratio = f"{r['mse_mu_ratio']:.2f}" if k == BASE else f"{r['mse_mu_ratio']:.2f} [{c[0]:.2f}, {c[1]:.2f}]"
        rows.append([k + words, f"{r['rollouts']:.2f} ({r['rollouts_ratio']:.2f})", f"{r['mse_mu']:.4f} ({ratio})"])
    met = goal(res)
    half = {k: r for k, r in res['rows'].items() if r['rollouts_ratio'] <= 0.5}
    best = sorted(half, key=lambda k: half[k]['mse_mu_ratio'])[:2]
    verdict = (f"The goal is met by {', '.join(met)}." if met else
               "The goal is **not met** by any of them here: of those with at most half its rollouts, the nearest are " +
               ' and '.join(f"{k} ({half[k]['mse_mu_ratio']:.2f} times K = 8's error)" for k in best) + '.')
    between = 1 - res['never'] - res['always']
    stopped = max(abs(r['bias']) for k, r in res['rows'].items() if k.startswith('early-stopped'))
    return (f"{res['success']:.0%} of the {res['prompts']} x {res['draws']} draws are right; {res['never']:.0%} of the "
            f"prompts are never right and {res['always']:.0%} always.\n\n" +
            markdown_table(rows, header=['estimator', 'rollouts / prompt (x K=8)', 'MSE vs mu (x K=8)'], right=[]) +
            '\n' + textwrap.fill(f"{verdict} The {between:.0%} of prompts in between are where an estimate errs, and two "
                                 f"of such a prompt's rollouts agree {res['agree_between']:.0%} of the time; the "
                                 f"early-stopped means' bias is at most {stopped:.3f}.", 118) + '\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--start', default=f'{MAIN_RUN}/warmup/checkpoint', help='the warmed start (a model folder)')
    ap.add_argument('--prompts', type=int, default=64, help='training prompts (the cpu preset trains on 64)')
    ap.add_argument('--draws', type=int, default=40, help='rollouts per prompt (16 for estimators, the rest reference)')
    ap.add_argument('--reps', type=int, default=REPS, help='random orders of each prompt\'s rollouts')
    ap.add_argument('--out', default='runs/bench/estimators', help='where the drawn rollouts are kept')
    ap.add_argument('--save', default=None, help=f"write the draw's outcomes there (the committed draw: {OUTCOMES.name} beside this script)")
    ap.add_argument('--outcomes', default=None, help='a saved draw to read instead of drawing (e.g. the committed one)')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    if a.outcomes: d = load_outcomes(a.outcomes)
    else:
        check_start(a.start)
        if a.draws < K_MAX + 8: sys.exit(f"--draws {a.draws}: need at least {K_MAX + 8} ({K_MAX} for estimators, 8+ reference)")
        with contextlib.redirect_stdout(sys.stderr):  # the library's own lines ('resuming ...'): stdout is the report
            d, records = draw(a.start, a.prompts, a.draws, Path(a.out), a.seed)
        d['reps'] = a.reps
        if a.save:
            import gzip
            from caopd.io import atomic_write, write_json
            write_json(a.save, d)
            lines = ''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in records).encode()
            atomic_write(rollouts_path(a.save), gzip.compress(lines, 9, mtime=0))  # what the draw saw, in 1% of its size
    print(report(results(d, a.reps)), end='')


if __name__ == '__main__': main()
