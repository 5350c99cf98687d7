#!/usr/bin/env bash
# The GPU checks of issue 29 (item 10) and the step benchmark of issue 31 (item 5), as one script for a bare GPU
# machine staged by ../shared/gpu/stage.sh; writes
# everything under $OUT (default runs/gpu-checks). Each part is timed and kept going if another fails.
set -uo pipefail
OUT=${OUT:-runs/gpu-checks}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch, transformers, trl; print(torch.__version__, torch.backends.cudnn.version(), transformers.__version__, trl.__version__)"; git rev-parse HEAD 2>/dev/null; } > "$OUT/machine.txt" 2>&1
t() { local name=$1; shift; local t0=$SECONDS; "$@" > "$OUT/$name.log" 2>&1; echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"; }
# 1. the kernel bug, cuDNN SDPA on and off (torch-only repro, and two bf16 steps of the embedded model at length 192)
t sdpa_nan python3 tests/gpu/sdpa_nan.py
# 2. the README main job's training with seed 3 (the run that saved NaN weights on 2026-11-26), as caopd.train runs it
#    now (cuDNN SDPA off where affected, non-finite steps skipped), then its after-training evaluation
t main_s3 python3 -m caopd.train --seed 3 --out "$OUT/main-s3"
t main_s3_eval python3 -m caopd.evaluation --model "$OUT/main-s3/checkpoint" --domain arithmetic --out "$OUT/main-s3/eval-after" --max_new_tokens 64 --batch_size 64 --seed 3
# 3. the same with the backend fix forced off: only the skip guard stands between a NaN step and the weights
t main_s3_fix_off python3 -c "import sys, caopd.guards as g; g.cudnn_sdpa_affected = lambda *a: False; from caopd.train import main; main(sys.argv[1:])" --seed 3 --out "$OUT/main-s3-fix-off"
# 4. the smoke test with vLLM off, on a random Qwen3-shaped 176M model (no hub here), as on 2026-11-26
python3 - "$OUT/qwen3-176m" <<'PY'
import sys, torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from caopd.models import load_tokenizer
tok = load_tokenizer('smollm2-135m-instruct')
cfg = Qwen3Config(vocab_size=len(tok), hidden_size=1024, intermediate_size=3072, num_hidden_layers=8, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
torch.manual_seed(0); Qwen3ForCausalLM(cfg).save_pretrained(sys.argv[1]); tok.save_pretrained(sys.argv[1])
PY
t smoke python3 -m caopd.smoke --out "$OUT/smoke" --model "$OUT/qwen3-176m" --use_vllm false --max_completion_length 256
# 5. CaOPD's time per step against its TRL backbone on the GPU (bf16), from the warmed start, tokens per step beside it
t bench_trainer sh -c 'python3 tests/benchmarks/bench_trainer.py --prompts 8 --k 8 --steps 4 --rounds 2 > "$1"' _ "$OUT/bench_trainer.txt"
rm -rf "$OUT/qwen3-176m" "$OUT"/*/checkpoint "$OUT"/*/trainer "$OUT"/*/warmup/checkpoint "$OUT"/*/warmup/trainer "$OUT/smoke"/*/checkpoint "$OUT/smoke"/*/trainer "$OUT/smoke"/*/warmup "$OUT/smoke/tiny-model" 2>/dev/null
# what comes back in few files (the device tool returns at most 8): every log and run folder, without weights, in one
# archive; beside it the summary, the machine and the benchmark's table
tar czf "/tmp/runs.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && mv /tmp/runs.tgz "$OUT/runs.tgz"
find "$OUT" -mindepth 1 -maxdepth 1 ! -name runs.tgz ! -name summary.txt ! -name machine.txt ! -name bench_trainer.txt -exec rm -rf {} +
cat "$OUT/summary.txt" "$OUT/bench_trainer.txt"
