"""Save trained models and EMA teachers from one process and from two, and write what was saved, for tests/test_save_ranks.py.

    python tests/save_ranks_run.py MODEL_DIR OUT_DIR                                  # the one-process reference
    torchrun --nproc_per_node 2 tests/save_ranks_run.py MODEL_DIR OUT_DIR --reference ONE_OUT_DIR

Which path each part exercises (CPU, gloo):
- `trained/`: CaOPD-SDFT with a LoRA adapter trains 2 steps on scripted rollouts, then `caopd.train.save_trained`. With
  two processes this is the MULTI_CPU path (DDP): the real trainer, its accelerator and `trainer.save_model`.
- `full/`, `lora/`: `save_trained` of a transformers `Trainer` holding the tiny model (or it with a seeded LoRA adapter)
  without training, so the saved weights are known exactly. With two processes: MULTI_CPU, weights whole on each rank.
- `full_sharded/`, `lora_sharded/` (two processes only): the same models sharded by us with `fully_shard` on a gloo
  mesh (each decoder layer, then the root, as accelerate's FSDP2 plugin wraps them). transformers' Trainer given `fsdp`
  with `use_cpu=True` falls back to MULTI_CPU and never shards, so the Trainer here only carries the accelerator and
  tokenizer; the sharded branch of `save_trained` (`caopd.sharding.full_state_dict`, every rank) is what runs.
- `teacher/`: `caopd.sharding.save_ema_teacher` / `load_ema_teacher`, the functions the trainers' checkpoint mixin
  calls, on a teacher sharded at the root with `fully_shard` as TRL's `prepare_fsdp` does (TRL's trainer cannot run
  FSDP on CPU, for the reason above). One process writes `whole.safetensors`; two write `sharded.safetensors` from
  the sharded teacher, load the one-process file into a sharded teacher with other weights (`before.safetensors` is
  that teacher before the load) and save it again (`reloaded.safetensors`).
"""
import argparse, json, os, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trainer_helpers import K, RecordBatches, chemistry_rows, script_by_row  # noqa: E402 (sets the environment first)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from caopd.runfolder import RunFolder  # noqa: E402
from caopd.train import save_trained  # noqa: E402
from caopd.sharding import load_ema_teacher, save_ema_teacher  # noqa: E402

LORA_R = 2


def lora(model, seed:int=0):
    "`model` with a LoRA adapter of random A and B (PEFT starts B at zero, which would make every merge a no-op)."
    import peft
    torch.manual_seed(seed)
    return peft.get_peft_model(model, peft.LoraConfig(r=LORA_R, target_modules='all-linear', init_lora_weights=False,
                                                      task_type='CAUSAL_LM'))


def shard(model, mesh, layers:bool=True):
    "Shard `model` with FSDP2 on `mesh`: each decoder layer, then the root (`layers=False`: the root only, TRL's teacher)."
    from torch.distributed.fsdp import fully_shard
    if layers:
        for m in model.modules():
            if type(m).__name__ == 'LlamaDecoderLayer': fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def plain_trainer(model, tok, out:Path):
    from transformers import Trainer, TrainingArguments
    return Trainer(model, TrainingArguments(str(out/'hf'), use_cpu=True, report_to='none', disable_tqdm=True),
                   processing_class=tok)


