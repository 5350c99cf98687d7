#!/usr/bin/env bash
# The executed papermill notebooks the site shows (docs/build.py puts docs/executed/<path> at nbs/<path>), remade from
# the committed runs and data, and README.md beside them saying what made each:
#
#   docs/executed/make.sh      # seeds, cascade, evaluate and the 14 reproduce notebooks, about 10 minutes on 2 cores
#
# What they write goes to runs/site/ (gitignored), not over the committed tables and figures in figures/ (the tests
# check those against the same runs), and without PNGs. The reproduce notebooks read figures/runs alone (not the local
# runs/), so a fresh clone makes the same pages. train.ipynb is the README's main job (about 11 minutes), copied by hand
# (then write its commit in its row of README.md, which this script keeps):
#
#   mkdir -p runs/train && .ci/env papermill nbs/train.ipynb runs/train/train.ipynb && cp runs/train/train.ipynb docs/executed/
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=runs/site
commit=$(git rev-parse --short HEAD)
rows=("$(grep '^| `train.ipynb`' docs/executed/README.md || echo '| `train.ipynb` | (not made yet) | |')")
run() {  # run NOTEBOOK [papermill -p NAME VALUE ...]: nbs/X.ipynb -> docs/executed/X.ipynb, and its row in README.md
  local nb=$1; shift
  local dest=docs/executed/${nb#nbs/}
  mkdir -p "$(dirname "$dest")"
  echo "$nb" >&2
  .ci/env papermill --no-progress-bar "$nb" "$dest" "$@"
  # the commit, and whether the package or the notebook differed from it (a run made while working on them)
  local state=$commit
  git diff --quiet HEAD -- caopd "$nb" || state="$commit + uncommitted changes to caopd/ or the notebook"
  rows+=("| \`${nb#nbs/}\` | \`.ci/env papermill $nb $dest $*\` | $state, $(date -u +%F) |")
}
run nbs/seeds.ipynb -p out_dir "$out/seeds" -p png False
R=figures/runs/cpu  # the README's laptop cascade (figures/cascade/arithmetic)
run nbs/cascade.ipynb -p out_dir "$out/cascade" -p png False \
  -p runs "$R/arithmetic-caopd-sdft-0,$R/arithmetic-sdft-0,$R/arithmetic-caopd-sdpo-0,$R/arithmetic-sdpo-0"
run nbs/evaluate.ipynb -p out "$out/evaluate" -p overwrite True  # the embedded model on 8 Chemistry questions
for nb in nbs/reproduce/*.ipynb; do
  run "$nb" -p runs_dir figures/runs -p out_dir "$out/reproduce" -p png False
done

{
  echo '# Executed papermill notebooks'
  echo
  echo 'The site (`docs/build.py`) shows each papermill notebook of `nbs/` with the outputs of the run here, at the same path'
  echo 'under `nbs/`, and says so on a page whose run ran an earlier version of the notebook. `docs/executed/make.sh`'
  echo 'remakes them all but `train.ipynb` (see its header) and writes this file.'
  echo
  echo '| notebook | command | made at |'
  echo '| --- | --- | --- |'
  printf '%s\n' "${rows[@]}"
} > docs/executed/README.md
