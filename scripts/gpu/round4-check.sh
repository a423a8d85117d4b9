#!/usr/bin/env bash
# The launcher and the MIG rules on a GPU host, in one device call: the restructured launcher and study run the
# paths only a GPU has, with the dist tarball's binaries. Writes $OUT/check.log and
# $OUT/runs.tar.gz.
#   - the node as the study now reads it (NVML topology with MIG mode) for the mig-check and
#     article plans (--dry-run);
#   - `study quick` on the GPU (time-slicing, unlimited MPS, solos), short windows;
#   - a serve worker beside two trainers under plugin-style MPS (replicas 7);
#   - an --out that holds a cohort's results is refused;
#   - the NVML test binary (.gpu/tests/real_nvml) against the real driver, where carried.
#   scripts/gpu/round4-check.sh [WINDOW_S]
set -uo pipefail
window=${1:-5}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/out/round4}
mkdir -p "$out"
log="$out/check.log"
# shellcheck source=use-dist.sh
. "$root/scripts/gpu/use-dist.sh" 2>> "$log"
runs=$(mktemp -d)
step() { # name, then a command
  local name=$1
  shift
  echo "=== $name ($(date -u +%T))" >> "$log"
  "$@" >> "$log" 2>&1
  echo "=== $name rc=$?" >> "$log"
}
step nvidia-smi nvidia-smi --query-gpu=index,name,uuid,driver_version,mig.mode.current,compute_mode --format=csv
if [[ -x "$root/.gpu/tests/real_nvml" ]]; then
  step real_nvml "$root/.gpu/tests/real_nvml" --test-threads=1 --nocapture
fi
step mig-check-dry "$bin/bench-cohort" study mig-check --out "$runs/mig-check" --dry-run
step article-dry "$bin/bench-cohort" study article --out "$runs/article" --dry-run
step quick "$bin/bench-cohort" study quick --out "$runs/quick" --worker-bin "$bin/bench-worker" \
  --window-s "$window" --no-progress-bar
step serve-mps-plugin "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$runs/serve-mps7" \
  --workers serve=1,train=2 --mode mps --mps-replicas 7 --rate 200 --slo-ms 25 \
  --window-s 10 --warmup-batches 10 --start-lead-s 3
step refuse-earlier "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$runs/serve-mps7" \
  --workers train=1 --mode timeslice
tar -C "$runs" -czf "$out/runs.tar.gz" .
rm -rf "$runs"
grep -E "^=== .* rc=|test result" "$log"
