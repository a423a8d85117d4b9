#!/usr/bin/env bash
# GPU checks in one device call: the GPU test binaries (NVML and GPM against the real driver,
# the workload on CUDA, CUDA-graph replay against eager), then three short cohorts that exercise
# the paths only a GPU runs (time-slicing and MPS with GPM and energy, a serve worker beside six
# trainers). Needs the dist tarball (`just dist`) and .gpu/tests (`scripts/gpu/test-binaries.sh`),
# both carried; writes $OUT/check.log and $OUT/cohorts.tar.gz.
#
#   scripts/gpu/check.sh [WINDOW_S]
set -uo pipefail
window=${1:-10}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/out/check}
mkdir -p "$out"
log="$out/check.log"
# The bundle's binaries, with the host's torch/lib first on LD_LIBRARY_PATH (env.sh).
# shellcheck source=use-dist.sh
. "$root/scripts/gpu/use-dist.sh" 2>> "$log"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,mig.mode.current,compute_mode --format=csv
  for t in real_nvml gpu gpu_graph; do
    echo "=== test $t ($(date -u +%T))"
    timeout 300 "$root/.gpu/tests/$t" --test-threads=1 --nocapture 2>&1
    echo "=== test $t rc=$?"
  done
} >> "$log" 2>&1

runs=$(mktemp -d)
cohort() { # name, then bench-cohort flags
  local name=$1
  shift
  {
    echo "=== cohort $name ($(date -u +%T))"
    "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$runs/$name" \
      --window-s "$window" --warmup-batches 10 --start-lead-s 3 "$@" 2>&1
    echo "=== cohort $name rc=$?"
  } >> "$log"
}
cohort timeslice-mixed --workers infer=1,train=6 --mode timeslice
cohort mps-mixed --workers infer=1,train=6 --mode mps --mps-unlimited
cohort timeslice-serve --workers serve=1,train=6 --mode timeslice --rate 300 --slo-ms 25
tar -C "$runs" -czf "$out/cohorts.tar.gz" .
rm -rf "$runs"
grep -E "^=== .* rc=|test result" "$log"
