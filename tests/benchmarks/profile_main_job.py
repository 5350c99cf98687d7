"""Where the README main job's compute goes, by profile: its evaluation of the start and its training run again under
cProfile from a copy of the main job's run folder (the folder itself is left as it is), and each one's seconds split
into the model's generation (its prompts' prefill apart), the readout, the loss's forward passes, the backward pass,
checkpoints, imports and the matrix products of the linear layers, wherever they ran.

    .ci/env python tests/benchmarks/profile_main_job.py RUN_FOLDER > tests/benchmarks/profile_main_job.txt

The run folder is the main job's (`runs/train/smollm2-135m-instruct-arithmetic-caopd-sdft-seed0`, or the one
`tests/benchmarks/timings.py --runs DIR` kept from its fresh clone); run it from the repository root, where the folder's
recorded paths start. About 8 minutes on 2 cores. cProfile slows Python-heavy code (the generation loop, the readout's
tree walk) more than the matrix products, so its seconds are above the run's own: the shares are what it shows. A script,
not a test: it reads seconds.
"""
import argparse, cProfile, dataclasses, os, pstats, shutil, subprocess, sys, tempfile, time
from pathlib import Path

# what is named in the output: (label, file the function is in, function), by cumulative seconds; the linear layers
# (`LINEAR`, a builtin) by their own seconds over every call
PARTS = {
    'evaluation': [('generation (transformers generate)', 'transformers/generation/utils.py', 'generate'),
                   ("  of which the prompts' prefill", 'transformers/generation/utils.py', '_prefill'),
                   ('readout (the expected stated confidence)', 'caopd/readout.py', 'transformers_readouts')],
    'training': [('rollouts (transformers generate)', 'transformers/generation/utils.py', 'generate'),
                 ("loss: the student's and the teacher's forward passes", 'trl/experimental/sdft/sdft_trainer.py',
                  '_compute_teacher_student_logits'),
                 ('loss: the backward pass', 'accelerate/accelerator.py', 'backward'),
                 ('optimizer steps', 'accelerate/optimizer.py', 'step'),
                 ('checkpoints (every save_steps, and the trained model)', 'caopd/trainer.py', '_save_checkpoint'),
                 ('imports', '<frozen importlib._bootstrap>', '_find_and_load')],
}
LINEAR = ('~', 0, '<built-in method torch._C._nn.linear>')  # every linear layer's matrix product

def shares(stats:pstats.Stats, parts:list) -> tuple[float, list]:
    "(total seconds, [(label, seconds)]) of a profile: each part's cumulative seconds (the outermost call's, summed)."
    total = max(ct for _, _, _, ct, _ in stats.stats.values())
    got = []
    for label, file, name in parts:
        got.append((label, sum(ct for (f, _, fn), (_, _, _, ct, _) in stats.stats.items()
                               if fn == name and f.replace(os.sep, '/').endswith(file))))
    got.append(('linear layers (matrix products, in all of the above)', stats.stats.get(LINEAR, (0, 0, 0, 0))[2]))
    return total, got

def show(title:str, total:float, got:list, wall:float):
    print(f'{title}: {total:.0f} s profiled ({wall:.0f} s wall with the profiler)')
    for label, s in got: print(f'  {label}: {s:.0f} s ({100 * s / total:.0f}%)')

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('run', help="the main job's run folder, as a path from the repository root")
    a = p.parse_args()
    folder = Path(a.run)
    if folder.is_absolute() or not (folder/'settings.json').is_file():
        sys.exit(f"{folder}: give the main job's run folder as a path from the repository root (its settings.json "
                 "records paths from there), e.g. runs/train/smollm2-135m-instruct-arithmetic-caopd-sdft-seed0")
    import torch
    from caopd.sources import data_dir
    from caopd.evaluation import evaluate
    from caopd.pipeline import run_eval_arguments
    from caopd.train import accept_record
    from caopd.runfolder import RunFolder
    run = RunFolder(folder)  # what the training stage writes, left out of the copy: the run is trained there afresh
    trained = {p.name for p in (run.trainer, run.checkpoint, run.training, run.log, run.rollouts)} | {'train_output.log'}
    work = Path(tempfile.mkdtemp(prefix='caopd-profile-'))
    try:
        copy = work/folder  # the same path from another root: the record's paths hold there
        shutil.copytree(folder, copy, ignore=lambda d, names: [n for n in names if Path(d) == folder and n in trained])
        env = dict(os.environ, CAOPD_DATA_DIR=str(data_dir() or ''), PYTHONPATH=str(Path.cwd()))
        os.chdir(work)
        settings = accept_record(copy/'settings.json')
        print(f"{folder}: {settings.method}, {settings.max_steps} steps; torch threads {torch.get_num_threads()}, "
              f"{os.cpu_count()} cores")
        prof, t0 = cProfile.Profile(), time.perf_counter()
        args = dataclasses.replace(run_eval_arguments(settings, settings.start, work/'eval'), backend='transformers')
        prof.runcall(evaluate, settings.start, args=args, progress=False)  # as caopd.pipeline.evaluation_stage calls it
        show('evaluation of the start', *shares(pstats.Stats(prof), PARTS['evaluation']), time.perf_counter() - t0)
        t0 = time.perf_counter()
        code = ('import cProfile, sys; cProfile.run("from caopd.train import main; code = main(sys.argv[2:])", sys.argv[1]); '
                'sys.exit(code)')  # the training process as the main job launches it (python -m caopd.train --settings FILE)
        res = subprocess.run([sys.executable, '-c', code, str(work/'train.prof'), '--settings', str(copy/'settings.json')],
                             env=env, capture_output=True, text=True)
        if res.returncode: sys.exit(f'training failed (exit {res.returncode}):\n{res.stderr[-3000:]}')
        show('training (its process)', *shares(pstats.Stats(str(work/'train.prof')), PARTS['training']),
             time.perf_counter() - t0)
    finally: shutil.rmtree(work, ignore_errors=True)

if __name__ == '__main__': main()
