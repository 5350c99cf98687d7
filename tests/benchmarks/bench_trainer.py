"""Time per optimisation step of CaOPD over its backbone (TRL's SDPO or SDFT trainer), in one run, on the same batches.

Run from the repository root (its output is committed beside it). On a quiet 2-core machine it should take about 5
minutes (the README main command's warm-up takes 30-36 s there); the committed run took 53 minutes on 2 cores shared
with other jobs (its warm-up 370 s), which slows both trainers alike:

    .ci/env python tests/benchmarks/bench_trainer.py > tests/benchmarks/bench_trainer.txt
    .ci/env python tests/benchmarks/bench_trainer.py --start RUN/warmup/checkpoint   # a warmed start you already have

On a GPU it trains as `caopd.train` does there (bf16 mixed precision, cuDNN's SDPA off where `caopd.guards` switches
it off); `bench_trainer_h200.txt` is one H200's run (`--prompts 8 --k 8 --steps 4 --rounds 4`, from `tests/gpu/checks.sh`'s
machine; figures/gpu-checks/2026-11-26-h200-1fd45a6/README.md says what it shows).

A script, not a pytest test: it prints seconds and completion tokens per step and RATIOS measured within this one run
(the machine may be busy), never asserting a time; the paper says CaOPD's cost is "nearly indistinguishable" from its
backbone's (target <= 1.05).

**The warmed start, on the laptop domain.** CaOPD rewrites the confidence segment of every rollout; a rollout that
states none gets one appended (about seven tokens). The un-warmed 135M model states none in its short rollouts, so an
earlier version of this benchmark (chemistry prompts, 32-token rollouts) trained CaOPD on longer completions than its
backbone and measured 1.11-1.22 for a difference of which CaOPD's own work was 0.02% of a step. It now starts where
the README's main command starts: the embedded model after the `cpu` preset's format warm-up (`caopd.stages.warmup_stage`:
8 SFT steps of 32 training prompts, the confidence value masked; made in a temporary folder unless `--start` names
one), trained on that run's integer-addition training prompts with its rollout sampling (temperature 0.6, top-p
0.95, top-k 50) and up to 64 completion tokens. Its rollouts already state a confidence, so the rewrite only changes
the value ('1.0' -> '0.67': a token or two). Each step's **completion tokens** (the completion mask of the batch its
loss runs on, after CaOPD's rewrite: the student's and the teacher's forward and backward passes run over all of them;
SDPO's loss then keeps the rollouts that have a successful sibling, CaOPD's every rollout, at the same cost) are
printed beside its seconds, and the seconds per completion token, so that a ratio compares like with like;
`--model tiny` runs it on a random tiny model without a warm-up (a smoke test of the script only).

How it keeps the comparison fair:
- the backbone is TRL's own trainer, configured like CaOPD (same loss, teacher, lengths, batch, sampling);
- the learning rate is 0 and every run starts from the same seed, so both trainers sample exactly the same rollouts
  from the same prompts at every step (checked and printed), and do the same work except CaOPD's;
- runs alternate (backbone, CaOPD, CaOPD, backbone, ...) so that a busy machine slows both alike; the first
  `--warmup` steps of each run are dropped; the columns are median seconds per step, the median over rounds of the
  ratio of adjacent runs, and the ratio of median process CPU time per step (less sensitive to other processes).
It also reports the time spent inside CaOPD's own steps (scoring, mu_hat, rewriting, logging), which is far less
noisy than the ratio.
"""
import argparse, os, shutil, statistics, sys, tempfile, time, warnings
from pathlib import Path

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore')
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from transformers import PrinterCallback, TrainerCallback, set_seed
from transformers.utils import logging as hf_logging

