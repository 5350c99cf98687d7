"""Does the teacher still read mu_hat from its context? The first confidence digit, with and without the demonstration.

Run from the repository root: `.ci/env python tests/benchmarks/teacher_copying.py RUN_FOLDER [--n 8]`, on a finished
CaOPD-SDFT run folder of the laptop domain (it needs `warmup/checkpoint` and a checkpoint under `trainer/`).

CaOPD-SDFT's calibration signal reaches the first digit of the confidence only through the teacher: the student's
prefix `... Confidence: ` is the same whatever value is written after it, so the target is whatever the teacher
predicts there, given the demonstration whose value was rewritten to mu_hat. This prints, for the warmed start, the
student at the run's last checkpoint and its EMA teacher, the mean probability of the digits '0' and '1' at that
position, with the demonstration rewritten to 0.0, 1.0 and 0.33 (the teacher's context), and without it (the
student's context). A teacher that copies puts its mass on the written value's first digit; one that does not gives
the student no calibration signal. Measured on a 16-step run of the cpu preset (issue 19): the warmed start copies
(p('0') 0.93 with 0.0 written, p('1') 0.99 with 1.0), the EMA teacher after 16 steps much less (p('0') 0.58 with 0.0
written) while its student says '1' with p 0.98 whatever it is shown.
"""
import argparse, glob
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from caopd.confidence import rewrite_confidence
from caopd.config import CaOPDSDFTConfig
from caopd.data import load_domain
from caopd.trainer import EMA_TEACHER_FILE

VALUES = (0.0, 1.0, 0.33)


def load(path, teacher_file=None):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    if teacher_file: model.load_state_dict(load_file(teacher_file), strict=False)  # tied embeddings: lm_head only
    return model


def up_to_confidence(row:dict, completion:str|None=None) -> str:
    "`completion` (default: the row's gold demonstration) cut after its last `Confidence: `, where the value's first digit goes."
    return (row['privileged_context'] if completion is None else completion).rsplit('Confidence:', 1)[0] + 'Confidence: '


def student_text(tok, row:dict, completion:str) -> str:
    "What the student reads: the prompt, then `completion`."
    return tok.apply_chat_template(row['prompt'], add_generation_prompt=True, tokenize=False) + completion


def teacher_text(tok, row:dict, template:str, value:float, completion:str) -> str:
    "What the teacher reads: the prompt with the demonstration, its confidence rewritten to `value`, then `completion`."
    shown = template.format(prompt=row['prompt'][-1]['content'],
                            privileged_context=rewrite_confidence(row['privileged_context'], value, 4))
    return tok.apply_chat_template(row['prompt'][:-1] + [{'role': 'user', 'content': shown}], add_generation_prompt=True,
                                   tokenize=False) + completion


def digit_probs(model, tok, rows, template):
    "Rows of (value written, p('0'), p('1') with the demonstration, p('0'), p('1') without it)."
    zero, one = (tok.encode(d, add_special_tokens=False)[0] for d in '01')
    out = []
    for r in rows:
        completion = up_to_confidence(r)  # the gold reasoning and answer
        student = student_text(tok, r, completion)
        for v in VALUES:
            teacher = teacher_text(tok, r, template, v, completion)
            with torch.no_grad():
                pt, ps = (model(tok(t, return_tensors='pt', add_special_tokens=False).input_ids).logits[0, -1].softmax(-1)
                          for t in (teacher, student))
            out.append((v, pt[zero].item(), pt[one].item(), ps[zero].item(), ps[one].item()))
    return np.array(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('run', help='a finished CaOPD-SDFT run folder of the arithmetic domain')
    ap.add_argument('--n', type=int, default=8, help='training prompts (every 8th of the first 8n)')
    a = ap.parse_args()
    run = Path(a.run)
    last = max(glob.glob(str(run/'trainer'/'checkpoint-*')), key=lambda p: int(p.rsplit('-', 1)[1]))
    tok = AutoTokenizer.from_pretrained(run/'warmup'/'checkpoint')
    rows = load_domain('arithmetic', 'train').select(range(0, 8 * a.n, 8))
    template = CaOPDSDFTConfig(output_dir='/tmp/unused', use_cpu=True).teacher_prompt_template
    models = {'warmed start': (run/'warmup'/'checkpoint', None), f'student @ {Path(last).name}': (last, None),
              f'EMA teacher @ {Path(last).name}': (last, Path(last)/EMA_TEACHER_FILE)}
    print("| model | value written | p('0') shown it | p('1') shown it | p('0') not shown | p('1') not shown |")
    print('|---|---|---|---|---|---|')
    for name, (path, teacher) in models.items():
        res = digit_probs(load(path, teacher), tok, rows, template)
        for v in VALUES:
            m = res[res[:, 0] == v].mean(0)
            print(f'| {name} | {v} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.3f} | {m[4]:.3f} |')


if __name__ == '__main__': main()
