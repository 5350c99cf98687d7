"Shared pieces of the trainer tests: a tiny model folder, a few Chemistry rows, and what their scripted rollouts say."
import os, warnings, zlib
from pathlib import Path

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', category=FutureWarning)

ROOT = Path(__file__).resolve().parents[1]
K = 4  # rollouts per prompt in these tests
U = 2.0 ** -24  # float32's unit roundoff: each float32 addition is exact up to a relative error of at most U


def reorder_bound(n:int) -> float:
    """How far apart, relative to the sum, two float32 sums of the same `n` terms of one sign can be when they add them
    in different orders (one process's batch against two processes' halves added by an all-reduce; another blocking of
    a matrix product). Any order of the additions is within (n - 1) U sum|t| of the exact sum (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., section 4.2: gamma_{n-1} sum|t|, gamma_k = kU / (1 - kU)), so two
    orders are within 2 gamma_{n-1} of each other."""
    k = max(n, 1) - 1
    return 2 * k * U / (1 - k * U)


def tiny_model_dir(dest, seed:int=0) -> str:
    "Save `caopd.models.tiny_model` with larger random weights (so contexts change its logits) into `dest`."
    from caopd.models import tiny_model
    tiny_model(seed=seed, weight_std=0.5, save_to=dest)
    return str(dest)


def chemistry_rows(n:int):
    "The first `n` Chemistry L3 fixture rows as a `datasets.Dataset`."
    from caopd.data import load_domain
    return load_domain('chemistry', 'all', data_dir=ROOT/'data'/'fixtures').select(range(n))


def n_right(row_id:str, group_size:int=K) -> int:
    "How many of a prompt's scripted rollouts are right: the row's number (fixture ids end in it) modulo K+1."
    tail = row_id.rsplit('-', 1)[-1]
    return (int(tail) if tail.isdigit() else zlib.crc32(row_id.encode())) % (group_size + 1)


def scripted_text(row:dict, k:int, group_size:int=K) -> str:
    "Rollout k of `row`'s group: right for k < n_right(row), with a confidence line on even k only."
    letter = row['answer'] if k < n_right(row['id'], group_size) else ('A' if row['answer'] != 'A' else 'B')
    text = f"<reasoning>\nStep {k}.\n</reasoning>\n<answer>\n{letter}\n</answer>"
    return text + f"\nConfidence: 0.{9 - k}" if k % 2 == 0 else text


def script_by_row(trainer):
    """Script `trainer`'s rollouts (`caopd.testing.script_rollouts`) by global row index: `scripted_text` of the training
    row whose prompt each completion was asked for (found in the decoded prompt), so that a scored-only round's rollout
    of the wrong prompt is scripted as that prompt's, and shows."""
    from caopd.testing import script_rollouts
    tok, data = trainer.processing_class, list(trainer.train_dataset)
    question = lambda row: row['prompt'][-1]['content'] if isinstance(row['prompt'], list) else row['prompt']
    def row_of(ids):
        text = tok.decode(ids, skip_special_tokens=True)
        found = [row for row in data if question(row) in text]
        assert len(found) == 1, f'{len(found)} training rows match the prompt {text[-200:]!r}'
        return found[0]
    script_rollouts(trainer, lambda rows, start, prompt_ids: [scripted_text(row_of(p), (start + i) % K)
                                                              for i, p in enumerate(prompt_ids)])
    return trainer


class RecordBatches:
    "Mixin for a CaOPD trainer: record what each prepared batch holds, per local row, in `self.records`."

    def _prepare_training_batch(self, inputs):
        batch = super()._prepare_training_batch(inputs)
        tok, B = self.processing_class, len(inputs)
        T = batch['completion_ids'].shape[1]
        length = batch['prompt_ids'].shape[1] + T  # the padded student sequence: positions a gradient sums over
        start = self.accelerator.process_index * B
        records = getattr(self, 'records', [])
        for i, row in enumerate(inputs):
            n = int(batch['raw_completion_lengths'][i])
            tmask = batch['teacher_attention_mask'][i, :-T].bool()
            records.append(dict(step=self.state.global_step, index=start + i, id=row['id'],
                                mu_hat=float(batch['mu_hat'][i]), length=int(length),
                                completion=tok.decode(batch['completion_ids'][i, :n]),
                                teacher_prompt=tok.decode(batch['teacher_input_ids'][i, :-T][tmask])))
        self.records = records
        return batch


def sdft_trainer(model_dir, out, dataset, tok, max_steps:int, save_steps:int):
    "A CaOPD-SDFT trainer of the tiny model on CPU that checkpoints every `save_steps` (the resume and checkpoint tests)."
    from caopd.config import CaOPDSDFTConfig
    from caopd.trainer import CaOPDSDFTTrainer
    from caopd.verifiers import mcq_reward
    args = CaOPDSDFTConfig(output_dir=str(out), use_cpu=True, bf16=False, gradient_checkpointing=False,
                           report_to='none', disable_tqdm=True, logging_steps=1, per_device_train_batch_size=K,
                           num_generations=K, max_completion_length=8, max_steps=max_steps, save_steps=save_steps, seed=0,
                           learning_rate=1e-2, warmup_steps=0, teacher_update_rate=0.5)
    return CaOPDSDFTTrainer(model_dir, mcq_reward, args, train_dataset=dataset, processing_class=tok)
