"""Why the 135M student states only 0 or 1 (issue 30, item 3): does the rewrite reach the second digit, what does the start say?

Run from the repository root (about 20 minutes on 2 cores shared with another job, the warm-up 3 of them; it warms the
embedded model first, as the README's main command does, unless `--start` names a warmed checkpoint):

    .ci/env python tests/benchmarks/graded_confidence.py [--start RUN/warmup/checkpoint] > tests/benchmarks/graded_confidence.txt

The output committed beside it, `tests/benchmarks/graded_confidence.txt`, is this script's output (issue 30; the
warm-up's final loss equals that of the committed run figures/runs/cpu/arithmetic-caopd-sdft-0, whose start it is).
`nbs/07a_warmup.ipynb` ("Why the start says 0 or 1") quotes it.

(a) Does the teacher follow a graded target past its first digit? The warmed start (the teacher of CaOPD-SDFT's first
step: the EMA teacher starts as the student) samples one rollout of each of the first `--n` (32) of the run's 64
training prompts (seed 0; the levels take turns, so 8 of each), sampled as the cpu preset's rollouts (temperature 0.6,
top-p 0.95, top-k 50, 64 tokens). Each rollout is rewritten to
a target value v with `caopd.confidence.rewrite_completion_ids` (what `CaOPDSDFTTrainer._revise_completions` does),
and the teacher's input is built by the trainer itself (`build_trainer('caopd-sdft', ...)`): TRL's
`DemonstrationTeacherContextBuilder.build` with the demonstration rewritten by `rewrite_confidence` to v, exactly as
`CaOPDSDFTTrainer._prepare_training_batch` does; the student's input is the trainer's prompt ids and the same
completion. At each position of the value (I_c) it reads the next-token distribution: the first digit (after
`Confidence: `), the first decimal (after `Confidence: 0.`) and, for two decimals, the second (after `0.6` for 0.67).
Printed per v: the mean probability of the digit the target has there, of every digit token, the share of rollouts
whose most probable token is the target's digit, and the most probable tokens on average; for the teacher (shown the
demonstration with v) and the student (no demonstration).

(b) Which values does the start state, and why. The committed runs' evaluations before training
(`figures/runs/cpu/arithmetic-*/eval/before/records.jsonl`; the runs of one seed share their warmed start, so each seed
is counted once) and after training: the stated values and how they were written. Then the habit itself: the
next-token distribution after the gold demonstration's `Confidence: ` and after `Confidence: 0.`, in the student's
context, for SmolLM2-135M-Instruct before any warm-up and for the warmed start, and which demonstration tokens the
value-masked warm-up (`caopd.warmup`, mask 'value') trains.
"""
import argparse, collections, contextlib, glob, json, re, sys, tempfile, time
from pathlib import Path

import torch

VALUES = (0.25, 0.33, 0.5, 0.67, 0.75)  # graded targets (two decimals: `format_confidence(v)`)
CONTROLS = (0.0, 1.0)  # the two values the student states
RUNS = 'figures/runs/cpu'
DIGITS = '0123456789'


def warm_start(out:Path, seed:int, start:str|None=None) -> tuple[str, dict, list, list]:
    "The README main job's warmed start (its settings, `warmup_stage`), made in `out` unless `start` is given; (checkpoint, settings, train rows, warm-up rows)."
    from caopd.runfolder import RunFolder
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.stages import select_prompts, warmup_stage
    settings = resolve_settings(RunArguments(seed=seed, out=str(out)))
    train_rows, warmup_rows, settings = select_prompts(settings)
    if start: return start, settings, list(train_rows), list(warmup_rows)
    t0 = time.time()
    with contextlib.redirect_stdout(sys.stderr):  # the trainer's own log lines
        settings = warmup_stage(settings, warmup_rows, RunFolder(out))
    start, w = settings.start, settings.warmup
    print(f"warmed start: {w['mask']!r} mask, {w['steps']} steps on {w['n_prompts']} {','.join(settings.warmup_domains)} "
          f"training prompts, seed {seed}, {time.time() - t0:.0f} s (preset {settings.preset}, lr "
          f"{w['settings']['learning_rate']}), final loss {w['final_loss']:.6f}")
    return start, settings, list(train_rows), list(warmup_rows)


