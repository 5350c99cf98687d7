"""The `paper` preset against the paper: the TRL config each method's dry run builds for Qwen3-8B on the paper's node,
checked row by row against Table 6 (`data/paper/table6_hyperparameters.csv`), Table 9 (`table9_cost_summary.csv`) and the
sampling sentences of the text (`data/paper/sampling.csv`), each transcribed once; and every sampling row on one
scripted step of each CaOPD trainer built with the preset's fields. A change that drifts from the paper fails here."""
import dataclasses, re
from pathlib import Path

import pandas as pd
import pytest

from caopd.arguments import RunArguments
from caopd.confidence import format_confidence
from caopd.estimators import target_denominator
from caopd.methods import TRAINABLE
from caopd.train import dry_run

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT/'data'/'paper'
TEX = Path(__file__).resolve().parents[2]/'shared'/'paper'/'caopd.tex'
SDFT_FAMILY, SDPO_FAMILY = ('sdft', 'caopd-sdft', 'caopd-sdft-tasc'), ('sdpo', 'caopd-sdpo')


def _rows(name):
    return pd.read_csv(PAPER/name, keep_default_na=False, dtype=str)


TABLE6 = {p: g['value'].tolist() for p, g in _rows('table6_hyperparameters.csv').groupby('parameter', sort=False)}
SAMPLING = {(r.backbone, r.quantity): r.value for r in _rows('sampling.csv').itertuples()}
COST = {(r.method, r.metric): r.printed for r in _rows('table9_cost_summary.csv').itertuples()}
K = int(TABLE6['Number of rollouts for empirical target (K)'][0])


def one(parameter):
    "Table 6's single value of a row, as a number where it is one."
    (v,) = TABLE6[parameter]
    try: return float(v)
    except ValueError: return v


@pytest.fixture(scope='module')
def plans():
    return {m: dry_run(RunArguments(model='Qwen3-8B', method=m, preset='paper', dry_run=True), verbose=False)
            for m in TRAINABLE}


def test_transcriptions_are_the_papers():
    "Every sentence the sampling table rests on is in the paper's text, word for word (whitespace aside)."
    if not TEX.is_file(): pytest.skip(f'{TEX} is not here')
    tex = re.sub(r'\s+', ' ', TEX.read_text())
    for r in _rows('sampling.csv').itertuples():
        assert re.sub(r'\s+', ' ', r.quote) in tex, f'sampling.csv: {r.quantity!r} quotes text the paper does not hold'


@pytest.mark.parametrize('method', TRAINABLE)
def test_table6(plans, method):
    "The rows of Table 6 every method shares: lengths, batch, engine, temperatures, optimiser."
    c, s = plans[method]['config'], plans[method]['settings']
    assert c.max_completion_length == one('Max response length')
    assert getattr(c, 'max_prompt_length', one('Max prompt length')) == one('Max prompt length')  # GRPO has no such field
    questions = c.per_device_train_batch_size * c.gradient_accumulation_steps * s.world_size // c.num_generations
    assert questions == s.prompts_per_step == one('Question batch size')
    assert c.steps_per_generation == c.gradient_accumulation_steps  # mini batch = question batch: one update a batch
    assert questions == one('Mini batch size')
    assert c.use_vllm and one('Inference engine') == 'vLLM'
    assert c.temperature == one('Rollout Temperature') and 'temperature' not in (c.generation_kwargs or {})
    assert s.eval_samples in {int(v) for v in TABLE6['Number of rollouts']}
    assert (s.eval_temperature, s.eval_top_p) == (one('Temperature'), one('Top-p'))
    assert 'adamw' in str(c.optim).lower() and one('Optimizer') == 'AdamW'
    assert c.learning_rate in {float(v) for v in TABLE6['Learning rate']}
    assert (c.warmup_steps, c.weight_decay, c.max_grad_norm) == (one('Warmup steps'), one('Weight decay'),
                                                                  one('Gradient Clip Norm'))
    assert (c.bf16, c.use_cpu, c.dataloader_pin_memory) == (True, False, True)  # the node's config, not this machine's
    assert one('Thinking Mode') == 'False' and c.chat_template_kwargs == {'enable_thinking': False}


@pytest.mark.parametrize('method', SDFT_FAMILY + SDPO_FAMILY)
def test_distillation_loss(plans, method):
    "Table 6's 'Distillation Loss (SDPO / CaOPD)' rows, for every self-distillation method."
    c = plans[method]['config']
    assert (c.distillation_mode, c.distillation_topk) == ('topk_logits', one('Top-K distillation'))
    assert c.distillation_alpha == 1.0 and one('Distillation divergence') == 'Reverse-KL'
    assert (c.teacher_model_kind, c.teacher_update_rate) == ('ema', one('Teacher-EMA update rate'))
    assert c.distillation_is_clip == one('Rollout importance sampling clip')


