"""One training process of a launch command on a stand-in GPU node (tests/test_launch.py):

    python tests/node_child.py GPUS OUT [caopd.train's arguments]

torch answers as a node of GPUS H200s would, honouring CUDA_VISIBLE_DEVICES as CUDA does, and vLLM looks installed;
`caopd.train` then runs as the launched process would, its work stopped where the trainer would be built: the settings
it would build it with, the trainer's config and the checkpoint it would resume from are written to OUT as JSON
instead."""
import json, os, sys
from types import SimpleNamespace

import torch

H200 = 'NVIDIA H200'
gpus, out, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
visible = os.environ.get('CUDA_VISIBLE_DEVICES')
seen = len([g for g in visible.split(',') if g.strip()]) if visible is not None else gpus
torch.cuda.is_available = lambda: seen > 0
torch.cuda.device_count = lambda: seen
torch.cuda.get_device_name = lambda i=0: H200
torch.cuda.get_device_properties = lambda i=0: SimpleNamespace(total_memory=143771 * 2 ** 20)
torch.cuda.is_bf16_supported = lambda *a, **k: True
torch.cuda.current_device = lambda: 0
torch.cuda.set_device = lambda device: None

import importlib.util
import caopd.arguments, caopd.train as T
find = importlib.util.find_spec  # vLLM installed, as caopd's check sees it (TRL's own checks would import it)
caopd.arguments.importlib = SimpleNamespace(util=SimpleNamespace(
    find_spec=lambda name, *a: object() if name == 'vllm' else find(name, *a)))

def stop_at_the_trainer(settings, folder, train_rows, t0):
    "`caopd.train._fit` up to the trainer: what it would build the trainer with."
    with open(out, 'w') as f:
        json.dump(dict(settings=settings.record(), config=T._recorded_config(settings), prompts=len(train_rows),
                       visible=seen, resume_from=T.resume_point(settings, folder)), f, default=str)
    return folder

T._fit = stop_at_the_trainer
T.main(argv)
