"Nothing half-written (issue 29, item 5): the warm-up's files are written whole, once, and a checkpoint of two processes is whole or absent."
import json, os, subprocess, sys, warnings
from pathlib import Path

import pytest

from conftest import ROOT
from trainer_helpers import chemistry_rows, sdft_trainer, tiny_model_dir

# The warm-up runs in the one process that prepares a run (`caopd.stages.prepare` refuses a launched one), and the
# script below records every write of its two files it makes: an opening for writing of the file or of a temporary file
# of its name, and a rename onto it. Then two processes (torchrun) train one step from the warmed model.
WARMUP_RUN = '''
import json, os, sys
model, out = sys.argv[1:]
writes = []
def ours(path): return os.path.basename(os.fsdecode(path)).lstrip('.').startswith(('warmup.json', 'warmup_log.jsonl'))
def audit(event, args):
    if event == 'open' and isinstance(args[0], (str, bytes, os.PathLike)) and ours(args[0]):
        if args[2] & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT): writes.append(['open', os.fsdecode(args[0])])
    elif event == 'os.rename' and ours(args[1]): writes.append(['rename', os.path.basename(os.fsdecode(args[1]))])
sys.addaudithook(audit)
from caopd.data import load_domain
from caopd.sources import fixtures_dir
from caopd.runfolder import RunFolder
from caopd.arguments import RunArguments, resolve_settings
from caopd.stages import warmup_stage
import dataclasses
rows = load_domain('chemistry', 'all', data_dir=fixtures_dir()).select(range(4))
settings = dataclasses.replace(resolve_settings(RunArguments(preset='cpu', out=out)), start=model, dtype='float32', format_warmup='value',
                               format_warmup_steps=1, seed=0, warmup_prompts_sha256='rows-sha')
settings = warmup_stage(settings, rows, RunFolder(out))
with open(os.path.join(os.path.dirname(out), 'audit.json'), 'w') as f:
    json.dump(dict(writes=writes, warmup=settings.warmup, start=settings.start), f)
'''

# One CaOPD-SDFT step from the warmed model, checkpointed by both processes.
STEP_RUN = '''
import os, sys
start, out = sys.argv[1:]
from transformers import AutoTokenizer
from caopd.data import load_domain
from caopd.sources import fixtures_dir
from caopd.config import CaOPDSDFTConfig
from caopd.train import end_process_group
from caopd.trainer import CaOPDSDFTTrainer
from caopd.verifiers import mcq_reward
rows = load_domain('chemistry', 'all', data_dir=fixtures_dir()).select(range(2))
args = CaOPDSDFTConfig(output_dir=os.path.join(out, 'trainer'), use_cpu=True, bf16=False, gradient_checkpointing=False,
                       report_to='none', disable_tqdm=True, per_device_train_batch_size=4, num_generations=4,
                       max_completion_length=8, max_steps=1, save_steps=1, seed=0, warmup_steps=0)
CaOPDSDFTTrainer(start, mcq_reward, args, train_dataset=rows, processing_class=AutoTokenizer.from_pretrained(start)).train()
end_process_group()
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)  # as tests/trainer_mp_run.py: no interpreter teardown, where gloo's threads have aborted good runs
'''