@pytest.mark.parametrize('method', SDFT_FAMILY)
def test_sdft_sampling(plans, method):
    "SDFT: one trajectory distilled per prompt; CaOPD adds K rollouts apart, whose mean is the target (j/K)."
    c = plans[method]['config']
    assert c.num_generations == int(SAMPLING['sdft', 'distilled_per_prompt'])
    if not c.calibrate:  # SDFT itself draws nothing more
        assert c.num_confidence_rollouts is None
        return
    assert SAMPLING['sdft', 'rollouts_apart_for_mu_hat'] == 'K' and COST['caopd-sdft', 'extra_rollout_sampling'] == 'K per prompt'
    assert (c.confidence_sampling, c.num_confidence_rollouts) == ('separate', K)
    assert SAMPLING['any', 'estimator'] == 'mean' and c.confidence_estimator == 'frequency'
    k = target_denominator(c.num_confidence_rollouts, c.confidence_estimator, c.confidence_prior, c.confidence_decimals)
    levels = {format_confidence(j / K, k) for j in range(K + 1)}
    assert len(levels) == int(SAMPLING['any', 'target_levels_at_K_8']) and '0.125' in levels


@pytest.mark.parametrize('method', SDPO_FAMILY)
def test_sdpo_sampling(plans, method):
    "SDPO: the group of K is distilled and reused for mu_hat with the plain mean; nothing is drawn apart."
    c = plans[method]['config']
    assert SAMPLING['sdpo', 'distilled_per_prompt'] == 'K' and c.num_generations == K
    assert SAMPLING['sdpo', 'rollouts_apart_for_mu_hat'] == '0' and COST['caopd-sdpo', 'extra_rollout_sampling'] == 'None (reused)'
    assert c.confidence_sampling == 'reuse' and c.num_confidence_rollouts is None
    assert not c.confidence_leave_one_out and c.confidence_estimator == 'frequency'


@pytest.mark.parametrize('method', ('grpo', 'rlcr'))
def test_rl_group(plans, method):
    assert plans[method]['config'].num_generations == K


def test_drift_fails(plans):
    "The check is not vacuous: a preset that distilled the K rollouts under SDFT would fail it."
    c = plans['caopd-sdft']['config']
    c.num_generations = 8
    try:
        with pytest.raises(AssertionError): test_sdft_sampling(plans, 'caopd-sdft')
    finally: c.num_generations = 1


# Every experiment the paper reports has a runnable configuration that plans on the paper's node
GRID = 'nbs/grids/paper.yaml'


@pytest.fixture(scope='module')
def grid():
    from caopd.grid import read_grid
    return dict(read_grid(GRID)['runs'])


def test_grid_covers_table6_sets(grid):
    "Table 6's set-valued rows are each run: every learning rate, 8 and 16 validation samples (the preset's value included)."
    from caopd.arguments import PRESETS
    value = lambda params, k: params.get(k, PRESETS['paper'][k])
    assert {value(p, 'learning_rate') for p in grid.values()} == {float(v) for v in TABLE6['Learning rate']}
    assert {value(p, 'eval_samples') for p in grid.values()} == {int(v) for v in TABLE6['Number of rollouts']}
    ks = {value(p, 'K') for p in grid.values() if p.get('method') == 'caopd-sdft' and p.get('model') == 'Qwen3-8B'}
    assert {1, 2, 4, 8, 16, 32} <= ks  # Figure 6's K, 8 the main run's


def test_grid_covers_ood_and_ct_for_both_models(grid):
    "Tables 7-8: OOD and CT runs of SDFT and CaOPD (SDFT) for Qwen3-8B and Olmo-3-7B-Instruct, in both directions."
    for model in ('Qwen3-8B', 'Olmo-3-7B-Instruct'):
        for method in ('sdft', 'caopd-sdft'):
            for train, test in (('chemistry', 'tooluse'), ('tooluse', 'chemistry')):
                runs = [p for p in grid.values() if (p.get('model'), p.get('method'), p.get('domain')) == (model, method, train)]
                assert any(p.get('eval_domain') == test for p in runs), (model, method, 'OOD', train, test)
                ct = [p for p in grid.values() if (p.get('model'), p.get('method'), p.get('domain')) == (model, method, test)
                      and p.get('init_from')]
                assert len(ct) == 1 and ct[0]['init_from'].endswith(f"{model.split('-Instruct')[0].lower()}-{train}-{method}")