def trained(model_dir:str, tok, out:Path):
    """CaOPD-SDFT with LoRA, 2 steps on scripted rollouts (the global batch is one prompt's K rollouts), then saved;
    `trained-rank<r>.json` holds what tests/test_save_ranks.py derives its tolerance from: the learning rate, each step's
    gradient norm and the padded length of the batches."""
    from caopd.config import CaOPDSDFTConfig
    from caopd.models import load_model
    from caopd.trainer import CaOPDSDFTTrainer
    from caopd.verifiers import mcq_reward
    class RecordedSDFT(RecordBatches, CaOPDSDFTTrainer): pass
    n = int(os.environ.get('WORLD_SIZE', 1))
    args = CaOPDSDFTConfig(output_dir=str(out/'trainer'), use_cpu=True, bf16=False, gradient_checkpointing=False,
                           report_to='none', disable_tqdm=True, logging_steps=1, save_strategy='no',
                           per_device_train_batch_size=K // n, num_generations=K, max_completion_length=8, max_steps=2,
                           seed=0, warmup_steps=0,
                           # plain SGD: a step is lr x gradient, so one process's sum and DDP's all-reduce (the same
                           # numbers summed in another order) move the weights apart by lr x that rounding, which the
                           # test bounds. Adam divides by the gradient's own size: a weight whose gradient is zero up
                           # to summation order stepped +-lr either way (CI saw 2 x lr with eps 1e-8, and 2.3e-3 with
                           # eps 1e-3), which no rounding bound covers
                           optim='sgd', learning_rate=1.0)
    model = lora(load_model(model_dir, device='cpu')[0])
    trainer = RecordedSDFT(model, mcq_reward, args, train_dataset=chemistry_rows(2), processing_class=tok)
    script_by_row(trainer).train()
    seen = dict(learning_rate=args.learning_rate, rows=K, lengths=sorted({r['length'] for r in trainer.records}),
                grad_norms=[h['grad_norm'] for h in trainer.state.log_history if 'grad_norm' in h])
    out.mkdir(parents=True, exist_ok=True)
    (out/f'trained-rank{trainer.accelerator.process_index}.json').write_text(json.dumps(seen))
    save_trained(trainer, RunFolder(out/'trained'), run_settings(LORA_R, model_dir))
    return trainer


def run_settings(lora_r, start):
    "What `save_trained` reads of a run's settings (`lora_r`, `start`), in the run settings of the cpu preset."
    import dataclasses
    from caopd.arguments import RunArguments, resolve_settings
    return dataclasses.replace(resolve_settings(RunArguments(preset='cpu')), lora_r=lora_r, start=str(start))

def main():
    p = argparse.ArgumentParser()
    p.add_argument('model_dir'); p.add_argument('out_dir')
    p.add_argument('--reference', help="the one-process run's OUT_DIR (two processes load its teacher file)")
    a = p.parse_args()
    from caopd.models import load_model
    out = Path(a.out_dir)
    trainer = trained(a.model_dir, None, out)  # first: it sets up the process group (MULTI_CPU) under torchrun
    tok = trainer.processing_class
    world = trainer.accelerator.num_processes
    base = lambda: load_model(a.model_dir, device='cpu')[0]
    for name, model, lora_r in (('full', base(), 0), ('lora', lora(base()), LORA_R)):
        save_trained(plain_trainer(model, tok, out/name), RunFolder(out/name), run_settings(lora_r, a.model_dir))
    teacher_dir = out/'teacher'; teacher_dir.mkdir(parents=True, exist_ok=True)
    if world == 1:
        save_ema_teacher(base(), str(teacher_dir/'whole.safetensors'))
    else:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh('cpu', (world,))
        for name, model, lora_r in (('full_sharded', shard(base(), mesh), 0),
                                    ('lora_sharded', shard(lora(base()), mesh), LORA_R)):
            save_trained(plain_trainer(model, tok, out/name), RunFolder(out/name), run_settings(lora_r, a.model_dir))
        main_rank = dist.get_rank() == 0
        teacher = shard(base().eval().requires_grad_(False), mesh, layers=False)  # TRL: the root only
        save_ema_teacher(teacher, str(teacher_dir/'sharded.safetensors'), write=main_rank)
        other = shard(load_model(a.model_dir, device='cpu')[0].eval(), mesh, layers=False)
        with torch.no_grad():
            for q in other.parameters(): q.mul_(0.5)  # weights a fresh run would not have
        save_ema_teacher(other, str(teacher_dir/'before.safetensors'), write=main_rank)
        assert load_ema_teacher(other, str(Path(a.reference)/'teacher'/'whole.safetensors'))
        save_ema_teacher(other, str(teacher_dir/'reloaded.safetensors'), write=main_rank)
        assert not load_ema_teacher(other, str(teacher_dir/'missing.safetensors'))  # every rank gets rank 0's answer
        dist.barrier()
    (out/f'done-rank{trainer.accelerator.process_index}').write_text(str(world))
    if dist.is_available() and dist.is_initialized(): dist.destroy_process_group()


if __name__ == '__main__':
    main()
    # as tests/trainer_mp_run.py: leave without the interpreter's and C++'s teardown, which aborted gloo ranks at exit
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)
