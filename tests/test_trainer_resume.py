"Resuming a CaOPD run from a checkpoint continues it with the same state: student, optimiser and EMA teacher."
import os

import pytest
import torch

from trainer_helpers import chemistry_rows, sdft_trainer, tiny_model_dir

from caopd.trainer import EMA_TEACHER_FILE


pytestmark = pytest.mark.slow  # trains and kills training processes: not in the quick loop (README, "Working on caopd")

def _trainer(model_dir, out, dataset, tok): return sdft_trainer(model_dir, out, dataset, tok, max_steps=4, save_steps=2)


def _state(trainer):
    "Student and EMA-teacher weights."
    student = {f's.{n}': p.detach().clone() for n, p in trainer.model.state_dict().items()}
    teacher = {f't.{n}': p.detach().clone() for n, p in trainer._ema_teacher().state_dict().items()}
    return student | teacher


def _max_diff(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in a)


def _differing(a, b) -> list:
    "Names of the tensors of `a` and `b` that are not bit for bit equal."
    assert a.keys() == b.keys(), sorted(a.keys() ^ b.keys())
    return [k for k in a if not torch.equal(a[k], b[k])]


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    "One thread, so that no BLAS call can split its sums differently between the runs compared (see below)."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    from transformers import AutoTokenizer
    tmp = tmp_path_factory.mktemp('resume')
    model_dir = tiny_model_dir(tmp/'model')
    dataset, tok = chemistry_rows(4), AutoTokenizer.from_pretrained(model_dir)
    full = _trainer(model_dir, tmp/'full', dataset, tok)
    full.train()  # 4 steps straight, checkpoints at 2 and 4
    return tmp, model_dir, dataset, tok, full


def test_checkpoint_holds_the_ema_teacher(setup):
    tmp, *_ = setup
    for step in (2, 4): assert (tmp/'full'/f'checkpoint-{step}'/EMA_TEACHER_FILE).is_file()


def test_resume_continues_with_the_same_state(setup):
    tmp, model_dir, dataset, tok, full = setup
    resumed = _trainer(model_dir, tmp/'resumed', dataset, tok)
    resumed.train(resume_from_checkpoint=str(tmp/'full'/'checkpoint-2'))
    assert resumed.state.global_step == 4
    losses = lambda t: [h['loss'] for h in t.state.log_history if 'loss' in h]
    assert len(losses(resumed)) == 4  # steps 1-2 restored from the checkpoint state, 3-4 trained again
    # What the resumed steps can differ by: nothing. The checkpoint holds the float32 weights, Adam's moments, the EMA
    # teacher and the RNG states bit for bit, and steps 3-4 run the same operations on them in the same order (one
    # process, one thread, the same kernels; torch aligns every CPU buffer to 64 bytes, so MKL takes the same paths),
    # so every rounding repeats: the comparison is exact.
    assert losses(resumed)[2:] == losses(full)[2:]
    assert _differing(_state(resumed), _state(full)) == []
    # and the checkpoint's teacher is what was restored: the run moved it away from the initial weights. Adam's first
    # step moves every weight with a nonzero gradient by lr (m / sqrt(v) = +-1), so a tenth of lr is far from rounding
    fresh = _trainer(model_dir, tmp/'fresh', dataset, tok)
    assert _max_diff(_state(fresh), _state(full)) > full.args.learning_rate / 10


def test_resume_without_the_teacher_file_differs(setup):
    "The control: a checkpoint without the EMA teacher resumes with a different teacher (and says so)."
    tmp, model_dir, dataset, tok, full = setup
    import shutil
    ckpt = tmp/'no_teacher'/'checkpoint-2'
    shutil.copytree(tmp/'full'/'checkpoint-2', ckpt)
    os.remove(ckpt/EMA_TEACHER_FILE)
    resumed = _trainer(model_dir, tmp/'no_teacher_run', dataset, tok)
    with pytest.warns(UserWarning, match='EMA teacher restarts'):
        resumed.train(resume_from_checkpoint=str(ckpt))
    teacher = lambda t: {k: v for k, v in _state(t).items() if k.startswith('t.')}
    assert _max_diff(teacher(resumed), teacher(full)) > 1e-4
