"""How far from this machine's limit the laptop path runs: the CPU's own fp32 matrix-product throughput at the torch
thread count the runs use (the ceiling), then the README main job's evaluation (its generation and its readout) and one
of its CaOPD (SDFT) training steps, each with its seconds, tokens, model FLOPs and the fraction of the ceiling. The
evaluation runs three ways, in one run: each batch's prompts whole with transformers' sampling and cache (the code before
issue 64), then with their shared prefix computed once (`caopd.generation.shared_prefix_cache`), then also drawing with
`caopd.generation.NucleusSampler` into a `growing_cache` (today's code); their answers are compared with each other and
with the committed run of the same settings, word for word. The training step runs twice from the same seed: with
transformers' own `generate` for the rollouts, and within `caopd.generation.fast_generation` (as `caopd.train` trains on
CPU); their rollouts are compared word for word, and the seconds of the step's rollouts (its `generate` calls) printed.

    .ci/env python tests/benchmarks/limit.py > tests/benchmarks/limit.txt

Run from the repository root on a quiet machine (about 13 minutes on 2 cores: the cpu preset's format warm-up first, as
the main job starts from it, then the measured parts). A script, not a test: it prints seconds and ratios of one run.

Each way of the evaluation runs twice, in the order A B C C B A, and its seconds are the mean of its two runs: a
machine whose speed drifts during the run (the readout, the same work each time, has taken from 10.5 to 13.2 s in one
run) slows each way alike. The generation's seconds are its batches' (`caopd.generation._generate_batches`: the
`generate` calls, the readout within them taken out); the evaluation's whole seconds (the model's loading, the
scoring, the report and its figures too) are printed after the table.

How the FLOPs are counted, from the modules that run (global forward hooks, so the EMA teacher's passes count too):
- every `nn.Linear` call: 2 x rows x in x out, the language-model head included (padding rows included: the work done);
- every attention call: 4 x batch x heads x head_dim x query tokens x key tokens (QK^T and AV over the whole key
  length: what SDPA computes with an explicit mask), key tokens = the cache's length before the call + the new tokens;
- a call made with gradients on (the student's forward in training) counts three times: its backward is taken as
  twice its forward, the usual rule;
- elementwise work (norms, rotary embeddings, softmax, sampling) is not counted.
`useful` counts only the real tokens of the generation of whole prompts (each prompt's own tokens and each answer's, no
padding, no rows that finished early) through the linear layers: what a perfect batching of whole prompts would do.
"""
import argparse, contextlib, json, os, platform, shutil, subprocess, sys, tempfile, time, warnings
from pathlib import Path

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore')
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_trainer: the main job's warmed start and trainer

import torch

# the evaluation's ways, each the caopd.generation switches it runs with: the code before issue 64, then its steps
WAYS = {', prompts whole': dict(PREFIX_CACHE=False, SAMPLER=False, GROWING_CACHE=False),
        ', shared prefix once': dict(PREFIX_CACHE=True, SAMPLER=False, GROWING_CACHE=False),
        ', shared prefix, NucleusSampler, growing cache': dict(PREFIX_CACHE=True, SAMPLER=True, GROWING_CACHE=True)}
NOW = list(WAYS)[-1]  # today's code
ORDER = [*WAYS, *reversed(WAYS)]  # each way twice, the second time in reverse: a machine that slows down slows all alike
TRAINING_WAYS = (', transformers\' generate', ', fast_generation')  # the rollouts of the training step
COUNTED = {}  # phase -> dict(flops=forward FLOPs + (forward + backward) of passes with gradients, tokens=the model's tokens)
PHASE = [None]  # the phase the hooks count into (None: not counted)


def count(flops:float=0.0, tokens:int=0):
    if PHASE[0] is None: return
    c = COUNTED.setdefault(PHASE[0], dict(flops=0.0, tokens=0))
    c['flops'] += 3 * flops if torch.is_grad_enabled() else flops  # a backward is twice its forward
    c['tokens'] += tokens