def rollouts(model, tok, prompt_ids:list[list[int]], seed:int) -> list[list[int]]:
    "One completion per prompt, sampled as the cpu preset's training rollouts (`rollout_sampling='eval'`)."
    from caopd.generation import GENERATE_TOP_K
    torch.manual_seed(seed)
    n = max(map(len, prompt_ids))
    ids = torch.tensor([[tok.pad_token_id] * (n - len(p)) + p for p in prompt_ids])
    att = torch.tensor([[0] * (n - len(p)) + [1] * len(p) for p in prompt_ids])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=att, do_sample=True, temperature=0.6, top_p=0.95,
                             top_k=GENERATE_TOP_K, max_new_tokens=64, pad_token_id=tok.pad_token_id)
    comps = []
    for row in out[:, n:].tolist():
        if tok.eos_token_id in row: row = row[:row.index(tok.eos_token_id) + 1]
        comps.append([i for i in row if i != tok.pad_token_id])
    return comps


def shared_prefix_probs(model, variants:list[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
    "(sequence, positions) variants of one row: the next-token distributions (len(positions), V) at each position, the shared prefix run once."
    seqs = [q[:max(pos)] for q, pos in variants]  # nothing after the last position read is needed
    n = min(min(pos) - 1 for _, pos in variants)  # the prefix holds no position read
    for q in seqs[1:]:
        n = min(n, next((j for j, (a, b) in enumerate(zip(seqs[0], q)) if a != b), len(q)))
    out = []
    with torch.no_grad():
        cache = model(torch.tensor([seqs[0][:n]]), use_cache=True).past_key_values
        for q, (_, pos) in zip(seqs, variants):
            logits = model(torch.tensor([q[n:]]), cache=cache).logits[0]
            cache.crop(n - len(q))  # back to the prefix
            out.append(torch.stack([logits[p - 1 - n].float().softmax(-1) for p in pos]))
    return out


def digit_table(tok, label:str, probs:list[torch.Tensor], want:list[str]) -> list[str]:
    "Lines: per value position, the mean p of the wanted digit, of each digit, the argmax share and the top tokens."
    digit_ids = [tok.convert_tokens_to_ids(d) for d in DIGITS]
    lines = []
    for j, w in enumerate(want):
        p = torch.stack([q[j] for q in probs])  # (rows, V)
        mean = p.mean(0)
        hit = (p.argmax(-1) == tok.convert_tokens_to_ids(w)).float().mean().item()
        top = torch.topk(mean, 4)
        tops = ', '.join(f'{tok.decode([int(i)])!r} {v:.3f}' for v, i in zip(top.values.tolist(), top.indices.tolist()))
        per = ' '.join(f'{d}:{mean[i]:.2f}' for d, i in zip(DIGITS, digit_ids))
        lines.append(f'| {label} | {j + 1} | {w} | {mean[tok.convert_tokens_to_ids(w)]:.3f} | {hit:.2f} | '
                     f'{mean[digit_ids].sum():.3f} | {per} | {tops} |')
    return lines


def part_a(trainer, tok, rows, completions):
    "The teacher's and the student's distribution at each value position, the rollouts rewritten to each target."
    from caopd.confidence import format_confidence, rewrite_completion_ids, rewrite_confidence
    builder, model = trainer.teacher_context_builder, trainer.model.eval()
    prompts = [r['prompt'] for r in rows]
    contexts = [r['privileged_context'] for r in rows]
    student_prompts = trainer._tokenize_prompts(prompts)  # what the trainer feeds the student
    print(f"\n## (a) The teacher and a graded target, at each position of the value\n\n{len(rows)} rollouts of the "
          f"warmed start, one per training prompt (the first {len(rows)} of seed 0's 64), rewritten to each value; the teacher is the warmed start "
          f"shown the demonstration rewritten to the same value (TRL's SDFT teacher-context builder, through "
          f"`build_trainer('caopd-sdft', ...)`); the student sees no demonstration. Position 1 is the value's first digit "
          f"(after `Confidence: `), 2 the first decimal (after `Confidence: 0.`), 3 the second decimal. 'p(target)' is "
          f"the mean probability of the digit the written value has there; 'argmax' the share of rollouts whose most "
          f"probable next token is it; 'digits' the mass on the ten digit tokens.\n")
    print('| value | context | position | target digit | p(target) | argmax | digits | mean p per digit | top tokens (mean p) |')
    print('|---|---|---|---|---|---|---|---|---|')
    summary = {}
    values, seqs = CONTROLS + VALUES, {'teacher': [], 'student': []}  # per value: [(sequence, positions) per row]
    for v in values:
        rew = [rewrite_completion_ids(c, tok, v) for c in completions]
        # the digits of the value (the '.' is left out: no choice is made there)
        keep = [[j for j, m in enumerate(r.confidence_mask) if m and tok.decode([r.ids[j]]) in DIGITS] for r in rew]
        assert all([tok.decode([r.ids[j]]) for j in k] == [d for d in format_confidence(v) if d in DIGITS]
                   for r, k in zip(rew, keep)), v
        ids = torch.nn.utils.rnn.pad_sequence([torch.tensor(r.ids) for r in rew], batch_first=True,
                                              padding_value=tok.pad_token_id)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(r.ids), dtype=torch.long) for r in rew], batch_first=True)
        shown = [rewrite_confidence(builder._stringify_privileged_context(z), v) for z in contexts]
        t = builder.build(prompts, shown, ids, mask)  # the trainer's own call (_prepare_training_batch)
        teacher = []
        for i, r in enumerate(rew):
            row = t['teacher_input_ids'][i][t['teacher_attention_mask'][i].bool()].tolist()  # unpadded prompt + completion
            teacher.append((row, [len(row) - len(r.ids) + j for j in keep[i]]))
        seqs['teacher'].append(teacher)
        seqs['student'].append([(p + r.ids, [len(p) + j for j in k]) for p, r, k in zip(student_prompts, rew, keep)])
    probs = {}  # (context, value) -> [(positions, V) per row]
    for label, per_value in seqs.items():
        for i in range(len(completions)):  # one row at a time: its variants share the prefix up to the value
            for v, pr in zip(values, shared_prefix_probs(model, [per_value[k][i] for k in range(len(values))])):
                probs.setdefault((label, v), []).append(pr)
    summary = {}
    for v in values:
        written = format_confidence(v)
        want = [d for d in written if d in DIGITS]
        for label in ('teacher', 'student'):
            for line in digit_table(tok, label, probs[(label, v)], want): print(f'| {written} ' + line)
            summary[(written, label)] = [torch.stack([q[j] for q in probs[(label, v)]]).mean(0)[tok.convert_tokens_to_ids(w)].item()
                                         for j, w in enumerate(want)]
    print('\nIn short, the teacher\'s mean probability of the target\'s digit at each position (teacher / student):\n')
    print('| value | first digit | first decimal | second decimal |\n|---|---|---|---|')
    for v in CONTROLS + VALUES:
        w = format_confidence(v)
        cells = [f'{a:.3f} / {b:.3f}' for a, b in zip(summary[(w, 'teacher')], summary[(w, 'student')])]
        print(f'| {w} | ' + ' | '.join(cells + [''] * (3 - len(cells))) + ' |')


