"""The GPU node's launch paths as the node runs them, on 2 CPU cores (issue 47, item 3). torch answers as a node of N
H200s would (honouring CUDA_VISIBLE_DEVICES) and vLLM looks installed. The parent plans and prepares the run as
caopd-train does (settings, prompts, the run folder's settings.json), and builds its launch command; the command then
runs as its launcher's first process would (the command's environment, WORLD_SIZE and RANK set as the launcher sets
them), in a child process stopped where the trainer would be built (tests/node_child.py). Each case asserts that the
child accepts the parent's record unchanged and builds the trainer with the parent's settings; a run killed after its
checkpoints and typed again resumes through the same launch."""
import json, os, subprocess, sys
from types import SimpleNamespace

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # starts a process per case: not in the quick loop (README, "Working on caopd")

CHILD = ROOT/'tests'/'node_child.py'


@pytest.fixture
def node(monkeypatch):
    "A function that makes torch here answer as a node of `n` H200s would, with vLLM installed and its host RAM."
    import importlib.util, torch, caopd.arguments, caopd.memory
    ram = caopd.memory.gpu_capacity_gib  # the node's host RAM, not this machine's 24 GiB: a node of 4 H200s has 2 TiB
    monkeypatch.setattr(caopd.memory, 'gpu_capacity_gib', lambda device='H200': 2048.0 if device == 'cpu' else ram(device))
    find = importlib.util.find_spec  # vLLM installed as caopd's check sees it (TRL's own checks would import it)
    monkeypatch.setattr(caopd.arguments, 'importlib', SimpleNamespace(util=SimpleNamespace(
        find_spec=lambda name, *a: object() if name == 'vllm' else find(name, *a))))
    def gpus(n:int):
        monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
        monkeypatch.setattr(torch.cuda, 'device_count', lambda: n)
        monkeypatch.setattr(torch.cuda, 'get_device_name', lambda i=0: 'NVIDIA H200')
        monkeypatch.setattr(torch.cuda, 'get_device_properties', lambda i=0: SimpleNamespace(total_memory=143771 * 2 ** 20))
        monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda *a, **k: True)  # transformers asks for bf16=True
        monkeypatch.setattr(torch.cuda, 'current_device', lambda: 0)
        monkeypatch.setattr(torch.cuda, 'set_device', lambda device: None)  # TrainingArguments picks cuda:0
        return n
    return gpus


