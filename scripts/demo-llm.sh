#!/usr/bin/env bash
# `just demo-llm`: co-located LLM decode workers on this machine, then their tokens/s and time per
# output token (TPOT). The `serve-llm` workload (open loop, continuous batching: TTFT and TPOT
# per request) is not wired into the worker yet (docs/llm.md); until it is, this runs the closed
# loop `decode` workload.
# With an NVIDIA GPU: 4 decode workers of GPT-2 small (bf16), batch 8, 128-token prompts,
# 128 tokens generated per cycle, time-sliced on GPU 0, a 20 s window.
# Without one: 2 decode workers of the tiny GPT-2 preset on the CPU (fp32), batch 4, 32-token
# prompts, 32 tokens per cycle, a 10 s window.
# COLOAD_DEMO_PROFILE=debug uses the debug build (faster to build, slower to run).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
profile=${COLOAD_DEMO_PROFILE:-release}
case "$profile" in
  release) scripts/with-libtorch cargo build --release -q -p bench-worker -p bench-cohort -p bench-summarize ;;
  debug) scripts/with-libtorch cargo build -q -p bench-worker -p bench-cohort -p bench-summarize ;;
  *) echo "error: COLOAD_DEMO_PROFILE must be release or debug, got $profile" >&2; exit 2 ;;
esac
# Wherever cargo puts its builds (CARGO_TARGET_DIR or ./target).
bin="$(scripts/target-dir)/$profile"
out="runs/demo-llm-$(date -u +%Y%m%dT%H%M%S)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); running on cuda:0" >&2
  set -- --workers decode=4 --device cuda:0 --model gpt2-small --batch-size 8 \
    --prompt-tokens 128 --output-tokens 128 --window-s 20
else
  echo "no GPU found: 2 decode workers of gpt2-tiny on the CPU" >&2
  set -- --workers decode=2 --device cpu --model gpt2-tiny --batch-size 4 \
    --prompt-tokens 32 --output-tokens 32 --window-s 10 --warmup-batches 32 --start-lead-s 3
fi
scripts/with-libtorch "$bin/bench-cohort" --mode timeslice --out "$out" "$@"
echo "tokens/s and TPOT per worker: the 'tokens (decode workers)' table above, and $out/summary.json (workers[].decode)" >&2
echo "artifacts: $out/worker-*/ (worker.json with config.llm, batches.jsonl with each iteration's phase)" >&2
