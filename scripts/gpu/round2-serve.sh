#!/usr/bin/env bash
# Serving capacity on one H200 in one device call: the highest Poisson request rate
# one serve worker sustains at p99 <= SLO_MS, alone and beside six trainers under time-slicing,
# plugin-style MPS (replicas 7) and unlimited MPS; one full cohort per probe (bracket, then
# bisect), short windows (WINDOW_S, default 10) and few probes (MAX_PROBES, default 5) to fit
# the call. Then, if time is left, what GPM sampling costs a solo trainer (gpm-overhead.sh).
#   scripts/gpu/round2-serve.sh            (dist/ carried; results under $OUT)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/out/round2-serve}
mkdir -p "$out"
log="$out/serve.log"
# shellcheck source=use-dist.sh
. "$root/scripts/gpu/use-dist.sh" 2>> "$log"
slo=${SLO_MS:-25}
window=${WINDOW_S:-10}
probes=${MAX_PROBES:-5}
runs=$(mktemp -d)
search() { # name start-rate bench-cohort flags...
  local name=$1 rate=$2
  shift 2
  {
    echo "=== $name ($(date -u +%T))"
    "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$runs/$name" \
      --window-s "$window" --warmup-batches 10 --start-lead-s 2 --quiet \
      --find-capacity --slo-ms "$slo" --slo-quantile 0.99 --rate "$rate" --rate-min 25 \
      --rate-max 16000 --max-probes "$probes" --capacity-tolerance 0.2 "$@" 2>&1
    echo "=== $name rc=$?"
  } >> "$log"
}
search solo 2000 --workers serve=1 --mode exclusive
search timeslice6 150 --workers serve=1,train=6 --mode timeslice
search mps-plugin6 300 --workers serve=1,train=6 --mode mps --mps-replicas 7
search mps-unlimited6 300 --workers serve=1,train=6 --mode mps --mps-unlimited
tar -C "$runs" -czf "$out/capacity.tar.gz" --exclude='*/mps/pipe' .
grep -E "^=== |capacity at|probe [0-9]+:" "$log"
