"""Time per optimisation step of CaOPD over its backbone (TRL's SDPO or SDFT trainer), in one run, on the same batches.

Run from the repository root:
    .ci/env python tests/benchmarks/bench_trainer.py [--model embedded|tiny] [--method sdpo|sdft|both] [--steps 1]
The defaults (embedded SmolLM2-135M, 1 prompt x K=4 rollouts of <= 32 tokens, 2 rounds) take about 10-20 minutes on
two CPU cores: a step is dominated by the student's forward and backward pass on the ~370-token sequences.

A script, not a pytest test: it prints seconds per step and the ratio CaOPD / backbone (the paper: "nearly
indistinguishable"; target <= 1.05). How it keeps the comparison fair:
- the backbone is TRL's own trainer, configured like CaOPD (same loss, teacher, lengths, batch);
- the learning rate is 0 and every run starts from the same seed, so both trainers sample exactly the same rollouts
  from the same prompts at every step (checked and printed), and do the same work except CaOPD's;
- runs alternate (backbone, CaOPD, CaOPD, backbone, ...) so that a busy machine slows both alike; the first
  `--warmup` steps of each run are dropped; the columns are median seconds per step, the median over rounds of the
  ratio of adjacent runs, and the ratio of median process CPU time per step (less sensitive to other processes).
It also reports the time spent inside CaOPD's own steps (scoring, mu_hat, rewriting, logging), which is far less
noisy than the ratio. The rest of the difference is the revised completions themselves: a rollout without a confidence
segment gets one appended (about seven tokens), so the loss's forward and backward passes see slightly longer
completions; with short completions from a model that rarely writes a confidence (the tiny and embedded models here)
this is a visible share of a step, with the paper's long responses that already end in a confidence it is not.
"""
import argparse, os, statistics, sys, tempfile, time, warnings
from pathlib import Path

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore')
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from transformers import PrinterCallback, TrainerCallback, set_seed
from transformers.utils import logging as hf_logging

from trainer_helpers import chemistry_rows, tiny_model_dir
from caopd.data import SDFT_TEACHER_TEMPLATE, SDPO_REPROMPT_TEMPLATE, SDPO_SOLUTION_TEMPLATE
from caopd.models import EMBEDDED_MODEL, embedded_model_path, load_tokenizer
from caopd.trainer import CaOPDSDFTConfig, CaOPDSDFTTrainer, CaOPDSDPOConfig, CaOPDSDPOTrainer, CaOPDMixin
from caopd.verifiers import mcq_reward
from trl.experimental.sdft import SDFTConfig, SDFTTrainer
from trl.experimental.sdpo import SDPOConfig, SDPOTrainer


class StepTimes(TrainerCallback):
    "Wall and process CPU time of each optimisation step (between consecutive step ends, the first from the start)."
    def on_train_begin(self, args, state, control, **kw):
        self.times, self.cpu, self.last = [], [], (time.perf_counter(), time.process_time())
    def on_step_end(self, args, state, control, **kw):
        now = (time.perf_counter(), time.process_time())
        self.times.append(now[0] - self.last[0]); self.cpu.append(now[1] - self.last[1]); self.last = now


def instrument(trainer):
    "Record the sampled rollouts, and the time spent in CaOPD's own methods."
    trainer.rollouts, trainer.caopd_seconds = [], 0.0
    generate = trainer._generate
    def _generate(prompt_ids):
        out = generate(prompt_ids); trainer.rollouts.append([list(c) for c in out[1]]); return out
    trainer._generate = _generate
    if isinstance(trainer, CaOPDMixin):
        names = ['_empirical_confidence', '_log_rollout_metrics', '_revise_completions']
        if isinstance(trainer, CaOPDSDFTTrainer): names.append('_score_rollouts')
        for name in names:
            f = getattr(trainer, name)
            def timed(*a, _f=f, **kw):
                t = time.perf_counter(); out = _f(*a, **kw); trainer.caopd_seconds += time.perf_counter() - t
                return out
            setattr(trainer, name, timed)
    return trainer