def launch(cmd:list[str], gpus:int, out) -> tuple[subprocess.CompletedProcess, dict, dict]:
    "Run `cmd` as its launcher's first process on the stand-in node: (the result, what it would train with, its env)."
    env, i = {k: v for k, v in os.environ.items() if k not in ('WORLD_SIZE', 'RANK', 'LOCAL_RANK')}, 0
    if cmd[0] == 'env':  # the command's own variables (server mode: CUDA_VISIBLE_DEVICES)
        i = 1
        while '=' in cmd[i]: k, v = cmd[i].split('=', 1); env[k] = v; i += 1
    j = cmd.index('caopd.train')
    launcher = cmd[i:j - 1]
    flag = next((f for f in ('--num_processes', '--nproc_per_node') if f in launcher), None)
    world = int(launcher[launcher.index(flag) + 1]) if flag else 1
    env.update(WORLD_SIZE=str(world), RANK='0', LOCAL_RANK='0')  # what accelerate launch and torchrun give rank 0
    res = subprocess.run([sys.executable, str(CHILD), str(gpus), str(out), *cmd[j + 1:]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    got = json.loads(out.read_text()) if res.returncode == 0 and out.is_file() else {}
    return res, got, env


CASES = {  # name: (GPUs of the node, run arguments, the launcher, the GPUs the training processes see)
    'one-gpu-colocated': (1, dict(model='Qwen3-8B', lora_r=64), 'python', '1'),
    'four-gpus-fsdp2': (4, dict(model='Qwen3-8B'), 'accelerate', '4'),
    'server-1': (4, dict(model='Qwen3-8B', vllm_mode='server', prompts_per_step=24), 'accelerate', '0,1,2'),
    # on 2 training GPUs the full 8B run fits only with the fix the plan names first, FSDP2's CPU offload
    'server-2': (4, dict(model='Qwen3-8B', vllm_mode='server', vllm_server_gpus=2, fsdp_offload=True), 'accelerate', '0,1'),
    'qwen3-14b-offload': (4, dict(model='Qwen3-14B', fsdp_offload=True), 'accelerate', '4'),
}

@pytest.mark.parametrize('name', CASES)
def test_the_launched_process_trains_the_parents_plan(name, node, tmp_path):
    from caopd.arguments import RunArguments
    from caopd.launch import launch_command, server_command
    from caopd.stages import prepare
    from caopd.run_config import trl_config_fields
    gpus, params, launcher, seen = CASES[name]
    node(gpus)
    run = RunArguments(**params, out=str(tmp_path/'run'))
    prepared = prepare(run)  # the parent: resolved once, prompts drawn, the folder claimed, settings.json written
    cmd = launch_command(prepared.settings, prepared.folder.settings)
    assert cmd[cmd.index('caopd.train') + 1:] == ['--settings', str(prepared.folder.settings)]
    assert (cmd[0] == sys.executable) if launcher == 'python' else launcher in cmd
    res, got, env = launch(cmd, gpus, tmp_path/'child.json')
    assert res.returncode == 0, res.stderr[-3000:]
    narrowed = ',' in seen  # server mode: the command hides the server's GPUs from the training processes
    assert got['visible'] == (len(seen.split(',')) if narrowed else int(seen))
    if narrowed: assert env['CUDA_VISIBLE_DEVICES'] == seen
    assert got['settings'] == prepared.folder.read_settings() == prepared.settings.record()  # the record, unchanged
    parent = json.loads(json.dumps(trl_config_fields(prepared.settings, prepared.folder), default=str))
    assert got['config'] == prepared.settings.trl_config == parent  # the fields the parent recorded, as it resolves them
    assert got['prompts'] == prepared.settings.n_train_prompts
    if prepared.settings.vllm_mode == 'server':  # the server on the GPUs the training does not see
        server = server_command(prepared.settings)
        assert server[1] == 'CUDA_VISIBLE_DEVICES=' + ','.join(str(g) for g in range(gpus) if str(g) not in seen.split(','))


def test_a_launched_process_checks_what_is_its_own(node, tmp_path):
    "A process launched with another world size, or seeing other GPUs than its record plans, is refused in one line."
    from caopd.arguments import RunArguments
    from caopd.launch import launch_command
    from caopd.stages import prepare
    node(4)
    run = RunArguments(**CASES['server-2'][1], out=str(tmp_path/'run'))
    prepared = prepare(run)
    cmd = launch_command(prepared.settings, prepared.folder.settings)
    wide = [c for c in cmd if not c.startswith('CUDA_VISIBLE_DEVICES=')]  # the server's GPUs left visible
    res, _, _ = launch(wide, 4, tmp_path/'child.json')
    assert res.returncode == 2 and 'plans training on 2 GPU(s) (CUDA_VISIBLE_DEVICES=0,1), but this process sees 4' in res.stderr
    narrow = [c.replace('--num_processes', '--nproc_per_node') for c in cmd]
    narrow[narrow.index('--nproc_per_node') + 1] = '3'
    res, _, _ = launch(narrow, 4, tmp_path/'child.json')
    assert res.returncode == 2 and 'plans 2 training process(es), but this is process 0 of 3' in res.stderr
    res = subprocess.run([sys.executable, '-m', 'caopd.train', '--settings', str(tmp_path/'none.json')], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and 'none.json is missing' in res.stderr


def test_a_killed_run_resumes_through_the_launch(node, tmp_path):
    """Killed mid-training on the node (checkpoints written, the run not finished), the command typed again resumes: the
    parent accepts its own folder with the record unchanged and builds the same launch command, and the launched process
    reads that record and resumes from the last checkpoint."""
    from caopd.arguments import RunArguments
    from caopd.launch import launch_command
    from caopd.stages import prepare
    node(4)
    params = dict(model='Qwen3-8B', out=str(tmp_path/'run'))
    first = prepare(RunArguments(**params))
    cmd = launch_command(first.settings, first.folder.settings)
    res, got, _ = launch(cmd, 4, tmp_path/'first.json')
    assert res.returncode == 0 and got['resume_from'] is None, res.stderr[-3000:]
    for step in (50, 100): (first.folder.trainer/f'checkpoint-{step}').mkdir(parents=True)  # then the node went down
    assert not first.folder.training.is_file()
    run = RunArguments(**params)  # the same command, typed again
    again = prepare(run)
    assert again.settings.record() == first.settings.record() == first.folder.read_settings()
    assert launch_command(again.settings, again.folder.settings) == cmd
    res, got, _ = launch(cmd, 4, tmp_path/'again.json')
    assert res.returncode == 0, res.stderr[-3000:]
    assert got['settings'] == first.settings.record() and got['prompts'] == first.settings.n_train_prompts
    assert got['resume_from'] == str(first.folder.trainer/'checkpoint-100')
