"""Why CaOPD-SDFT's confidence goes to 1.0 at 135M: the reverse KL's fit of a student that cannot tell prompts apart.

Run from the repository root on a CaOPD-SDFT run folder of the laptop domain (it needs `rollouts.jsonl` and the warmed
start, `warmup/checkpoint`):

    .ci/env python tests/benchmarks/first_digit_fit.py RUN_FOLDER [--steps 1-8]

For each kept rollout of those steps, the warmed start as teacher is shown the demonstration with the rollout's mu_hat
written in (as training shows it) and the rollout up to `Confidence: `, and gives its distribution over the first
digit. A student whose first digit does not yet depend on the prompt minimizes the step's summed reverse KL (the
paper's divergence, Table 6) at the normalized geometric mean of those distributions
(`caopd.theory.reverse_kl_closed_form`), and the forward KL at their arithmetic mean. The script prints both.

Measured (issue 19) on the cpu preset with stratified steps (`shuffle_dataset=False`: one prompt per level), the
warmed start as teacher and learning rate 3e-5, steps 1-8: 128 rollouts, mean target 0.45, 34% of them targeting 1;
the teacher copies 1 sharply (p('1') 0.981 when mu_hat = 1) and 0 less so (p('0') 0.834 when mu_hat < 1, mostly wrong
answers). The reverse KL's prompt-blind fit puts p('1') = 0.72 on the first digit, the forward KL's 0.44: the
rows whose teacher all but rules out '0' outvote the rest. Replaying that run's rollouts through the trainer
(`tests/benchmarks/replay_first_digit.py`) moves the student's p('1') share on every level together, 0.57-0.73 at
the start to 0.91-0.96 after 5 steps, while that run's step-4 batch (mean target 0.19), repeated (`--repeat 4`), moves
it to 0.09-0.11 in 3 steps: the student follows its targets, but on every level together; what it cannot yet do is
condition its confidence on the prompt.
"""
import argparse, json

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from caopd.config import CaOPDSDFTConfig
from caopd.data import load_domain
from caopd.theory import reverse_kl_closed_form
from teacher_copying import teacher_text, up_to_confidence  # beside this script


def steps_arg(text:str) -> set:
    "'1-8' or '1,3,5' -> the set of steps."
    a, _, b = text.partition('-')
    return set(range(int(a), int(b) + 1)) if b else {int(s) for s in text.split(',')}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('run', help='a CaOPD-SDFT run folder of the arithmetic domain')
    ap.add_argument('--steps', default='1-8', help="training steps whose rollouts are read, e.g. '1-8' or '2,4'")
    a = ap.parse_args()
    start = f'{a.run}/warmup/checkpoint'
    tok = AutoTokenizer.from_pretrained(start)
    teacher = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32).eval()
    template = CaOPDSDFTConfig(output_dir='/tmp/unused', use_cpu=True).teacher_prompt_template
    rows = {r['id']: r for r in load_domain('arithmetic', 'train')}
    digits = [tok.encode(str(d), add_special_tokens=False)[0] for d in range(10)]
    steps, logp, mus = steps_arg(a.steps), [], []
    for line in open(f'{a.run}/rollouts.jsonl'):
        x = json.loads(line)
        if x['step'] not in steps or 'Confidence:' not in x['completion']: continue
        r = rows[x['id']]
        text = teacher_text(tok, r, template, x['mu_hat'], up_to_confidence(r, x['completion']))
        with torch.no_grad():
            lp = teacher(tok(text, return_tensors='pt', add_special_tokens=False).input_ids).logits[0, -1].log_softmax(-1)
        logp.append(lp[digits].numpy()); mus.append(x['mu_hat'])
    L = np.array(logp)
    L = L - np.logaddexp.reduce(L, axis=1, keepdims=True)  # over the ten digits
    mus = np.array(mus)
    rev, fwd = reverse_kl_closed_form(L), np.exp(L).mean(0)
    print(f"{len(mus)} rollouts of steps {a.steps}: mean target {mus.mean():.2f}, {np.mean(mus == 1):.0%} target 1")
    print(f"teacher: p('1') {np.exp(L[mus == 1, 1]).mean():.3f} when mu_hat = 1, p('0') {np.exp(L[mus < 1, 0]).mean():.3f} "
          "when mu_hat < 1")
    print(f"prompt-blind student's first digit: reverse KL fit p('0') {rev[0]:.3f} p('1') {rev[1]:.3f}; "
          f"forward KL fit p('0') {fwd[0]:.3f} p('1') {fwd[1]:.3f}")


if __name__ == '__main__': main()