def build(method:str, caopd:bool, model:str, tok, dataset, a, out:str):
    "A CaOPD trainer or its backbone, configured alike."
    common = dict(output_dir=out, use_cpu=True, bf16=False, gradient_checkpointing=False, report_to='none',
                  disable_tqdm=True, logging_steps=1, save_strategy='no', per_device_train_batch_size=a.prompts * a.k,
                  num_generations=a.k, max_completion_length=a.max_completion_length, max_steps=a.steps + a.warmup,
                  seed=0, learning_rate=0.0, warmup_steps=0, distillation_mode='topk_logits', distillation_topk=100,
                  distillation_alpha=1.0, teacher_model_kind='ema', teacher_update_rate=0.05, max_prompt_length=2048,
                  weight_decay=0.01)
    if method == 'sdpo':
        templates = dict(solution_template=SDPO_SOLUTION_TEMPLATE, reprompt_template=SDPO_REPROMPT_TEMPLATE)
        if caopd: return CaOPDSDPOTrainer(model, mcq_reward, CaOPDSDPOConfig(**common), train_dataset=dataset,
                                          processing_class=tok)
        return SDPOTrainer(model, mcq_reward, SDPOConfig(**common, **templates), train_dataset=dataset, processing_class=tok)
    if caopd: return CaOPDSDFTTrainer(model, mcq_reward, CaOPDSDFTConfig(**common), train_dataset=dataset,
                                      processing_class=tok)
    return SDFTTrainer(model, SDFTConfig(**common, teacher_prompt_template=SDFT_TEACHER_TEMPLATE), train_dataset=dataset,
                       processing_class=tok)


def run(trainer, seed:int=0) -> StepTimes:
    "Train from `seed`; the step times."
    timer = StepTimes(); trainer.add_callback(timer); trainer.remove_callback(PrinterCallback)
    set_seed(seed); trainer.train()
    trainer.remove_callback(timer)
    return timer


def bench(method:str, model:str, tok, dataset, a, tmp:str) -> dict:
    wall, cpu, ratios = {False: [], True: []}, {False: [], True: []}, []
    caopd_seconds, same = 0.0, True
    for rnd in range(a.rounds):
        order = (False, True) if rnd % 2 == 0 else (True, False)
        rollouts, this = {}, {}
        for caopd in order:
            tr = instrument(build(method, caopd, model, tok, dataset, a, f'{tmp}/{method}-{caopd}-{rnd}'))
            timer = run(tr)
            wall[caopd] += timer.times[a.warmup:]; cpu[caopd] += timer.cpu[a.warmup:]
            this[caopd] = sum(timer.times[a.warmup:])
            rollouts[caopd] = tr.rollouts
            if caopd: caopd_seconds += tr.caopd_seconds
            del tr
        ratios.append(this[True] / this[False])  # adjacent runs: a busy spell slows both
        same &= rollouts[False] == rollouts[True]
    med = lambda d, c: statistics.median(d[c])
    n_caopd_steps = a.rounds * (a.steps + a.warmup)
    return dict(method=method, backbone=med(wall, False), caopd=med(wall, True), ratio=statistics.median(ratios),
                cpu_ratio=med(cpu, True) / med(cpu, False), same=same, caopd_own=caopd_seconds / n_caopd_steps)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--model', choices=['embedded', 'tiny'], default='embedded')
    p.add_argument('--method', choices=['sdpo', 'sdft', 'both'], default='both')
    p.add_argument('--steps', type=int, default=1, help='measured steps per run')
    p.add_argument('--warmup', type=int, default=1, help='steps dropped at the start of each run')
    p.add_argument('--rounds', type=int, default=2, help='runs of each trainer (alternating order)')
    p.add_argument('--prompts', type=int, default=1, help='prompts per step')
    p.add_argument('--k', type=int, default=4, help='rollouts per prompt (K)')
    p.add_argument('--max-completion-length', type=int, default=32)
    a = p.parse_args()
    hf_logging.set_verbosity_error(); hf_logging.disable_progress_bar()
    tmp = tempfile.mkdtemp(prefix='bench_trainer_')
    if a.model == 'embedded': model, tok = str(embedded_model_path()), load_tokenizer(EMBEDDED_MODEL)
    else:
        model = tiny_model_dir(f'{tmp}/tiny')
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(model)
    dataset = chemistry_rows(a.prompts * (a.steps + a.warmup))
    print(f'model {a.model}, {a.prompts} prompts x K={a.k} rollouts of <= {a.max_completion_length} tokens per step, '
          f'{a.rounds} runs of {a.warmup}+{a.steps} steps per trainer, torch threads {torch.get_num_threads()}', flush=True)
    print(f"{'method':8} {'backbone s/step':>16} {'CaOPD s/step':>13} {'ratio':>7} {'CPU-time ratio':>15} "
          f"{'CaOPD own s/step':>17} {'own/backbone':>13} {'same rollouts':>14}")
    for method in (['sdpo', 'sdft'] if a.method == 'both' else [a.method]):
        r = bench(method, model, tok, dataset, a, tmp)
        print(f"{method:8} {r['backbone']:16.3f} {r['caopd']:13.3f} {r['ratio']:7.3f} {r['cpu_ratio']:15.3f} "
              f"{r['caopd_own']:17.4f} {r['caopd_own'] / r['backbone']:13.5f} {str(r['same']):>14}", flush=True)


if __name__ == '__main__':
    main()
