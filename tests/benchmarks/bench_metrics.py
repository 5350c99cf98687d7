"""Time `caopd.metrics.calibration_report` on 1,000,000 responses, against the kernels it had before and a naive pair loop.

Run from the repository root (about a minute on 2 cores; its output is committed beside it):

    .ci/env python tests/benchmarks/bench_metrics.py > tests/benchmarks/bench_metrics.txt

A script, not a pytest test: it prints timings and RATIOS measured within this one run (the machine may be busy; the
old and the new kernels alternate, best of `--repeat` each), and checks nothing but that the implementations agree.

- **The previous kernels** (`PreviousKernels` below, copied from caopd/metrics.py as of commit cfafdd5, kept here only
  as the reference): SPR and AUROC sorted each class apart and looked every correct confidence up among the incorrect
  ones (`searchsorted`), AURC sorted all of them again, the stated subset did both once more and `np.unique` sorted its
  values for `n_distinct`: seven sorts a report, and two per bootstrap chunk and subset. The report now sorts once and
  reads SPR, AUROC and the AURCs from the same tie blocks (issue 31, item 5). Their reports must agree to 1e-12.
- **The naive reference** (Python loops: per-response ECE/Brier/means, all (correct, incorrect) pairs for SPR/AUROC)
  is timed on `--naive-n` responses and extrapolated to `--n`: linearly for its per-response part, quadratically for
  its pair loop.
"""
import argparse, math, os, platform, time

import numpy as np

import caopd.metrics as M
from caopd.metrics import calibration_report


