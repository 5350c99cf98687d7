"""mu_hat is the deployed policy's success rate: at the first step, before any update, the mean target on the training
prompts agrees with the evaluation's accuracy on the same prompts, within binomial error (the embedded model after the
cpu preset's format warm-up, on this project's integer-addition domain; a few minutes on two cores)."""
import math



import pytest
pytestmark = pytest.mark.slow  # trains the embedded model: not in the quick loop (README, "Working on caopd")

def test_first_step_mu_hat_is_the_evaluated_policys_accuracy(tmp_path):
    import torch
    from caopd.baselines import build_trainer
    from caopd.generation import generate
    from caopd.models import chat_template_kwargs, load_model
    from caopd.runfolder import RunFolder
    from caopd.arguments import RunArguments, resolve_settings
    from caopd.stages import select_prompts, warmup_stage
    from caopd.run_config import trl_config_fields
    from caopd.verifiers import verify

    n_prompts, K = 16, 8
    run = RunArguments(preset='cpu', method='caopd-sdft', out=str(tmp_path/'run'), K=K, prompts_per_step=n_prompts,
                       trainer_overrides={'confidence_leave_one_out': False})  # the plain mean of each prompt's K
    settings = resolve_settings(run)
    assert settings.domain == 'arithmetic' and settings.rollout_sampling == 'eval'
    folder = RunFolder(run.out)
    train_rows, warmup_rows, settings = select_prompts(settings)
    settings = warmup_stage(settings, warmup_rows, folder)  # the cpu preset's warm-up, as every run starts
    start = settings.start
    rows = train_rows.select(range(n_prompts))  # the first step's prompts (levels interleaved)

    cfg = {**trl_config_fields(settings, folder), 'per_device_train_batch_size': n_prompts * K,
           'gradient_accumulation_steps': 1, 'save_strategy': 'no', 'disable_tqdm': True}
    trainer = build_trainer('caopd-sdft', start, 'arithmetic', train_dataset=rows, output_dir=tmp_path/'trainer', **cfg)
    gen = trainer.generation_config  # the rollouts are sampled as the evaluation samples
    assert (gen.temperature, gen.top_p, gen.top_k) == (settings.eval_temperature, settings.eval_top_p, 50)
    assert trainer.temperature == 1.0  # while the loss keeps Table 6's temperature
    trainer.model.train()
    torch.manual_seed(1)
    batch = trainer._prepare_training_batch([row for row in rows for _ in range(K)])  # TRL's order: K per prompt
    mu_hat = batch['mu_hat'].double().mean().item()  # mean target over the step's prompts, before any update

    lm, tok = load_model(start)
    outs = generate(lm, tok, rows['prompt'], n=K, temperature=settings.eval_temperature, top_p=settings.eval_top_p,
                    max_new_tokens=settings.eval_max_new_tokens, batch_size=64, seed=2, progress=False,
                    chat_template_kwargs=chat_template_kwargs(start, tok))
    accuracy = sum(verify('arithmetic', c, r['answer']) for r, cs in zip(rows, outs) for c in cs) / (n_prompts * K)

    # two independent estimates of one success rate from n_prompts x K samples each: their difference has standard
    # error sqrt(2 p (1 - p) / (n K)) at most (sampling the same prompts twice only lowers it); allow 3 of them
    p = (mu_hat + accuracy) / 2
    assert 0.05 < p < 0.95, f"mean success {p:.2f}: too close to 0 or 1 for this check to say anything"
    se = math.sqrt(2 * p * (1 - p) / (n_prompts * K))
    print(f"first-step mean mu_hat {mu_hat:.3f}, evaluation accuracy {accuracy:.3f} on the same {n_prompts} prompts "
          f"x {K} samples (difference {mu_hat - accuracy:+.3f}, 3 SE = {3 * se:.3f})")
    assert abs(mu_hat - accuracy) <= 3 * se