@pytest.fixture(scope='module')
def two_processes(tmp_path_factory):
    "The warm-up script in one process, then the step under `torchrun --nproc_per_node 2`: (their folder, the run folder)."
    tmp = tmp_path_factory.mktemp('two')
    (tmp/'warmup_run.py').write_text(WARMUP_RUN); (tmp/'step_run.py').write_text(STEP_RUN)
    model, run = tiny_model_dir(tmp/'model'), tmp/'run'
    res = subprocess.run([sys.executable, str(tmp/'warmup_run.py'), model, str(run)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, f'{res.stdout[-3000:]}\n{res.stderr[-6000:]}'
    start = json.loads((tmp/'audit.json').read_text())['start']
    torchrun = Path(sys.executable).parent/'torchrun'
    res = subprocess.run([str(torchrun), '--standalone', '--nproc_per_node', '2', str(tmp/'step_run.py'), start, str(run)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert res.returncode == 0, f'{res.stdout[-3000:]}\n{res.stderr[-6000:]}'
    return tmp, run


@pytest.mark.slow
def test_warmup_files_are_written_whole_once(two_processes):
    "The warm-up writes warmup.json and warmup_log.jsonl whole (a temporary file renamed onto each), and leaves no temporary file."
    tmp, run = two_processes
    done = json.loads((tmp/'audit.json').read_text())
    renames = [w[1] for w in done['writes'] if w[0] == 'rename']
    # the log once; the record twice: by format_warmup, then with the prompts' digest by warmup_stage
    assert renames == ['warmup_log.jsonl', 'warmup.json', 'warmup.json'], done['writes']
    assert all(w[0] == 'rename' or os.path.basename(w[1]).startswith('.') for w in done['writes']), done['writes']  # never in place
    warmup = run/'warmup'
    record = json.loads((warmup/'warmup.json').read_text())
    assert record['prompts_sha256'] == 'rows-sha' and record['steps'] == 1
    assert done['warmup'] == record
    log = [json.loads(line) for line in (warmup/'warmup_log.jsonl').read_text().splitlines()]
    assert [h['step'] for h in log if 'loss' in h] == [1]
    assert (warmup/'checkpoint'/'config.json').is_file()
    assert [p.name for p in warmup.iterdir() if p.name.startswith('.')] == []  # no temporary file left


@pytest.mark.slow
def test_checkpoint_of_two_processes_is_whole(two_processes):
    "Both processes write into the checkpoint before it takes its name: each one's RNG state is in it, with the teacher."
    from caopd.trainer import EMA_TEACHER_FILE
    _, run = two_processes
    assert sorted(p.name for p in (run/'trainer').iterdir()) == ['checkpoint-1']  # and no partial folder
    files = {p.name for p in (run/'trainer'/'checkpoint-1').iterdir()}
    assert {'trainer_state.json', 'rng_state_0.pth', 'rng_state_1.pth', EMA_TEACHER_FILE} <= files, files


class Killed(BaseException):
    "A process killed at this point (nothing catches it, as nothing runs after a kill)."


def _trainer(model_dir, out, dataset, tok): return sdft_trainer(model_dir, out, dataset, tok, max_steps=2, save_steps=1)


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    from transformers import AutoTokenizer
    model_dir = tiny_model_dir(tmp_path_factory.mktemp('tiny')/'model')
    return model_dir, chemistry_rows(4), AutoTokenizer.from_pretrained(model_dir)


@pytest.mark.parametrize('kill', ['before the teacher file', 'before the trainer state'])
def test_killed_checkpoint_is_whole_or_absent(tiny, tmp_path, monkeypatch, kill):
    """A run killed while it writes checkpoint-2, after transformers' trainer state and before the EMA teacher's file (or
    earlier, before the trainer state), leaves as its last checkpoint (`get_last_checkpoint`, what a resumed run takes)
    one that resumes with its teacher: checkpoint-1."""
    import caopd.trainer
    from transformers.trainer_callback import TrainerState
    from transformers.trainer_utils import get_last_checkpoint
    from caopd.trainer import EMA_TEACHER_FILE
    model_dir, dataset, tok = tiny
    trainer = _trainer(model_dir, tmp_path/'run', dataset, tok)
    if kill == 'before the teacher file':
        save = caopd.sharding.save_ema_teacher
        def save_ema_teacher(teacher, path, write=True):
            if trainer.state.global_step == 2: raise Killed(path)
            return save(teacher, path, write)
        monkeypatch.setattr(caopd.trainer, 'save_ema_teacher', save_ema_teacher)
    else:
        save = TrainerState.save_to_json
        def save_to_json(state, path):
            if state.global_step == 2: raise Killed(path)
            return save(state, path)
        monkeypatch.setattr(TrainerState, 'save_to_json', save_to_json)
    with pytest.raises(Killed): trainer.train()
    monkeypatch.undo()
    last = get_last_checkpoint(str(tmp_path/'run'))
    assert last is not None and Path(last).name == 'checkpoint-1', last
    assert (Path(last)/'trainer_state.json').is_file() and (Path(last)/EMA_TEACHER_FILE).is_file()
    resumed = _trainer(model_dir, tmp_path/'run', dataset, tok)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        resumed.train(resume_from_checkpoint=last)
    assert not [w for w in caught if 'EMA teacher restarts' in str(w.message)]
    assert resumed.state.global_step == 2
    assert get_last_checkpoint(str(tmp_path/'run')).endswith('checkpoint-2')
    assert (tmp_path/'run'/'checkpoint-2'/EMA_TEACHER_FILE).is_file()
    assert sorted(p.name for p in (tmp_path/'run').iterdir()) == ['checkpoint-1', 'checkpoint-2']  # no partial folder left