def stated_text(completion:str) -> str | None:
    "What follows the last `Confidence:` of a completion, stripped (None when there is none)."
    parts = re.split(r'Confidence\s*:', completion)
    return parts[-1].strip() if len(parts) > 1 else None


def part_b_counts():
    "Stated values in the committed runs' evaluations, before (one start per seed) and after training."
    print('\n## (b) What the start states, and why\n')
    befores = collections.defaultdict(dict)  # seed -> {folder: records}
    for f in sorted(glob.glob(f'{RUNS}/arithmetic-*/eval/before/records.jsonl')):
        run = Path(f).parents[2]
        seed = json.loads((run/'settings.json').read_text())['seed']
        befores[seed][run.name] = [json.loads(l) for l in open(f)]
    print(f"Committed evaluations before training ({RUNS}/arithmetic-*/eval/before, "
          f"{sum(len(v) for v in befores.values())} run folders): the runs of one seed share their warmed start")
    print('\n| seed | runs | identical | answers | stated | 0.0 | 1.0 | strictly between | values between | written as |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    total = collections.Counter()
    for seed in sorted(befores):
        folders = befores[seed]
        recs = next(iter(folders.values()))
        same = all([(r['id'], r['completion']) for r in v] == [(r['id'], r['completion']) for r in recs]
                   for v in folders.values())
        c = [r['confidence'] for r in recs if r['confidence'] is not None]
        between = sorted(x for x in c if 0 < x < 1)
        written = collections.Counter(stated_text(r['completion']) for r in recs if r['confidence'] is not None)
        total.update(dict(answers=len(recs), stated=len(c), zero=c.count(0.0), one=c.count(1.0), between=len(between)))
        print(f"| {seed} | {len(folders)} | {'yes' if same else 'no'} | {len(recs)} | {len(c)} | {c.count(0.0)} | "
              f"{c.count(1.0)} | {len(between)} | {', '.join(map(str, between)) or '-'} | "
              f"{', '.join(f'{k!r} x{n}' for k, n in written.most_common(4))} |")
    print(f"| all | | | {total['answers']} | {total['stated']} | {total['zero']} | {total['one']} | {total['between']} | | |")
    print(f"\nAfter training (every committed arithmetic run, {RUNS}/arithmetic-*/eval/after):\n")
    print('| runs | answers | stated | 0.0 | 1.0 | strictly between |\n|---|---|---|---|---|---|')
    recs = [json.loads(l) for f in sorted(glob.glob(f'{RUNS}/arithmetic-*/eval/after/records.jsonl')) for l in open(f)]
    c = [r['confidence'] for r in recs if r['confidence'] is not None]
    n_runs = len(glob.glob(f'{RUNS}/arithmetic-*/eval/after/records.jsonl'))
    print(f'| {n_runs} | {len(recs)} | {len(c)} | {c.count(0.0)} | {c.count(1.0)} | {sum(0 < x < 1 for x in c)} |')
    print(f"\nThe targets CaOPD (SDFT) distilled in those runs (rollouts.jsonl of {RUNS}/arithmetic-caopd-sdft-*: mu_hat, "
          "leave-one-out over K = 4, so 0, 1/3, 2/3 or 1):\n")
    print('| run | rollouts | mu_hat 0 | mu_hat 1 | strictly between |\n|---|---|---|---|---|')
    for f in sorted(glob.glob(f'{RUNS}/arithmetic-caopd-sdft-*/rollouts.jsonl')):
        mu = [json.loads(l)['mu_hat'] for l in open(f)]
        print(f'| {Path(f).parent.name} | {len(mu)} | {mu.count(0.0)} | {mu.count(1.0)} | {sum(0 < m < 1 for m in mu)} |')


def habit(models:dict, tok, rows, build_prompt):
    "The next-token distribution after the gold demonstration's `Confidence: ` and `Confidence: 0.`, student's context."
    from caopd.confidence import rewrite_completion_ids
    print(f'\nThe habit, in the student\'s context (no demonstration shown): the gold demonstration of each of the {len(rows)} '
          'prompts up to `Confidence: ` (position 1) and up to `Confidence: 0.` (position 2), the next token\'s mean '
          'distribution; `0.5` is written there only to locate the positions.\n')
    print('| model | position | p(digits) | mean p per digit | top tokens (mean p) |\n|---|---|---|---|---|')
    digit_ids = [tok.convert_tokens_to_ids(d) for d in DIGITS]
    prompts = build_prompt([r['prompt'] for r in rows])
    demos = [tok.encode(r['privileged_context'], add_special_tokens=False) + [tok.eos_token_id] for r in rows]
    rew = [rewrite_completion_ids(d, tok, 0.5) for d in demos]
    pos = [[j for j, m in enumerate(r.confidence_mask) if m and tok.decode([r.ids[j]]) in DIGITS] for r in rew]
    for name, model in models.items():
        probs = [shared_prefix_probs(model, [(p + r.ids, [len(p) + j for j in k])])[0]
                 for p, r, k in zip(prompts, rew, pos)]
        for j in range(2):
            mean = torch.stack([q[j] for q in probs]).mean(0)
            top = torch.topk(mean, 4)
            tops = ', '.join(f'{tok.decode([int(i)])!r} {v:.3f}' for v, i in zip(top.values.tolist(), top.indices.tolist()))
            per = ' '.join(f'{d}:{mean[i]:.2f}' for d, i in zip(DIGITS, digit_ids))
            print(f'| {name} | {j + 1} | {mean[digit_ids].sum():.3f} | {per} | {tops} |')


def warmup_mask_lesson(tok, warmup_rows):
    "Which tokens of the warm-up's demonstrations carry loss under mask 'value': the value's never do."
    from caopd.warmup import warmup_completion
    values, trained, tokens = collections.Counter(), collections.Counter(), 0
    for r in warmup_rows:
        ids, loss = warmup_completion(r['privileged_context'], tok, 'value')
        tokens += sum(loss)
        values[stated_text(r['privileged_context'])] += 1
        tail = [(tok.decode([i]), f) for i, f in zip(ids, loss)][-5:]  # ' ', value digits, eos
        trained[' '.join(f"{p!r}{'' if f else '(no loss)'}" for p, f in tail)] += 1
    print(f"\nThe value-masked warm-up ({len(warmup_rows)} demonstrations, {tokens} completion tokens with loss): "
          f"the demonstrations say {dict(values)}; their last tokens and loss: {dict(trained)}. The value's tokens "
          "carry no loss, so after the warm-up the model says what it already tended to say there.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--start', default=None, help="a warmed checkpoint (default: warm one as the README's main command)")
    ap.add_argument('--work', default=None, help='folder for the warm-up (default: a temporary one)')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--n', type=int, default=32, help="training prompts (the run's first n)")
    a = ap.parse_args()
    from caopd.baselines import build_trainer
    from caopd.models import load_model
    from caopd.run_config import trl_config_fields
    from caopd.runfolder import RunFolder
    work = Path(a.work or tempfile.mkdtemp(prefix='graded-confidence-'))
    start, settings, train_rows, warmup_rows = warm_start(work, a.seed, a.start)
    cfg = trl_config_fields(settings, RunFolder(work))
    with contextlib.redirect_stdout(sys.stderr):
        trainer = build_trainer('caopd-sdft', start, 'arithmetic', train_dataset=train_rows, output_dir=work/'trainer', **cfg)
    rows = train_rows[:a.n]
    tok = trainer.processing_class
    print(f"trainer: {type(trainer).__name__}, teacher template {trainer.args.teacher_prompt_template!r}, "
          f"K = {trainer.num_generations}, target decimals k = {trainer._confidence_k()} (the runs' mu_hat is j/3: "
          f"'0.33', '0.67')")
    comps = rollouts(trainer.model.eval(), tok, trainer._tokenize_prompts([r['prompt'] for r in rows]), a.seed)
    from caopd.confidence import parse_confidence
    said = collections.Counter(parse_confidence(tok.decode(c, skip_special_tokens=True)) for c in comps)
    print(f"the {len(comps)} rollouts state: {dict(said.most_common())}")
    part_a(trainer, tok, rows, comps)
    part_b_counts()
    base, _ = load_model('smollm2-135m-instruct', dtype='float32')
    habit({'SmolLM2-135M-Instruct, no warm-up': base.eval(), 'warmed start': trainer.model.eval()}, tok, rows,
          trainer._tokenize_prompts)
    warmup_mask_lesson(tok, warmup_rows)


if __name__ == '__main__': main()
