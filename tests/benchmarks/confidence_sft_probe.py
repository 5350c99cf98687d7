"""Can the 135M start learn a level-dependent confidence at all, and in how many updates, under the easiest signal?

Run from the repository root, after the README's main command (its warm-up is the start measured here):

    .ci/env python tests/benchmarks/confidence_sft_probe.py [--start RUN/warmup/checkpoint] [--steps 30] [--lr 1e-4]

Issue 19's runs end with the same stated confidence on every level of the laptop domain, although their targets differ
by level. This separates the signal from the student: it trains the warmed start directly on the first confidence digit
(the position CaOPD's calibration term reaches through the teacher), with no teacher and no sampling. Each step takes
`--batch` training prompts, one level after another, with their gold answer, and minimises the cross-entropy of the
digit against a per-level target share of '1' (`--targets`, default the start's measured accuracy per level in the
README: 0.86, 0.50, 0.20, 0.10) or, with `--hard`, a 0/1 label drawn from it per row (the noise of a few rollouts).
AdamW at `--lr`, constant. After every step it prints the student's share p('1') / (p('0') + p('1')) at that
position on `--probe` validation prompts per level (their gold answers), and the rank correlation of the share with
the level targets over those prompts. The loss touches one position per row: a step of 16 prompts took about 20 s
on 2 cores, one of 4 about 5 s.
"""
import argparse, collections

import numpy as np
import torch
from scipy.stats import spearmanr

from estimators import MAIN_RUN, check_start  # beside this script
from teacher_copying import student_text, up_to_confidence


def level(row) -> int:
    "The row's level: digits of the larger operand."
    return int(row['difficulty'])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--start', default=f'{MAIN_RUN}/warmup/checkpoint', help='the warmed start (a model folder)')
    ap.add_argument('--steps', type=int, default=30)
    ap.add_argument('--lr', type=float, default=1e-4)
    ap.add_argument('--batch', type=int, default=16, help='training prompts per step (levels in turn)')
    ap.add_argument('--probe', type=int, default=8, help='validation prompts per level to probe')
    ap.add_argument('--targets', default='0.86,0.50,0.20,0.10', help="target share of '1' on levels 1-4")
    ap.add_argument('--hard', action='store_true', help='a 0/1 label per row drawn from its level target')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    check_start(a.start)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from caopd.arithmetic import interleaved_order
    from caopd.data import load_domain
    target = dict(enumerate((float(t) for t in a.targets.split(',')), start=1))
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    tok = AutoTokenizer.from_pretrained(a.start)
    model = AutoModelForCausalLM.from_pretrained(a.start, dtype=torch.float32)
    zero, one = (tok.encode(d, add_special_tokens=False)[0] for d in '01')
    train = load_domain('arithmetic', 'train')
    train = train.select(interleaved_order(train['difficulty'], a.seed))
    val = load_domain('arithmetic', 'validation')
    by_level = collections.defaultdict(list)
    for r in val: by_level[level(r)].append(r)
    probes = [r for k in sorted(by_level) for r in by_level[k][:a.probe]]
    texts = lambda rows: [student_text(tok, r, up_to_confidence(r)) for r in rows]

    def last_logits(strings):
        "The logits at each string's last position (left padding)."
        tok.padding_side = 'left'
        enc = tok(strings, return_tensors='pt', padding=True, add_special_tokens=False)
        return model(**enc, logits_to_keep=1).logits[:, -1]

    def probe():
        with torch.no_grad():
            p = last_logits(texts(probes)).softmax(-1)
        share = (p[:, one] / (p[:, zero] + p[:, one])).numpy()
        lv = np.array([level(r) for r in probes])
        rho = spearmanr(share, [target[k] for k in lv]).statistic
        return ' '.join(f'L{k} {share[lv == k].mean():.2f}' for k in sorted(set(lv))) + f'  rank corr {rho:+.2f}'

    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    print(f"start: p('1') share {probe()}  (targets {a.targets}{', hard labels' if a.hard else ''}, lr {a.lr})", flush=True)
    for step in range(1, a.steps + 1):
        rows = [train[(step - 1) * a.batch + i] for i in range(a.batch)]
        t = torch.tensor([target[level(r)] for r in rows])
        if a.hard: t = torch.tensor(rng.random(len(rows)) < t.numpy(), dtype=torch.float32)
        model.train()
        logp = last_logits(texts(rows)).log_softmax(-1)
        loss = -(t * logp[:, one] + (1 - t) * logp[:, zero]).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        model.eval()
        print(f"step {step}: loss {loss.item():.3f}  p('1') share {probe()}", flush=True)


if __name__ == '__main__': main()
