#!/usr/bin/env bash
# Side-by-side performance comparison on one GPU (docs/performance.md):
#   (a) bench-worker, (b) PyTorch eager from Python, (c) the same step replayed from a CUDA graph,
# solo for train and infer, interleaved so drift hits all three alike; then the 7-worker
# time-slice train cohort for (a) and (b).
#   scripts/perf/compare.sh OUTDIR [WINDOW_S]
set -euo pipefail
out=$1
window=${2:-20}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The binaries come from the dist tarball (`just dist`): see scripts/gpu/use-dist.sh.
# shellcheck source=../gpu/use-dist.sh
. "$root/scripts/gpu/use-dist.sh"
py="$root/scripts/perf/pytorch_step.py"
mkdir -p "$out"
results="$out/perf.jsonl"
: > "$results"

for workload in train infer; do
  "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$out/worker-solo-$workload" \
    --count 1 --workload "$workload" --mode exclusive --window-s "$window" --quiet \
    > "$out/worker-solo-$workload.txt"
  for impl in eager graph; do
    python3 "$py" --impl "$impl" --workload "$workload" --window-s "$window" >> "$results"
  done
done

# Seven time-sliced workers: bench-worker cohort, then seven Python eager processes sharing a
# start instant far enough ahead for all of them to import torch and warm up.
"$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$out/worker-ts7-train" \
  --count 7 --workload train --mode timeslice --window-s "$window" --quiet \
  > "$out/worker-ts7-train.txt"
start_at=$(python3 -c 'import time; print(time.time() + 45)')
for i in 0 1 2 3 4 5 6; do
  python3 "$py" --impl eager --workload train --window-s "$window" --start-at "$start_at" \
    --label "ts7-replica-$i" >> "$out/eager-ts7.jsonl" &
done
wait
cat "$out/eager-ts7.jsonl" >> "$results"
echo "perf comparison written to $out"