class PreviousKernels:
    "The report's ranking kernels before issue 31 (commit cfafdd5), verbatim but for the names: the reference, not the library."

    @staticmethod
    def pair_counts(c, y):
        pos, neg = np.sort(c[y]), np.sort(c[~y])
        lo = np.searchsorted(neg, pos, side='left')
        hi = np.searchsorted(neg, pos, side='right')
        return int(lo.sum()), int((hi - lo).sum()), len(pos) * len(neg)

    @classmethod
    def spr_auroc(cls, c, y):
        wins, ties, pairs = cls.pair_counts(c, y)
        if pairs == 0: return math.nan, math.nan
        return wins / pairs, (wins + 0.5 * ties) / pairs

    @staticmethod
    def tie_blocks(c):
        order = np.argsort(-c, kind='stable')
        cs = c[order]
        return order, np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]]) if len(c) else np.zeros(0, np.int64)

    @classmethod
    def selective_weighted(cls, w, c, y):
        if len(c) == 0: return {k: np.full(len(w), math.nan) for k in M.SELECTIVE_METRICS}
        w = np.rint(w).astype(np.int64)
        order, starts = cls.tie_blocks(c)
        wo = w[:, order]
        err = wo * ~y[order]
        N, E = w.sum(1), err.sum(1)
        H = M._harmonic(int(N.max()))
        Wb, Eb = np.add.reduceat(wo, starts, axis=1), np.add.reduceat(err, starts, axis=1)
        N0, E0 = np.cumsum(Wb, 1) - Wb, np.cumsum(Eb, 1) - Eb
        dH = H[N0 + Wb] - H[N0]
        P = N - E
        with np.errstate(invalid='ignore', divide='ignore'):
            area = E0 * dH + np.where(Wb > 0, Eb / np.maximum(Wb, 1) * (Wb - N0 * dH), 0.0)
            return dict(aurc=area.sum(1) / N, aurc_oracle=((N - P) - P * (H[N] - H[P])) / N, aurc_random=E / N)

    @classmethod
    def point_metrics(cls, c, y, n_bins):
        if len(c) == 0: return dict.fromkeys(M.SUBSET_METRICS, math.nan)
        acc, conf = float(y.mean()), float(c.mean())
        spr, auc = cls.spr_auroc(c, y)
        return dict(accuracy=acc, ece=M._ece(c, y, n_bins), brier=float(np.mean((c - y) ** 2)), ocg=conf - acc,
                    spr=spr, auroc=auc, mean_confidence=conf,
                    **{k: float(v[0]) for k, v in cls.selective_weighted(np.ones((1, len(c))), c, y).items()},
                    graded=float(np.mean((c > 0) & (c < 1))))

    @classmethod
    def report(cls, confidence, correct, n_bins=10, missing='worst'):
        "`calibration_report` without intervals, as it was."
        c, y, parsed = M._prepare(confidence, correct, missing)
        n = len(c)
        rep = dict(cls.point_metrics(c, y, n_bins), format_adherence=float(parsed.mean()) if n else math.nan, n=n)
        rep.update({f'{k}_stated': v for k, v in cls.point_metrics(c[parsed], y[parsed], n_bins).items()})
        rep['n_stated'], rep['n_distinct'] = int(parsed.sum()), int(np.unique(c[parsed]).size)
        return rep

    @classmethod
    def weighted_metrics(cls, w, c, y, n_bins):
        yf = y.astype(np.float64)
        gap = np.zeros((len(c), n_bins))
        gap[np.arange(len(c)), M._bin_index(c, n_bins)] = yf - c
        order = np.argsort(c, kind='stable')
        cs, ws, ys = c[order], w[:, order], y[order]
        neg = np.zeros((len(w), len(c) + 1))
        np.cumsum(ws * ~ys, axis=1, out=neg[:, 1:])
        p = np.flatnonzero(ys)
        lo, hi = np.searchsorted(cs, cs[p], 'left'), np.searchsorted(cs, cs[p], 'right')
        wp = ws[:, p]
        with np.errstate(invalid='ignore', divide='ignore'):
            tot = w.sum(1)
            acc, conf = w @ yf / tot, w @ c / tot
            wins, ties = (wp * neg[:, lo]).sum(1), (wp * (neg[:, hi] - neg[:, lo])).sum(1)
            pairs = wp.sum(1) * neg[:, -1]
            return dict(accuracy=acc, ece=np.abs(w @ gap).sum(1) / tot, brier=w @ (c - yf) ** 2 / tot, ocg=conf - acc,
                        spr=wins / pairs, auroc=(wins + 0.5 * ties) / pairs, mean_confidence=conf,
                        **cls.selective_weighted(w, c, y), graded=w @ ((c > 0) & (c < 1)) / tot)

    @classmethod
    def bootstrap_replicates(cls, c, y, parsed, g, n_boot, seed=0, n_bins=10):
        pf, c_stated = parsed.astype(np.float64), np.where(parsed, c, 0.0)
        parts = []
        for w in M.bootstrap_weights(g, n_boot, seed):
            part = cls.weighted_metrics(w, c, y, n_bins)
            part['format_adherence'] = w @ pf / w.sum(1)
            part.update({f'{k}_stated': v for k, v in cls.weighted_metrics(w * pf, c_stated, y, n_bins).items()})
            parts.append(part)
        return {k: np.concatenate([p[k] for p in parts]) for k in M.INTERVAL_METRICS}


def best_of(f, repeat:int) -> float:
    "Best wall time of `repeat` calls of `f` (time.perf_counter)."
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); f(); times.append(time.perf_counter() - t0)
    return min(times)


def alternate(old, new, repeat:int) -> tuple:
    "Best wall times of `old` and `new`, called in turn `repeat` times each, so that a busy machine slows both alike."
    t_old, t_new = [], []
    for _ in range(repeat):
        for f, ts in ((old, t_old), (new, t_new)):
            t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return min(t_old), min(t_new)


def make_data(n:int, seed:int=0, missing_rate:float=0.05):
    "Confidences on a 0.01 grid (many ties), `missing_rate` of them NaN, and verdicts correlated with them."
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, 101, n) / 100
    correct = rng.random(n) < 0.2 + 0.6 * conf
    conf[rng.random(n) < missing_rate] = np.nan
    return conf, correct


