#!/usr/bin/env bash
# Issue 41, item 6: the 24-step runs of nbs/grids/gpu.yaml made again with the readout (the expected stated
# confidence beside the stated one), each a whole run folder written by caopd-train (`python -m caopd.pipeline`),
# all of them at once on one GPU. For a bare GPU machine staged by ../shared/gpu/stage.sh; run from the checkout:
#   bash tests/gpu/readout_runs.sh
# Environment: OUT (what comes back: summary.txt, machine.txt, runs.tgz; default runs/gpu-readout), RUNS (the
# grid's run names, glob patterns), LIMIT (seconds a run may take before it is stopped), EXTRA (more caopd-train
# flags, which win over the grid's: a CPU rehearsal passes a tiny model and a short run).
set -uo pipefail
OUT=${OUT:-runs/gpu-readout}; RUNS=${RUNS:-'caopd-sdft-*-n24 sdft-*-n24'}; LIMIT=${LIMIT:-480}; EXTRA=${EXTRA:-}
root=$(mktemp -d)/runs; mkdir -p "$OUT" "$root"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  python3 -c "import torch, transformers, trl; print(torch.__version__, torch.backends.cudnn.version(), transformers.__version__, trl.__version__)"
  git rev-parse HEAD 2>/dev/null; } > "$OUT/machine.txt" 2>&1
# one line per run: its name, then its caopd-train flags (the grid's arguments; the run folder under $root; the
# weights dropped once evaluated)
python3 - "$root" $RUNS > "$root/commands.txt" <<'PY'
import fnmatch, shlex, sys
from caopd.arguments import RunArguments, cli_args
from caopd.runs import read_grid
for name, params in read_grid('nbs/grids/gpu.yaml')['runs']:
    if any(fnmatch.fnmatch(name, p) for p in sys.argv[2:]):
        params.pop('overwrite', None)  # a fresh folder: nothing to set aside
        print(name, shlex.join(cli_args(RunArguments(**params, out=f'{sys.argv[1]}/{name}', save_model=False))))
PY
export OMP_NUM_THREADS=2  # 16 cores shared by every run at once
while read -r name flags; do
  ( t0=$SECONDS; eval "timeout $LIMIT python3 -m caopd.pipeline $flags $EXTRA" > "$root/$name.log" 2>&1
    echo "$name: exit $? in $((SECONDS - t0)) s" >> "$OUT/summary.txt" ) &
done < "$root/commands.txt"
wait
nvidia-smi --query-gpu=memory.used --format=csv >> "$OUT/machine.txt" 2>&1
rm -rf "$root"/*/trainer "$root"/*/checkpoint "$root"/*/warmup/checkpoint "$root"/*/warmup/trainer
tar czf "$OUT/runs.tgz" -C "$(dirname "$root")" runs
cat "$OUT/summary.txt"; tail -n 3 "$root"/*.log
