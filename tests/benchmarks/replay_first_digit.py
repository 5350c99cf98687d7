"""Replay a CaOPD-SDFT run's rollouts through the trainer and watch the first confidence digit, level by level.

Run from the repository root on a run folder of the laptop domain (`rollouts.jsonl` and `warmup/checkpoint`):

    .ci/env python tests/benchmarks/replay_first_digit.py RUN_FOLDER [--steps 8] [--lr 3e-5] [--repeat STEP] [--part full]
        [--alpha 1]

The real `CaOPDSDFTTrainer` (stratified steps, the warmed start as teacher, Adam at `--lr`) starts from the run's
warmed start and trains `--steps` steps whose rollouts are scripted (`caopd.trainer.script_rollouts`) to be the run's
own, step by step (`--repeat STEP`: that one step's batch every time). After every step it prints the student's share
p('1') / (p('0') + p('1')) at the first digit after 16 validation prompts' gold answers, per level. `--part` trains
on the whole loss or only on its calibration or capability part (`caopd.loss.CaOPDLoss`).
Measured numbers, and what they mean: tests/benchmarks/first_digit_fit.py.
"""
import argparse, collections, json, re

import torch
from transformers import TrainerCallback

from caopd.baselines import build_trainer
from caopd.data import load_domain
from caopd.testing import script_rollouts
from teacher_copying import student_text, up_to_confidence  # beside this script


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('run', help='a CaOPD-SDFT run folder of the arithmetic domain')
    ap.add_argument('--steps', type=int, default=8, help='steps to train')
    ap.add_argument('--lr', type=float, default=3e-5, help='learning rate (linear decay over --steps, as the run)')
    ap.add_argument('--repeat', type=int, default=None, help="train on this one step's batch every step")
    ap.add_argument('--part', choices=('full', 'calibration', 'capability'), default='full', help='what the loss keeps')
    ap.add_argument('--alpha', type=float, default=1.0, help='distillation_alpha: 1 reverse KL (the paper), 0 forward KL')
    a = ap.parse_args()
    rs = [json.loads(l) for l in open(f'{a.run}/rollouts.jsonl')]
    batch_of = lambda step: a.repeat or step  # the run's step whose rollouts train step `step`
    by, order = collections.defaultdict(list), []
    for step in range(1, a.steps + 1):
        for r in rs:
            if r['step'] != batch_of(step): continue
            if (step, r['id']) not in by: order.append((step, r['id']))
            by[(step, r['id'])].append(r['completion'])
    rows = load_domain('arithmetic', 'train')
    pos = {x: i for i, x in enumerate(rows['id'])}
    tr = build_trainer('caopd-sdft', f'{a.run}/warmup/checkpoint', 'arithmetic', output_dir='/tmp/replay_first_digit',
                       train_dataset=rows.select([pos[i] for _, i in order]), max_steps=a.steps, learning_rate=a.lr,
                       warmup_steps=0, num_generations=4, per_device_train_batch_size=16, gradient_accumulation_steps=1,
                       max_completion_length=64, teacher_model_kind='base', shuffle_dataset=False, report_to='none',
                       distillation_alpha=a.alpha,
                       logging_steps=1, save_strategy='no', use_cpu=True, bf16=False, gradient_checkpointing=False,
                       disable_tqdm=True)
    script_rollouts(tr, lambda rows_, s: [by[(tr.state.global_step + 1, r['id'])][(s + i) % 4] for i, r in enumerate(rows_)])
    if a.part != 'full':
        from caopd import trainer as T
        inner = T.caopd_loss
        def part(*args, **kw):
            out = inner(*args, **kw)
            return out._replace(loss=out.calibration_loss if a.part == 'calibration' else out.capability_loss)
        T.caopd_loss = part
    tok = tr.processing_class
    zero, one = (tok.encode(d, add_special_tokens=False)[0] for d in '01')
    probes = load_domain('arithmetic', 'validation').select(range(16))
    level = lambda i: max(len(x) for x in re.findall(r'\d+', i))
    def probe() -> str:
        shares = collections.defaultdict(list)
        with torch.no_grad():
            for r in probes:
                text = student_text(tok, r, up_to_confidence(r))
                p = tr.model(tok(text, return_tensors='pt', add_special_tokens=False).input_ids).logits[0, -1].softmax(-1)
                shares[level(r['id'])].append(p[one].item() / (p[zero].item() + p[one].item()))
        return ' '.join(f'L{k} {sum(v) / len(v):.2f}' for k, v in sorted(shares.items()))
    class Probe(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            mus = [r['mu_hat'] for r in rs if r['step'] == batch_of(state.global_step)]
            print(f"step {state.global_step} (the run's step {batch_of(state.global_step)}, mean target "
                  f"{sum(mus) / len(mus):.2f}): p('1') share {probe()}", flush=True)
    tr.add_callback(Probe())
    print(f"{a.part} loss, alpha {a.alpha}, lr {a.lr}; start: p('1') share {probe()}", flush=True)
    tr.train()


if __name__ == '__main__': main()