from trainer_helpers import tiny_model_dir
from caopd.domains import SDFT_TEACHER_TEMPLATE, SDPO_REPROMPT_TEMPLATE, SDPO_SOLUTION_TEMPLATE
from caopd.generation import GENERATE_TOP_K
from caopd.models import load_tokenizer
from caopd.config import CaOPDSDFTConfig, CaOPDSDPOConfig
from caopd.trainer import CaOPDSDFTTrainer, CaOPDSDPOTrainer, CaOPDMixin
from caopd.verifiers import integer_reward
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
    "Record the sampled rollouts, the completion tokens each step trains on, and the time spent in CaOPD's own methods."
    trainer.rollouts, trainer.step_tokens, trainer.caopd_seconds = [], [], 0.0
    generate = trainer._generate
    def _generate(prompt_ids):
        out = generate(prompt_ids); trainer.rollouts.append([list(c) for c in out[1]]); return out
    trainer._generate = _generate
    compute_loss = trainer.compute_loss
    def _compute_loss(model, inputs, *a, **kw):  # one call per optimisation step here (no gradient accumulation)
        if model.training: trainer.step_tokens.append(int(inputs['completion_mask'].sum()))
        return compute_loss(model, inputs, *a, **kw)
    trainer.compute_loss = _compute_loss
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
    "A CaOPD trainer or its backbone, configured alike (the cpu preset's rollout sampling and completion length)."
    gpu = torch.cuda.is_available()  # as caopd.train runs: bf16 mixed precision on a GPU, float32 on CPU
    common = dict(output_dir=out, use_cpu=not gpu, bf16=gpu, gradient_checkpointing=False, report_to='none',
                  disable_tqdm=True, logging_steps=1, save_strategy='no', per_device_train_batch_size=a.prompts * a.k,
                  num_generations=a.k, max_completion_length=a.max_completion_length, max_steps=a.steps + a.warmup,
                  seed=0, learning_rate=0.0, warmup_steps=0, distillation_mode='topk_logits', distillation_topk=100,
                  distillation_alpha=1.0, teacher_model_kind='ema', teacher_update_rate=0.05, max_prompt_length=2048,
                  weight_decay=0.01, generation_kwargs=dict(temperature=0.6, top_p=0.95, top_k=GENERATE_TOP_K))
    if method == 'sdpo':
        templates = dict(solution_template=SDPO_SOLUTION_TEMPLATE, reprompt_template=SDPO_REPROMPT_TEMPLATE)
        if caopd: return CaOPDSDPOTrainer(model, integer_reward, CaOPDSDPOConfig(**common), train_dataset=dataset,
                                          processing_class=tok)
        return SDPOTrainer(model, integer_reward, SDPOConfig(**common, **templates), train_dataset=dataset,
                           processing_class=tok)
    if caopd: return CaOPDSDFTTrainer(model, integer_reward, CaOPDSDFTConfig(**common), train_dataset=dataset,
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
    wall, cpu, tokens, ratios = {False: [], True: []}, {False: [], True: []}, {False: [], True: []}, []
    caopd_seconds, same = 0.0, True
    for rnd in range(a.rounds):
        order = (False, True) if rnd % 2 == 0 else (True, False)
        rollouts, this = {}, {}
        for caopd in order:
            tr = instrument(build(method, caopd, model, tok, dataset, a, f'{tmp}/{method}-{caopd}-{rnd}'))
            timer = run(tr)
            wall[caopd] += timer.times[a.warmup:]; cpu[caopd] += timer.cpu[a.warmup:]
            tokens[caopd] += tr.step_tokens[a.warmup:]
            this[caopd] = sum(timer.times[a.warmup:])
            rollouts[caopd] = tr.rollouts
            if caopd: caopd_seconds += tr.caopd_seconds
            del tr
        ratios.append(this[True] / this[False])  # adjacent runs: a busy spell slows both
        same &= rollouts[False] == rollouts[True]
    med = lambda d, c: statistics.median(d[c])
    n_caopd_steps = a.rounds * (a.steps + a.warmup)
    per_token = {c: sum(wall[c]) / sum(tokens[c]) for c in (False, True)}  # seconds per completion token trained on
    return dict(method=method, backbone=med(wall, False), caopd=med(wall, True), ratio=statistics.median(ratios),
                cpu_ratio=med(cpu, True) / med(cpu, False), same=same, caopd_own=caopd_seconds / n_caopd_steps,
                tokens_backbone=statistics.mean(tokens[False]), tokens_caopd=statistics.mean(tokens[True]),
                per_token_ratio=per_token[True] / per_token[False], steps=len(wall[True]))


def warm_start(tmp:str, a) -> tuple:
    "(checkpoint, training rows, what it is): the README main command's warmed start and training prompts (seed 0)."
    import contextlib
    from caopd.runfolder import RunFolder
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.stages import select_prompts, warmup_stage
    settings = resolve_settings(RunArguments(seed=0, out=f'{tmp}/run'))
    train_rows, warmup_rows, settings = select_prompts(settings)
    if a.start: return a.start, train_rows, f'warmed start {a.start} (given)'
    t0 = time.time()
    with contextlib.redirect_stdout(sys.stderr):  # the warm-up trainer's own log lines
        settings = warmup_stage(settings, warmup_rows, RunFolder(f'{tmp}/run'))
    start, w = settings.start, settings.warmup
    return start, train_rows, (f"warmed start: the cpu preset's warm-up ({w['mask']!r} mask, {w['steps']} steps on "
                               f"{w['n_prompts']} training prompts, seed 0), made here in {time.time() - t0:.0f} s, "
                               f"final loss {w['final_loss']:.6f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--model', choices=['embedded', 'tiny'], default='embedded',
                   help="embedded: the warmed embedded model (the README's start); tiny: a random tiny model, no warm-up")
    p.add_argument('--start', default=None, help='a warmed checkpoint to start from (RUN/warmup/checkpoint) instead of warming up here')
    p.add_argument('--method', choices=['sdpo', 'sdft', 'both'], default='both')
    p.add_argument('--steps', type=int, default=2, help='measured steps per run')
    p.add_argument('--warmup', type=int, default=1, help='steps dropped at the start of each run')
    p.add_argument('--rounds', type=int, default=2, help='runs of each trainer (alternating order)')
    p.add_argument('--prompts', type=int, default=2, help='prompts per step')
    p.add_argument('--k', type=int, default=4, help='rollouts per prompt (K)')
    p.add_argument('--max-completion-length', type=int, default=64)
    a = p.parse_args()
    hf_logging.set_verbosity_error(); hf_logging.disable_progress_bar()
    from caopd.guards import guard_attention
    attention = guard_attention()  # cuDNN's SDPA off where it returns NaN gradients, as caopd.train does (both trainers)
    device = (f"{torch.cuda.get_device_name()} (bf16, cuDNN SDPA {'off' if attention['cudnn_sdpa_switched_off'] else 'on'})"
              if torch.cuda.is_available() else f'CPU, torch threads {torch.get_num_threads()}')
    tmp = tempfile.mkdtemp(prefix='bench_trainer_')
    t0 = time.time()
    if a.model == 'embedded': model, rows, start = warm_start(tmp, a)
    else:
        _, rows, _ = warm_start(tmp, argparse.Namespace(start='unused'))  # the same prompts, no warm-up
        model, start = tiny_model_dir(f'{tmp}/tiny'), 'a random tiny model (no warm-up): a smoke test of the script'
    tok = load_tokenizer(model)
    dataset = rows.select(range(a.prompts * (a.steps + a.warmup)))
    print(start)
    print(f'{a.prompts} integer-addition training prompts x K={a.k} rollouts of <= {a.max_completion_length} tokens per '
          f'step, {a.rounds} runs of {a.warmup}+{a.steps} steps per trainer (the first {a.warmup} dropped), on {device}\n',
          flush=True)
    print('| method | backbone s/step | CaOPD s/step | ratio | CPU-time ratio | completion tokens/step: backbone | '
          'CaOPD | tokens ratio | s/token ratio | CaOPD own s/step | own/backbone | same rollouts |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for method in (['sdpo', 'sdft'] if a.method == 'both' else [a.method]):
        try: r = bench(method, model, tok, dataset, a, tmp)
        except BaseException: shutil.rmtree(tmp, ignore_errors=True); raise
        print(f"| {method} | {r['backbone']:.3f} | {r['caopd']:.3f} | {r['ratio']:.3f} | {r['cpu_ratio']:.3f} | "
              f"{r['tokens_backbone']:.1f} | {r['tokens_caopd']:.1f} | {r['tokens_caopd'] / r['tokens_backbone']:.3f} | "
              f"{r['per_token_ratio']:.3f} | {r['caopd_own']:.4f} | {r['caopd_own'] / r['backbone']:.5f} | {r['same']} |",
              flush=True)
    print(f"\nratio: median over rounds of CaOPD's seconds over the backbone's in adjacent runs; tokens: completion "
          f"tokens each measured step trained on (mean over {r['steps']} steps of each trainer); s/token ratio: "
          f"seconds per completion token, CaOPD over backbone. {time.time() - t0:.0f} s in all.")
    shutil.rmtree(tmp, ignore_errors=True)  # the warmed checkpoint and the trainers' folders (about 1 GB)


if __name__ == '__main__':
    main()
