#!/usr/bin/env bash
# `just demo`: a real cohort end to end on this machine, then its summary.
# With an NVIDIA GPU: 1 infer + 2 train workers time-sliced on GPU 0 with the article's shapes
# (ResNet18, batch 32, 224x224) and a 20 s window. Without one: the same mix on the CPU with
# small shapes (batch 4, 64x64) and a 15 s window, so it ends about a minute after the build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Wherever cargo puts its output: $CARGO_TARGET_DIR, a cargo config, or ./target.
bin="$(scripts/target-dir)/release"
scripts/with-libtorch cargo build --release -q -p bench-worker -p bench-cohort -p bench-summarize
out="runs/demo-$(date -u +%Y%m%dT%H%M%S)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); running on cuda:0" >&2
  set -- --device cuda:0 --window-s 20
else
  echo "no GPU found: running on the CPU with small shapes (batch 4, 64x64), one thread per worker" >&2
  # Three workers share this machine's cores; one intra-op thread each keeps them from thrashing.
  export OMP_NUM_THREADS=1
  set -- --device cpu --batch-size 4 --image-size 64 --window-s 15 --warmup-batches 3 --start-lead-s 3
fi
scripts/with-libtorch "$bin/bench-cohort" --workers infer=1,train=2 --mode timeslice \
  --out "$out" "$@"
echo "artifacts: $out/worker-*/ (worker.json, batches.jsonl, log); summary: $out/summary.json" >&2
echo "summarize again or compare: $bin/bench-summarize $out/worker-* --format markdown" >&2