def linear_hook(module, args, out):
    if isinstance(module, torch.nn.Linear):
        count(2.0 * (args[0].numel() // module.in_features) * module.in_features * module.out_features)


def attention_hook(module, args, kwargs, out):
    h = kwargs.get('hidden_states', args[0] if args else None)
    cache = kwargs.get('past_key_values', kwargs.get('past_key_value'))
    b, t = h.shape[:2]
    cfg = module.config
    head_dim = getattr(cfg, 'head_dim', None) or cfg.hidden_size // cfg.num_attention_heads
    keys = cache.get_seq_length(module.layer_idx) if cache is not None else t  # after the call: the new keys are in
    count(4.0 * b * cfg.num_attention_heads * head_dim * t * keys, b * t if module.layer_idx == 0 else 0)


def attach(model, hooks:dict):
    "Count the attention of `model`'s layers (once per module)."
    for m in model.modules():
        if type(m).__name__.endswith('Attention') and hasattr(m, 'layer_idx') and id(m) not in hooks:
            hooks[id(m)] = m.register_forward_hook(attention_hook, with_kwargs=True)


def ceiling() -> list:
    "[(shape, GFLOP/s)] of fp32 matrix products: the model's linear layers' shapes and square ones; the best of 5 each."
    torch.manual_seed(0)
    shapes = [(2048, 576, 1536), (2048, 1536, 576), (64, 576, 1536), (16, 576, 49152), (1024, 1024, 1024), (2048, 2048, 2048)]
    out = []
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(2): a @ b
        best = float('inf')
        for _ in range(5):
            t0 = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t0)
        out.append((f'{m}x{k} @ {k}x{n}', 2.0 * m * k * n / best / 1e9))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--start', default=None, help="a warmed checkpoint (RUN/warmup/checkpoint) instead of warming up here")
    p.add_argument('--committed', default='figures/runs/cpu/arithmetic-caopd-sdft-0',
                   help="the committed run of the same settings (the laptop grid's seed 0 of CaOPD (SDFT)): its answers before training are compared")
    a = p.parse_args()
    import dataclasses
    import transformers
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging
    import caopd, caopd.generation, caopd.readout
    import bench_trainer
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.evaluation import evaluate
    from caopd.models import chat_template_kwargs, load_tokenizer
    from caopd.pipeline import run_eval_arguments
    from caopd.runfolder import RunFolder
    from caopd.stages import check_start
    hf_logging.set_verbosity_error(); hf_logging.disable_progress_bar()

    threads, t_all = torch.get_num_threads(), time.perf_counter()
    commit = subprocess.run(['git', 'describe', '--always', '--dirty'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {threads} threads")
    peaks = ceiling()
    top = max(g for _, g in peaks)
    print(f"\nthe ceiling: fp32 matrix products at {threads} threads (the best of 5 each), GFLOP/s")
    for shape, g in peaks: print(f"  {shape}: {g:.1f}")
    print(f"  ceiling: {top:.1f} GFLOP/s (the best of them)", flush=True)

    tmp = tempfile.mkdtemp(prefix='caopd-limit-')
    try:
        t0 = time.perf_counter()
        start, rows, what = bench_trainer.warm_start(tmp, argparse.Namespace(start=a.start))
        print(f"\n{what} ({time.perf_counter() - t0:.0f} s)", flush=True)
        settings = resolve_settings(RunArguments(seed=0, out=f'{tmp}/run'))
        settings = check_start(settings, RunFolder(settings.out))  # the readout's decimals, as the main job records them

        attention, seconds = {}, {}
        linear = torch.nn.modules.module.register_module_forward_hook(linear_hook)
        load = transformers.AutoModelForCausalLM.from_pretrained
        def loaded(*args, **kw):  # every model loaded from here on has its attention counted
            m = load(*args, **kw); attach(m, attention); return m
        transformers.AutoModelForCausalLM.from_pretrained = loaded
        real = caopd.readout.transformers_readouts
        def timed(model, *args, **kw):  # the readout: its own phase, inside the evaluation's
            outer, t = PHASE[0], time.perf_counter()
            PHASE[0] = outer.replace('generation', 'readout')
            try: return real(model, *args, **kw)
            finally: seconds['readout'] += time.perf_counter() - t; PHASE[0] = outer
        caopd.readout.transformers_readouts = timed  # evaluate imports it where it reads, so it finds this one
        real_batches = caopd.generation._generate_batches
        def batches(*args, **kw):  # the generation proper: its batches' generate calls (the readout runs within them)
            t = time.perf_counter()
            try: return real_batches(*args, **kw)
            finally: seconds['batches'] += time.perf_counter() - t
        caopd.generation._generate_batches = batches  # generate calls it by its module's name

        # the evaluation of the start, as the main job's pipeline calls it, in each way of WAYS
        args = dataclasses.replace(run_eval_arguments(settings, start, f'{tmp}/eval'), backend='transformers')
        records, again, runs = {}, {}, {way: [] for way in WAYS}  # runs: each run's (generation, readout, evaluation) seconds
        for n, way in enumerate(ORDER):
            for switch, on in WAYS[way].items(): setattr(caopd.generation, switch, on)
            seconds['readout'] = seconds['batches'] = 0.0
            PHASE[0], t0 = 'generation' + way, time.perf_counter()
            got, _ = evaluate(start, args=dataclasses.replace(args, out=f'{tmp}/eval-{n}'), progress=False)
            if way in records: again[way] = sum(x['completion'] == y['completion'] for x, y in zip(records[way], got))
            records.setdefault(way, got)
            runs[way].append((seconds['batches'] - seconds['readout'], seconds['readout'], time.perf_counter() - t0))
            PHASE[0] = None
        for way, got in runs.items():  # the mean of its runs, placed symmetrically in ORDER: a steady drift cancels
            for k, name in enumerate(('generation', 'readout', 'evaluation')):
                seconds[name + way] = sum(r[k] for r in got) / len(got)
        for switch, on in WAYS[NOW].items(): setattr(caopd.generation, switch, on)
        caopd.readout.transformers_readouts, caopd.generation._generate_batches = real, real_batches

        # one step of CaOPD (SDFT) as the main job trains: its prompts per step, K and rollout length (the second step,
        # the first's one-time costs aside)
        class Steps(TrainerCallback):
            def __init__(self, way): self.way = way
            def on_step_begin(self, args, state, control, **k):
                self.t, PHASE[0] = time.perf_counter(), f'step {state.global_step + 1}{self.way}'
            def on_step_end(self, args, state, control, **k):
                seconds[f'step {state.global_step}{self.way}'], PHASE[0] = time.perf_counter() - self.t, None
        tok = load_tokenizer(start)
        ns = argparse.Namespace(prompts=settings.prompts_per_step, k=settings.K, steps=1, warmup=1,
                                max_completion_length=settings.max_completion_length)
        rollouts, real_generate = {}, transformers.GenerationMixin.generate
        def generate_timed(self, *args, **kw):  # a step's rollouts: its generate calls, whichever way they are made
            t = time.perf_counter()
            try: return real_generate(self, *args, **kw)
            finally: seconds[f'rollouts {PHASE[0]}'] = seconds.get(f'rollouts {PHASE[0]}', 0.0) + time.perf_counter() - t
        transformers.GenerationMixin.generate = generate_timed
        for way in TRAINING_WAYS:
            trainer = bench_trainer.build('sdft', True, start, tok, rows.select(range(2 * settings.prompts_per_step)), ns,
                                          f'{tmp}/train{len(rollouts)}')
            for m in [trainer.model, *(v for v in vars(trainer).values() if isinstance(v, torch.nn.Module))]: attach(m, attention)
            trainer.add_callback(Steps(way))
            fast = caopd.generation.fast_generation(trainer.model) if way == TRAINING_WAYS[1] else contextlib.nullcontext()
            with contextlib.redirect_stdout(sys.stderr), fast: bench_trainer.run(trainer)
            rollouts[way] = [r['completion'] for r in trainer.confidence_targets]
        transformers.GenerationMixin.generate = real_generate
        linear.remove()
        for h in attention.values(): h.remove()
        transformers.AutoModelForCausalLM.from_pretrained = load

        kw = chat_template_kwargs(settings.model, tok)
        n_prompt = sum(len(tok(tok.apply_chat_template(r['prompt'], tokenize=False, add_generation_prompt=True, **kw),
                               add_special_tokens=False)['input_ids']) for r in records[NOW])
        n_answer = sum(len(tok(r['completion'], add_special_tokens=False)['input_ids']) for r in records[NOW])
        head = trainer.model.get_output_embeddings()
        n_head = head.in_features * head.out_features
        n_body = sum(m.in_features * m.out_features for m in trainer.model.modules() if isinstance(m, torch.nn.Linear)) - n_head
        useful = 2.0 * n_body * (n_prompt + n_answer) + 2.0 * n_head * n_answer  # the head only where a token is chosen
    finally: shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nthe main job's parts: {settings.model} from its warmed start; {len(records[NOW])} test answers (<= "
          f"{settings.eval_max_new_tokens} new tokens, batches of {settings.eval_batch_size}); training "
          f"{settings.prompts_per_step} prompts x K={settings.K} rollouts of <= {settings.max_completion_length} tokens a "
          f"step; {n_body / 1e6:.1f} M weights in the decoder's linear layers, {n_head / 1e6:.1f} M in the head\n")
    print('| part | seconds | tokens through the model | GFLOP | GFLOP/s | of the ceiling |')
    print('|---|---|---|---|---|---|')
    def row(name, secs, tokens, flops, runs=1):  # tokens and flops counted over `runs` runs: per run
        tokens, flops = (tokens // runs if isinstance(tokens, int) else tokens), flops / runs
        print(f"| {name} | {secs:.1f} | {tokens} | {flops / 1e9:.0f} | {flops / secs / 1e9:.1f} | {flops / secs / 1e9 / top:.1%} |")
    before = list(WAYS)[0]
    for way in WAYS:
        g = COUNTED.get('generation' + way, dict(flops=0.0, tokens=0))
        row(f'evaluation: generation{way}, as computed (padding included)', seconds['generation' + way], g['tokens'], g['flops'], 2)
        if way == before:  # the work of a perfect batching of whole prompts
            row(f'evaluation: generation{way}, useful (each prompt and answer token once)', seconds['generation' + way],
                f"{n_prompt} prompt + {n_answer} answer", useful)
        r = COUNTED.get('readout' + way, dict(flops=0.0, tokens=0))
        row(f'evaluation: readout{way}', seconds['readout' + way], r['tokens'], r['flops'], 2)
    def last_step(way):  # the last step's key: 'step N, way'
        return max((k for k in seconds if k.startswith('step ') and k.endswith(way)), key=lambda k: int(k.split()[1].rstrip(',')))
    for way in TRAINING_WAYS:
        last = last_step(way)
        s = COUNTED[last]
        row(f'training: {last} (rollouts, teacher and student forward, backward, optimizer)', seconds[last], s['tokens'], s['flops'])
    print(f"\nprompt tokens are {n_prompt / (n_prompt + n_answer):.0%} of the generation's useful tokens")
    for way in list(WAYS)[1:]:
        print(f"the generation{way} took {seconds['generation' + way] / seconds['generation' + before]:.2f} of the time of "
              f"the generation{before} ({seconds['generation' + before] / seconds['generation' + way]:.2f}x as fast)")
    print("each way ran twice (" + ', '.join(w.lstrip(', ') for w in ORDER) + "); its seconds above are the mean of its two runs, "
          "whose generation took " + ', '.join(f"{r[0][0]:.1f} and {r[1][0]:.1f} s{w}" for w, r in runs.items())
          + "; the second run's answers the first's: " + ', '.join(f"{again[w]} of {len(records[w])}{w}" for w in WAYS))
    print("the evaluation in all (the generation, the readout, the model's loading, the scoring, the report and its figures): "
          + ', '.join(f"{seconds['evaluation' + w]:.1f} s{w}" for w in WAYS))
    steps = [seconds[last_step(w)] for w in TRAINING_WAYS]
    made = [seconds[f'rollouts {last_step(w)}'] for w in TRAINING_WAYS]
    print(f"the training step{TRAINING_WAYS[1]} took {steps[1] / steps[0]:.2f} of the time of the step{TRAINING_WAYS[0]}, "
          f"its rollouts (generate) {made[1]:.1f} s against {made[0]:.1f} s ({made[0] / made[1]:.2f}x as fast); the two "
          f"trainings' rollouts: {sum(x == y for x, y in zip(*rollouts.values()))} of {len(rollouts[TRAINING_WAYS[0]])} the "
          f"same word for word")
    committed = [json.loads(l) for l in (ROOT/a.committed/'eval'/'before'/'records.jsonl').read_text().splitlines() if l.strip()]
    for label, ref in [*((f'the generation{w}', records[w]) for w in list(WAYS)[:-1]), (f'the committed run {a.committed}', committed)]:
        pairs = list(zip(records[NOW], ref, strict=True))
        same = sum(x['id'] == y['id'] and x['completion'] == y['completion'] for x, y in pairs)
        diff = max((abs(x['expected_confidence'] - y['expected_confidence']) for x, y in pairs
                    if x.get('expected_confidence') is not None and y.get('expected_confidence') is not None), default=0)
        print(f"today's answers against {label}'s: {same} of {len(pairs)} the same word for word, the expected "
              f"confidence within {diff:.1e}")
    print(f"{time.perf_counter() - t_all:.0f} s in all.")


if __name__ == '__main__': main()