def test_every_paper_run_plans_on_the_node(grid):
    "Each run of the paper's grid fits four H200s as configured, Qwen3-14B and 32B included (FSDP2 CPU offload)."
    from caopd.grid import plan_row
    assert any('Qwen3-32B' in n for n in grid) and any('Qwen3-14B' in n for n in grid)
    for name in grid:
        r = plan_row(name, grid[name], fixes=False)
        assert r['fits'] and r['node'] == '4 x H200', (name, r['plan'].summary())


def test_api_grid_is_table10():
    "The API grid evaluates exactly Table 10's models other than the paper's own, with Table 6's validation settings."
    from caopd.grid import read_grid
    g = read_grid('nbs/grids/api.yaml')
    assert g['notebook'] == 'nbs/evaluate.ipynb'
    table10 = _rows('table10_api_chemistry.csv')
    assert sorted(p['model'] for _, p in g['runs']) == sorted(set(table10.loc[table10['setting'] != 'Ours', 'model']))
    for _, p in g['runs']:
        assert (p['backend'], p['domain'], p['limit'], p['n_samples']) == ('openai', 'chemistry', 0, 8)
        assert p['max_new_tokens'] == one('Max response length')


# The paper preset's trainers, not only their configs: one scripted step of each CaOPD backbone
RIGHT = (3, 5)  # of the K rollouts behind mu_hat, right ones for the first and the second question


def caopd_fields(config) -> dict:
    "What decides mu_hat and its targets: every field CaOPD adds to (or sets for) the backbone's config, but the optimiser's."
    from caopd.config import CaOPDConfig, CaOPDSDFTConfig
    from trl.experimental.sdft import SDFTConfig
    from trl.experimental.sdpo import SDPOConfig
    backbone = SDFTConfig if isinstance(config, CaOPDSDFTConfig) else SDPOConfig
    names = {f.name for f in dataclasses.fields(CaOPDConfig)} | \
        ({f.name for f in dataclasses.fields(config)} - {f.name for f in dataclasses.fields(backbone)})
    names -= {'learning_rate', 'warmup_steps', 'weight_decay', 'max_prompt_length'}
    return {n: getattr(config, n) for n in sorted(names)}


@pytest.fixture(scope='module')
def paper_steps(plans, tmp_path_factory):
    """One training step of CaOPD-SDFT and of CaOPD-SDPO, built with every CaOPD field of the paper preset's config (K,
    the sampling scheme, the estimator, leave-one-out, decimals), on the tiny model and two Chemistry questions, its
    rollouts scripted (`caopd.testing.script_rollouts`). Of the K rollouts behind mu_hat RIGHT are right; SDFT's distilled
    rollout is right for the first question and wrong for the second, so a mu_hat that counted it would move."""
    from caopd.config import CaOPDSDFTConfig, CaOPDSDPOConfig
    from caopd.data import load_domain
    from caopd.sources import fixtures_dir
    from caopd.models import tiny_model
    from caopd.testing import script_rollouts
    from caopd.trainer import CaOPDSDFTTrainer, CaOPDSDPOTrainer
    from caopd.verifiers import mcq_reward
    tmp = tmp_path_factory.mktemp('paper_steps')
    model, tok = tiny_model(seed=0, save_to=tmp/'tiny')
    data = load_domain('chemistry', 'train', data_dir=fixtures_dir()).select(range(2))
    a, b = data['answer']
    wrong = {x: 'A' if x != 'A' else 'B' for x in (a, b)}
    text = lambda letter: (f"<reasoning>\nThe product is an amide.\n</reasoning>\n<answer>\n{letter}\n</answer>\n"
                           f"Confidence: 0.95")
    scored = [text(a)] * RIGHT[0] + [text(wrong[a])] * (K - RIGHT[0]) + [text(b)] * RIGHT[1] + [text(wrong[b])] * (K - RIGHT[1])
    steps = {}
    for backbone, method, trainer_cls, cfg_cls in (('sdft', 'caopd-sdft', CaOPDSDFTTrainer, CaOPDSDFTConfig),
                                                   ('sdpo', 'caopd-sdpo', CaOPDSDPOTrainer, CaOPDSDPOConfig)):
        fields = caopd_fields(plans[method]['config'])
        per_prompt = fields['num_generations']  # the distilled rollouts of a question
        args = cfg_cls(**fields, output_dir=str(tmp/method), use_cpu=True, bf16=False, report_to='none',
                       disable_tqdm=True, save_strategy='no', max_completion_length=16, seed=0,
                       per_device_train_batch_size=2 * per_prompt)
        trainer = trainer_cls(str(tmp/'tiny'), mcq_reward, args, train_dataset=data, processing_class=tok)
        distilled = [text(a)] * per_prompt + [text(wrong[b])] * per_prompt
        script_rollouts(trainer, [distilled, scored] if backbone == 'sdft' else [scored])
        trainer.model.train()
        batch = trainer._prepare_training_batch([data[0]] * per_prompt + [data[1]] * per_prompt)
        n = batch['raw_completion_lengths'].int().tolist()
        steps[backbone] = dict(trainer=trainer, batch=batch, distilled=distilled, scored=scored, fields=fields,
                               texts=[tok.decode(batch['completion_ids'][i, :n[i]], skip_special_tokens=True)
                                      for i in range(len(n))],
                               calls=[len(p) for p in trainer.scripted_prompt_ids])
    return steps