def worst_difference(a:dict, b:dict, keys) -> float:
    "Largest absolute difference over `keys` (arrays or numbers); NaN must meet NaN."
    worst = 0.0
    for k in keys:
        x, y = np.asarray(a[k], float), np.asarray(b[k], float)
        assert (np.isnan(x) == np.isnan(y)).all(), k
        if (~np.isnan(x)).any(): worst = max(worst, float(np.max(np.abs(x - y)[~np.isnan(x)])))
    return worst


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
    print(f"numpy {np.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs; best of {args.repeat}, "
          f"old and new kernels alternating\n")

    print("## The report against its previous kernels (no intervals)\n")
    conf, correct = make_data(args.n)
    cont = np.where(np.isnan(conf), np.nan, np.random.default_rng(2).random(args.n))
    print("| data | previous kernels (7 sorts), ms | one sort, ms | ratio previous / now | largest difference |")
    print("|---|---|---|---|---|")
    for name, c in ((f"n = {args.n:,}, 0.01 grid (101 values), 5% missing", conf),
                    (f"n = {args.n:,}, continuous (no ties), 5% missing", cont)):
        new, old = calibration_report(c, correct), PreviousKernels.report(c, correct)
        diff = worst_difference(old, new, M.POINT_KEYS)
        assert diff < 1e-12, f"the previous and the present report differ by {diff}"
        t_old, t_new = alternate(lambda: PreviousKernels.report(c, correct), lambda: calibration_report(c, correct),
                                 args.repeat)
        print(f"| {name} | {t_old * 1e3:.0f} | {t_new * 1e3:.0f} | {t_old / t_new:.2f} | {diff:.1e} |")
    conf_list = [None if math.isnan(c) else float(c) for c in conf]
    correct_list = correct.tolist()
    t_list = best_of(lambda: calibration_report(conf_list, correct_list), min(args.repeat, 3))
    print(f"\nThe same report from Python lists with None: {t_list * 1e3:.0f} ms (best of {min(args.repeat, 3)}).\n")

    print("## Bootstrap replicates against the previous kernels\n")
    print("| responses | resamples | previous kernels, s | one sort, s | ratio previous / now | largest difference |")
    print("|---|---|---|---|---|---|")
    for G, K, n_boot in ((64, 8, 1000), (2000, 8, 200)):
        rng = np.random.default_rng(G)
        difficulty = np.repeat(rng.beta(2, 2, G), K)
        y = rng.random(G * K) < difficulty
        cb = np.clip(np.round(difficulty + rng.normal(0, 0.15, G * K), 1), 0, 1)
        cb[rng.random(G * K) < 0.1] = np.nan
        c, yb, parsed = M._prepare(cb, y)
        g = np.arange(G * K) // K
        new = M._bootstrap_replicates(c, yb, parsed, g, n_boot)
        old = PreviousKernels.bootstrap_replicates(c, yb, parsed, g, n_boot)
        diff = worst_difference(old, new, M.INTERVAL_METRICS)
        assert diff < 1e-12, f"the previous and the present replicates differ by {diff}"
        t_old, t_new = alternate(lambda: PreviousKernels.bootstrap_replicates(c, yb, parsed, g, n_boot),
                                 lambda: M._bootstrap_replicates(c, yb, parsed, g, n_boot), min(args.repeat, 3))
        print(f"| {G} prompts x {K} | {n_boot} | {t_old:.3f} | {t_new:.3f} | {t_old / t_new:.2f} | {diff:.1e} |")

    print("\n## Against a naive pair loop\n")
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
    t_fast = best_of(lambda: calibration_report(conf, correct), args.repeat)
    t_fast_small = best_of(lambda: calibration_report(small_conf, small_correct), args.repeat)
    print(f"naive reference, n = {args.naive_n:,}: loops {t_lin * 1e3:.1f} ms + pair loop {t_pair * 1e3:.1f} ms "
          f"= {(t_lin + t_pair) * 1e3:.1f} ms (calibration_report: {t_fast_small * 1e3:.2f} ms; agree within {worst:.1e})")
    print(f"naive reference extrapolated to n = {args.n:,} (loops x{scale:,.0f}, pairs x{scale ** 2:,.0f}): "
          f"{t_naive:,.0f} s = {t_naive / 3600:.1f} h; calibration_report is {t_naive / t_fast:,.0f} times faster")


if __name__ == '__main__':
    main()
