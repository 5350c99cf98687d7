"""Time `caopd.metrics.calibration_report` on 1,000,000 responses, against a naive pair-loop reference.

Run from the repository root: `.ci/env python tests/benchmarks/bench_metrics.py [--n 1000000] [--naive-n 2000]`.
A script, not a pytest test: it prints timings and checks nothing but that both implementations agree.
The naive reference (Python loops: per-response ECE/Brier/means, all (correct, incorrect) pairs for SPR/AUROC) is timed
on `--naive-n` responses and extrapolated to `--n`: linearly for its per-response part, quadratically for its pair loop.
"""
import argparse, math, time

import numpy as np

from caopd.metrics import calibration_report


def best_of(f, repeat:int) -> float:
    "Best wall time of `repeat` calls of `f` (time.perf_counter)."
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); f(); times.append(time.perf_counter() - t0)
    return min(times)


def make_data(n:int, seed:int=0, missing_rate:float=0.05):
    "Confidences on a 0.01 grid (many ties), `missing_rate` of them NaN, and verdicts correlated with them."
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, 101, n) / 100
    correct = rng.random(n) < 0.2 + 0.6 * conf
    conf[rng.random(n) < missing_rate] = np.nan
    return conf, correct


def naive_linear(conf:list, correct:list, n_bins:int=10, missing:float=0.0) -> dict:
    "Per-response part of the report with Python loops: accuracy, ECE, Brier, OCG, mean confidence, format adherence."
    n = len(conf)
    filled = [missing if (c is None or c != c) else c for c in conf]
    bins = [[0, 0.0, 0.0] for _ in range(n_bins)]
    for c, y in zip(filled, correct):
        b = max(k for k in range(n_bins) if c >= k / n_bins)
        bins[b][0] += 1; bins[b][1] += c; bins[b][2] += y
    acc = sum(correct) / n
    mean_conf = sum(filled) / n
    return dict(accuracy=acc, ece=sum(abs(sy - sc) for _, sc, sy in bins) / n,
                brier=sum((c - y) ** 2 for c, y in zip(filled, correct)) / n, ocg=mean_conf - acc,
                mean_confidence=mean_conf, format_adherence=sum(c == c for c in conf) / n)


def naive_pairs(conf:list, correct:list, missing:float=0.0) -> dict:
    "SPR and AUROC by looping over every (correct, incorrect) pair."
    filled = [missing if c != c else c for c in conf]
    pos = [c for c, y in zip(filled, correct) if y]
    neg = [c for c, y in zip(filled, correct) if not y]
    wins = ties = 0
    for cp in pos:
        for cn in neg:
            wins += cp > cn; ties += cp == cn
    pairs = len(pos) * len(neg)
    return dict(spr=wins / pairs, auroc=(wins + ties / 2) / pairs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--n', type=int, default=1_000_000, help='responses in the timed report')
    p.add_argument('--naive-n', type=int, default=2000, help='responses for the naive reference')
    p.add_argument('--repeat', type=int, default=5, help='repeats; the best time is reported')
    args = p.parse_args()

    conf, correct = make_data(args.n)
    rep = calibration_report(conf, correct)
    t_fast = best_of(lambda: calibration_report(conf, correct), args.repeat)
    print(f"calibration_report, n = {args.n:,} (numpy arrays, {1 - rep['format_adherence']:.1%} missing, "
          f"{len(np.unique(conf[~np.isnan(conf)]))} distinct confidences): best of {args.repeat} = {t_fast * 1e3:.1f} ms "
          f"({args.n / t_fast / 1e6:.1f} M samples/s)")
    cont = np.where(np.isnan(conf), np.nan, np.random.default_rng(2).random(args.n))
    t_cont = best_of(lambda: calibration_report(cont, correct), args.repeat)
    print(f"calibration_report, n = {args.n:,} (continuous confidences, no ties): best of {args.repeat} = {t_cont * 1e3:.1f} ms")
    conf_list = [None if math.isnan(c) else float(c) for c in conf]
    correct_list = correct.tolist()
    t_list = best_of(lambda: calibration_report(conf_list, correct_list), min(args.repeat, 3))
    print(f"calibration_report, n = {args.n:,} (Python lists with None): best of {min(args.repeat, 3)} = {t_list * 1e3:.1f} ms")

    small_conf, small_correct = make_data(args.naive_n, seed=1)
    sc, sy = small_conf.tolist(), small_correct.tolist()
    naive = {**naive_linear(sc, sy), **naive_pairs(sc, sy)}
    fast = calibration_report(small_conf, small_correct, missing=0.0)  # the reference fills a missing confidence with 0
    worst = max(abs(naive[k] - fast[k]) for k in naive)
    assert worst < 1e-9, f"naive and fast reports differ by {worst}"
    t_lin = best_of(lambda: naive_linear(sc, sy), 3)
    t_pair = best_of(lambda: naive_pairs(sc, sy), 3)
    scale = args.n / args.naive_n
    t_naive = t_lin * scale + t_pair * scale ** 2
    t_fast_small = best_of(lambda: calibration_report(small_conf, small_correct), args.repeat)
    print(f"naive reference, n = {args.naive_n:,}: loops {t_lin * 1e3:.1f} ms + pair loop {t_pair * 1e3:.1f} ms "
          f"= {(t_lin + t_pair) * 1e3:.1f} ms (calibration_report: {t_fast_small * 1e3:.2f} ms; agree within {worst:.1e})")
    print(f"naive reference extrapolated to n = {args.n:,} (loops x{scale:,.0f}, pairs x{scale ** 2:,.0f}): "
          f"{t_naive:,.0f} s = {t_naive / 3600:.1f} h; calibration_report is {t_naive / t_fast:,.0f} times faster")


if __name__ == '__main__':
    main()
