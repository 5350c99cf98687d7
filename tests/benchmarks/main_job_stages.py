"""Where the README main job's time goes, stage by stage, read from the run folder it wrote; and how fast this machine
was that day, by the one stage that the committed run of the same settings made exactly as the main job makes it (the
format warm-up: the same 8 steps on the same 32 demonstrations), beside every committed laptop run's warm-up (8 steps
on the 32 demonstrations of its own seed).

    .ci/env python tests/benchmarks/main_job_stages.py RUN_FOLDER > tests/benchmarks/main_job_stages.txt

The run folder is the main job's (`runs/train/smollm2-135m-instruct-arithmetic-caopd-sdft-seed0`, or the one
`tests/benchmarks/timings.py --runs DIR` kept from its fresh clone). The shares are of the executed notebook's time
(papermill's record in `runs/train/train.ipynb`, beside the run folder as the README's command writes it; `--notebook`
names another), so what the stages leave is the rest of the command: the kernel's imports, the settings and prompts,
the training process's start, metrics and figures. A script, not a test: it reads seconds that runs recorded.
"""
import argparse, json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

def stages(folder:Path) -> dict:
    "Seconds of each stage, as the run's own files record them."
    read = lambda p: json.loads((folder/p).read_text())
    train = [json.loads(l) for l in (folder/'train_log.jsonl').read_text().splitlines() if l.strip()]
    return {'format warm-up': read('warmup/warmup.json')['seconds'],
            'evaluation before training': read('eval/before/report.json')['settings']['seconds'],
            'training': next(r['train_runtime'] for r in train if 'train_runtime' in r),
            'evaluation after training': read('eval/after/report.json')['settings']['seconds']}

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('run', help="the main job's run folder")
    p.add_argument('--committed', default=str(ROOT/'figures'/'runs'/'cpu'/'arithmetic-caopd-sdft-0'),
                   help="the committed run of the same settings (the laptop grid's seed 0 of CaOPD (SDFT)): its answers are compared")
    p.add_argument('--notebook', help="the executed notebook of the run (default: train.ipynb beside the run folder)")
    a = p.parse_args()
    folder = Path(a.run)
    got, warm = stages(folder), json.loads((folder/'warmup/warmup.json').read_text())
    notebook = Path(a.notebook) if a.notebook else folder.parent/'train.ipynb'
    if not notebook.is_file(): sys.exit(f"{notebook}: the executed notebook is not there; name it with --notebook")
    total = json.loads(notebook.read_text()).get('metadata', {}).get('papermill', {}).get('duration')  # all its cells
    if total is None: sys.exit(f"{notebook} holds no papermill duration: give the notebook papermill executed")
    rest = "the rest (imports, settings and prompts, the training process's start, metrics, figures)"
    got[rest] = total - sum(got.values())
    print(f"{folder.name}: {total:.0f} s in its notebook's cells (papermill's record of {notebook.name})")
    for k, v in got.items(): print(f"  {k}: {v:.0f} s ({v / total:.0%})")
    pngs, figures = len(list((folder/'figures').glob('*.png'))), len(list((folder/'figures').glob('*.json')))
    print(f"figures: {figures}, " + (f"{pngs} of them as PNG too" if pngs else
                                     "as HTML only (no chromium for kaleido's PNGs)"))
    speeds = sorted(json.loads(p.read_text())['tokens_per_second']
                    for p in (ROOT/'figures'/'runs'/'cpu').glob('arithmetic-*/warmup/warmup.json'))
    committed_speed = json.loads((Path(a.committed)/'warmup'/'warmup.json').read_text())['tokens_per_second']
    print(f"this machine's warm-up: {warm['tokens_per_second']:.0f} tokens/s; the committed run of the same settings' "
          f"{committed_speed:.0f}; the committed laptop runs' warm-ups (8 steps on 32 demonstrations each): "
          f"{speeds[0]:.0f} to {speeds[-1]:.0f} tokens/s, median {speeds[len(speeds) // 2]:.0f}, over {len(speeds)} runs")
    for which in ('before', 'after'):
        recs = lambda f: [json.loads(l) for l in (Path(f)/'eval'/which/'records.jsonl').read_text().splitlines() if l.strip()]
        new, old = recs(folder), recs(a.committed)
        pairs = list(zip(new, old, strict=True))
        same = sum(x['id'] == y['id'] and x['completion'] == y['completion'] for x, y in pairs)
        stated = sum(x.get('confidence') == y.get('confidence') for x, y in pairs)
        diff = max((abs(x['expected_confidence'] - y['expected_confidence']) for x, y in pairs
                    if x.get('expected_confidence') is not None and y.get('expected_confidence') is not None), default=0)
        print(f"evaluation {which}, against {Path(a.committed).relative_to(ROOT)}: {same} of {len(pairs)} answers the same word "
              f"for word, {stated} the same stated confidence, expected confidence within {diff:.1e}")
    print(json.dumps(dict(total=total, **got, warmup_tokens_per_second=warm['tokens_per_second'],
                          committed_run_warmup_tokens_per_second=committed_speed,
                          committed_warmup_tokens_per_second=[speeds[0], speeds[len(speeds) // 2], speeds[-1]])))

if __name__ == '__main__': main()