def _count(value) -> int: return K if value == 'K' else int(value)

def _distilled_per_prompt(step, value):
    "The batch trains on 2 questions x this many rollouts, the first generation call's."
    assert len(step['texts']) == step['calls'][0] == 2 * _count(value), step['calls']

def _rollouts_apart_for_mu_hat(step, value):
    "The generation calls after the distilled one draw this many rollouts a question, scored only."
    assert sum(step['calls'][1:]) == 2 * _count(value), step['calls']

def _estimator(step, value):
    "mu_hat is the plain mean of the K rollouts' rewards, for every distilled row (no leave-one-out, no prior)."
    assert value == 'mean'
    mu = [r / K for r in RIGHT for _ in range(len(step['texts']) // 2)]
    assert step['batch']['mu_hat'].tolist() == pytest.approx(mu), step['batch']['mu_hat'].tolist()
    assert [(t['successes'], t['rollouts']) for t in step['trainer'].confidence_targets] == \
        [(r, K) for r in RIGHT for _ in range(len(step['texts']) // 2)]

def _target_levels_at_K_8(step, value):
    "The targets are j/K, written with the decimals that keep K + 1 levels apart; the completions carry them."
    k = step['trainer']._confidence_k()
    assert k == K == 8 and len({format_confidence(j / K, k) for j in range(K + 1)}) == int(value)
    assert [t.splitlines()[-1] for t in step['texts']] == \
        [f'Confidence: {format_confidence(r / K, k)}' for r in RIGHT for _ in range(len(step['texts']) // 2)]
    assert 'Confidence: 0.375' in step['texts'][0]  # 3/8, not rounded to 0.38

def _distilled_apart_from_mu_hat_rollouts(step, value):
    "yes: the distilled rollouts are drawn apart, and their own outcome is not in mu_hat; no: they are the K scored ones."
    drop_target = lambda texts: [t.rsplit('\n', 1)[0] for t in texts]
    own = step['distilled'] if value == 'yes' else step['scored']
    assert drop_target(step['texts']) == drop_target(own)
    if value == 'yes':  # the first question's distilled rollout is right, the second's wrong: mu_hat would be 4/9, 5/9
        assert step['batch']['mu_hat'].tolist()[0] == pytest.approx(RIGHT[0] / K)
    else: assert value == 'no' and len(step['texts']) == 2 * K

SAMPLING_CHECKS = {'distilled_per_prompt': _distilled_per_prompt, 'rollouts_apart_for_mu_hat': _rollouts_apart_for_mu_hat,
                   'estimator': _estimator, 'target_levels_at_K_8': _target_levels_at_K_8,
                   'distilled_apart_from_mu_hat_rollouts': _distilled_apart_from_mu_hat_rollouts}


def test_every_sampling_row_on_the_trainers(paper_steps):
    "Each row of sampling.csv holds on a step of the paper preset's trainer of its backbone ('any': of both)."
    rows = _rows('sampling.csv')
    unchecked = sorted(set(rows['quantity']) - set(SAMPLING_CHECKS))
    assert not unchecked, f'sampling.csv: no check on the trainers for {unchecked}; add one to SAMPLING_CHECKS'
    for r in rows.itertuples():
        for backbone in (('sdft', 'sdpo') if r.backbone == 'any' else (r.backbone,)):
            try: SAMPLING_CHECKS[r.quantity](paper_steps[backbone], r.value)
            except AssertionError as e:
                raise AssertionError(f'sampling.csv row {r.backbone},{r.quantity},{r.value} fails on {backbone}: {e}') from e


def test_the_trainer_check_is_not_vacuous(paper_steps):
    "A row that said SDPO draws its distilled rollouts apart, or SDFT counts the distilled one, fails on the trainer."
    with pytest.raises(AssertionError): _distilled_apart_from_mu_hat_rollouts(paper_steps['sdpo'], 'yes')
    with pytest.raises(AssertionError): _distilled_apart_from_mu_hat_rollouts(paper_steps['sdft'], 'no')
    with pytest.raises(AssertionError): _rollouts_apart_for_mu_hat(paper_steps['sdpo'], 'K')


def test_table6_values_are_written_once():
    """Table 6's numbers are in its transcription only: code takes them from `caopd.paper.TABLE6` (defaults, help texts,
    messages), so no clause of the package that cites Table 6 spells one of its numbers."""
    from caopd.paper import TABLE6
    numbers = set()
    for f in dataclasses.fields(TABLE6):
        for v in (getattr(TABLE6, f.name) if isinstance(getattr(TABLE6, f.name), tuple) else (getattr(TABLE6, f.name),)):
            if isinstance(v, (int, float)) and not isinstance(v, bool): numbers |= {str(v), f'{v:g}', repr(v)}
    number = '|'.join(map(re.escape, sorted(numbers, key=len, reverse=True)))
    spelled = re.compile(r'Table 6[^;)"\n]*?(?<![\w.{])(' + number + r')(?![\w.])')  # a number in the clause citing it
    code = sorted((ROOT/'caopd').glob('*.py'))
    assert len(code) > 30  # the package's modules, wherever the checkout is
    found = [f'{p.name}:{i}: {line.strip()}' for p in code
             if p.name not in ('paper.py', '_modidx.py')
             for i, line in enumerate(p.read_text().splitlines(), 1) if 'Table 6' in line and spelled.search(line)]
    assert not found, 'Table 6 values typed again (read them from caopd.paper.TABLE6):\n' + '\n'.join(found)


# What each default that is a Table 6 value becomes when the transcription says otherwise (the text above: before)
CHANGED = dict(eval_temperature=0.123, eval_top_p=0.456, distillation_topk=7, thinking_mode=True,
               distillation_divergence='Forward-KL', is_clip=5.0, K=3)


def test_table6_defaults_are_read_not_retyped():
    """Each default of the package that is a Table 6 value follows `caopd.paper.TABLE6`: in a process whose TABLE6 says
    otherwise before the rest of caopd is imported, the sampling defaults of the three generation backends, the loss's
    divergence and top-K, the configs' fields and the chat template's thinking switch all change with it."""
    import json, subprocess, sys
    script = f"""
import dataclasses, inspect, json
import caopd.paper as paper
paper.TABLE6 = dataclasses.replace(paper.TABLE6, **{CHANGED!r})
from caopd import arguments, config, generation, loss, models
arg = lambda f, name: inspect.signature(f).parameters[name].default
field = lambda c, name: next(f.default for f in dataclasses.fields(c) if f.name == name)
got = dict(eval_temperature=[arg(f, 'temperature') for f in (generation.generate, generation.generate_vllm, generation.generate_openai)]
                             + [arguments.PRESETS['paper']['eval_temperature']],
           eval_top_p=[arg(f, 'top_p') for f in (generation.generate, generation.generate_vllm, generation.generate_openai)]
                       + [arguments.PRESETS['paper']['eval_top_p']],
           distillation_topk=[arg(loss.per_token_divergence, 'topk'), arg(loss.caopd_loss, 'topk'),
                              field(config.CaOPDSDFTConfig, 'distillation_topk'), field(config.CaOPDSDPOConfig, 'distillation_topk')],
           alpha=[arg(loss.per_token_divergence, 'alpha'), arg(loss.caopd_loss, 'alpha'),
                  field(config.CaOPDSDFTConfig, 'distillation_alpha'), field(config.CaOPDSDPOConfig, 'distillation_alpha')],
           is_clip=[arg(loss.caopd_loss, 'is_clip')],
           K=[arguments.PRESETS['paper']['K']],
           thinking=[models.chat_template_kwargs('Qwen3-8B')['enable_thinking']])
print(json.dumps(got))
"""
    got = json.loads(subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True).stdout)
    want = dict(eval_temperature=0.123, eval_top_p=0.456, distillation_topk=7, alpha=0.0, is_clip=5.0, K=3, thinking=True)
    for name, values in got.items():
        assert values == [want[name]] * len(values), (name, values)
