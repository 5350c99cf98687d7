"""The EMA teacher's first weights under FSDP2 with fsdp_cpu_ram_efficient_loading (issue 29, item 9), on two CPU
processes with torch's fully_shard on gloo. TRL shards the separate teacher it loads with `prepare_fsdp`, which
broadcasts nothing, so a rank that loaded no real weights (as transformers 4.x did on ranks > 0 under that option)
keeps them; caopd's `EMATeacherCheckpoints._setup_teacher_model` sets every rank's slice from rank 0's student. TRL's
own `SDFTTrainer._setup_teacher_model` runs on a stand-in for the trainer (what it reads of it, nothing more)."""
import json, os, subprocess, sys

import pytest

from conftest import ROOT
from trainer_helpers import tiny_model_dir

pytestmark = pytest.mark.slow  # starts torchrun processes: not in the quick loop (README, "Working on caopd")

SCRIPT = r'''
import json, logging, os, sys, warnings
from types import SimpleNamespace
import torch, torch.distributed as dist
warnings.filterwarnings('ignore'); logging.disable(logging.WARNING)
dist.init_process_group('gloo'); rank = dist.get_rank()
import trl.experimental.sdft.sdft_trainer as sdft_module
from trl.experimental.sdft import SDFTTrainer
from trl.trainer.utils import create_model_from_path
from accelerate.utils import FullyShardedDataParallelPlugin
from safetensors.torch import load_file
from torch.distributed.tensor import distribute_tensor
from caopd.trainer import EMATeacherCheckpoints
from caopd.sharding import is_sharded
path, kind, out = sys.argv[1:4]
saved = load_file(os.path.join(path, 'model.safetensors'))

def load_on_rank0_only(*args, **kwargs):  # real weights on rank 0; NaN elsewhere, as uninitialised memory may hold
    model = create_model_from_path(*args, **kwargs)
    if rank > 0:
        with torch.no_grad():
            for p in model.parameters(): p.fill_(float('nan'))
    return model
sdft_module.create_model_from_path = load_on_rank0_only  # the teacher's loader (the student is loaded below, whole)

class Trainer:  # what TRL's _setup_teacher_model reads of an SDFTTrainer under FSDP2
    _setup_teacher_model = SDFTTrainer._setup_teacher_model
    _use_peft_ema_teacher_adapter = SDFTTrainer._use_peft_ema_teacher_adapter
    is_deepspeed_enabled, is_fsdp_enabled = False, True
    def __init__(self, model, accelerator):
        self.model, self.accelerator, self.callbacks = model, accelerator, []
        self.args = SimpleNamespace(teacher_model_kind='ema', model_init_kwargs=None, trust_remote_code=False,
                                    teacher_sync_steps=1, teacher_update_rate=0.05,
                                    distributed_state=SimpleNamespace(distributed_type='FSDP'))
    def add_callback(self, callback): self.callbacks.append(callback)
class CaOPDTrainer(EMATeacherCheckpoints, Trainer): pass

plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy='transformer_based_wrap',
                                        cpu_ram_efficient_loading=True, state_dict_type='FULL_STATE_DICT')
accelerator = SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin), torch_device_mesh=None, parallelism_config=None,
                              device=torch.device('cpu'), is_main_process=rank == 0, mixed_precision='no',
                              unwrap_model=lambda m, **kw: m)
trainer = (CaOPDTrainer if kind == 'caopd' else Trainer)(create_model_from_path(path), accelerator)
trainer._setup_teacher_model()
worst = 0.0  # the largest difference of this rank's teacher slice from the saved weights
for name, p in trainer.teacher_model.named_parameters():
    ref = saved.get(name, saved['model.embed_tokens.weight'])  # a tied head is saved under the embedding's name
    want = distribute_tensor(ref.to(p.dtype), p.device_mesh, p.placements, src_data_rank=None).to_local()
    worst = max(worst, float((p.to_local() - want).abs().max().nan_to_num(float('inf'))))
with open(os.path.join(out, f'{kind}-rank{rank}.json'), 'w') as f:
    json.dump(dict(sharded=is_sharded(trainer.teacher_model), worst=worst), f)
dist.destroy_process_group()
'''


@pytest.mark.parametrize('kind', ['trl', 'caopd'])
def test_every_rank_starts_from_rank0s_teacher(tmp_path, kind):
    "TRL alone: rank 1's teacher slice keeps what it loaded (here NaN). With caopd's mixin: every slice is rank 0's weights."
    (tmp_path/'run.py').write_text(SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS='1', ACCELERATE_USE_FSDP='true', FSDP_CPU_RAM_EFFICIENT_LOADING='true',
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')]))
    res = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
                          str(tmp_path/'run.py'), tiny_model_dir(tmp_path/'tiny'), kind, str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-4000:]
    ranks = [json.loads((tmp_path/f'{kind}-rank{r}.json').read_text()) for r in (0, 1)]
    assert all(r['sharded'] for r in ranks)
    # exact: no arithmetic lies between the saved weights and a slice, only copies (rank 0 loads them, the broadcast
    # sends its bits), so a slice can differ from the file by nothing; TRL's rank 1 keeps NaN (inf in `worst`)
    assert ranks[0]['worst'] == 0.0
    assert ranks[1]['worst'] == (float('inf') if kind == 'trl' else 0.0)
