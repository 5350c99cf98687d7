"Every method of `caopd.baselines.TRAINERS` builds by name and trains for two steps on the tiny model, on CPU."
import math

import pytest
import torch
from trl import GRPOTrainer

from caopd.baselines import TRAINERS, build_trainer
from caopd.data import load_domain
from caopd.sources import fixtures_dir
from caopd.models import tiny_model
from caopd.testing import script_rollouts

# two optimiser steps, one prompt per step with two completions of at most 8 tokens: seconds per method on 2 cores
QUICK = dict(max_steps=2, per_device_train_batch_size=2, num_generations=2, max_completion_length=8, logging_steps=1,
             save_strategy='no', report_to='none', disable_tqdm=True, gradient_checkpointing=False, seed=0)

# Scripted rollouts for the methods that learn only from rewards: GRPO, RLCR and plain SDPO (which distils only from a
# successful sibling). A random model never writes a well-formed answer, so their rewards, advantages and gradients
# would all be 0. These two completions of a prompt score differently under every reward (on rows whose gold letter is
# A or B, exactly one is right). SDFT and the CaOPD methods learn from random rollouts too, so they sample for real.
SCRIPTED = ('grpo', 'rlcr', 'sdpo')
SCRIPTS = {
    'chemistry': ['<reasoning>\nAn amine.\n</reasoning>\n<answer>\nA\n</answer>\nConfidence: 0.9',
                  '<reasoning>\nAn amide.\n</reasoning>\n<answer>\nB\n</answer>\nConfidence: 0.6'],
    'tooluse': ['Thought: look it up.\nAction: getDetails\nAction Input: {}\nConfidence: 0.9',
                'Thought: look it up.\nAction: search\nAction Input: {"q": "x"}\nConfidence: 0.1'],
}


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    "A random two-layer Llama with the embedded model's tokenizer, saved: TRL rebuilds SDFT/SDPO teachers from the path."
    path = tmp_path_factory.mktemp('baselines') / 'tiny'
    tiny_model(seed=0, save_to=path)
    return str(path)


def fixtures(domain):
    rows = load_domain(domain, 'train', data_dir=fixtures_dir())
    if domain == 'chemistry': rows = rows.filter(lambda r: r['answer'] in ('A', 'B'))
    return rows.select(range(min(4, len(rows))))


def train_two_steps(method, domain, model, out):
    trainer = build_trainer(method, model, domain, fixtures(domain), out, **QUICK)
    if method in SCRIPTED: script_rollouts(trainer, SCRIPTS[domain])
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    result = trainer.train()
    assert trainer.state.global_step == 2
    assert math.isfinite(result.training_loss)
    logs = [h for h in trainer.state.log_history if 'loss' in h]
    assert len(logs) == 2  # logging_steps=1: one log per step
    assert logs[-1]['grad_norm'] > 0, f'{method}: zero gradient'
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[n], after[n].detach()) for n in before), f'{method}: no parameter changed'
    return trainer, logs


@pytest.mark.parametrize('method', list(TRAINERS))
def test_every_method_trains(method, tiny, tmp_path):
    trainer, logs = train_two_steps(method, 'chemistry', tiny, tmp_path)
    if isinstance(trainer, GRPOTrainer):  # the RL baselines log each reward's mean
        assert all(f'rewards/{name}/mean' in logs[0] for name in trainer.reward_func_names)
    if method == 'grpo': assert logs[0]['rewards/mcq_reward/mean'] == 0.5  # one right answer of two
    if method == 'rlcr':  # format 1 for both; accuracy 1/2; Brier 1-(1-0.9)^2 and 1-(0-0.6)^2, or 1-0.9^2 and 1-0.4^2
        assert logs[0]['rewards/rlcr_format_reward/mean'] == 1.0
        assert logs[0]['rewards/rlcr_accuracy_reward/mean'] == 0.5
    if method == 'caopd-sdft-tasc':  # the target came from agreement with a reference sampled from the teacher prompt
        assert {'caopd/reference_format', 'caopd/reference_agreement', 'caopd/rollout_accuracy'} <= set(logs[0])
        assert logs[0]['caopd/empirical_confidence'] == pytest.approx(logs[0]['caopd/reference_agreement'])


def test_rlcr_trains_on_tool_use(tiny, tmp_path):
    trainer, logs = train_two_steps('rlcr', 'tooluse', tiny, tmp_path)
    assert trainer.reward_func_names == ['rlcr_format_reward', 'rlcr_accuracy_reward', 'rlcr_brier_reward']
    assert logs[0]['rewards/rlcr_format_reward/mean'] == 1.0


def test_unknown_method_lists_the_methods(tiny, tmp_path):
    with pytest.raises(ValueError, match="unknown method 'car'.*'grpo'.*'rlcr'"):
        build_trainer('car', tiny, 'chemistry', fixtures('chemistry'), tmp_path)
