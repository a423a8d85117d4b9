#!/usr/bin/env bash
# `just demo-serve`: a serve worker beside trainers on this machine, then its request latency.
# With an NVIDIA GPU: 1 serve worker (Poisson, 500 requests/s, batches up to 32) beside 6
# trainers, time-sliced on GPU 0, article shapes, a 20 s window, judged against p99 <= 10 ms.
# Without one: 1 serve worker (Poisson, 20 requests/s, batches up to 8) beside 2 trainers on the
# CPU with small shapes (64x64) and a 15 s window, judged against p99 <= 500 ms.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/with-libtorch cargo build --release -q -p bench-worker -p bench-cohort -p bench-summarize
# Wherever cargo puts its builds (CARGO_TARGET_DIR or ./target).
bin="$(scripts/target-dir)/release"
out="runs/demo-serve-$(date -u +%Y%m%dT%H%M%S)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); running on cuda:0" >&2
  set -- --workers serve=1,train=6 --device cuda:0 --window-s 20 \
    --rate 500 --max-batch 32 --slo-ms 10
else
  echo "no GPU found: 1 serve worker beside 2 trainers on the CPU (64x64 images, one thread each)" >&2
  export OMP_NUM_THREADS=1
  set -- --workers serve=1,train=2 --device cpu --batch-size 4 --image-size 64 --window-s 15 \
    --warmup-batches 3 --start-lead-s 3 --rate 20 --max-batch 8 --slo-ms 500
fi
scripts/with-libtorch "$bin/bench-cohort" --mode timeslice --out "$out" "$@"
echo "artifacts: $out/worker-*/ (worker.json, batches.jsonl, requests.jsonl for the serve worker)" >&2
echo "judge another objective: $bin/bench-summarize $out --slo-ms 100 --slo-quantile 0.99" >&2
