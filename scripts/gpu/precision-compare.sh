#!/usr/bin/env bash
# One device call, one card: the plan scripts/gpu/precision.toml with fixed three repeats, then
# the same plan repeated to a precision, each with its dry run's estimate made just before and
# its measured wall time on the last line of its log.
#   BIN=.gpu scripts/gpu/precision-compare.sh OUT
# BIN holds release bench-cohort and bench-worker; libtorch comes from the host's PyTorch.
set -euo pipefail
out=${1:?usage: BIN=DIR scripts/gpu/precision-compare.sh OUT}
bin=${BIN:?BIN: the folder of the release binaries}
plan=scripts/gpu/precision.toml
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit --format=csv \
    > "$out/gpu.csv"
run() {
    local name=$1
    shift
    "$bin/bench-cohort" study "$plan" --out "$out/$name" --worker-bin "$bin/bench-worker" \
        --no-progress-bar --dry-run "$@" > "$out/$name-dryrun.txt" 2>&1
    local t0 t1
    t0=$(date +%s.%N)
    "$bin/bench-cohort" study "$plan" --out "$out/$name" --worker-bin "$bin/bench-worker" \
        --no-progress-bar "$@" > "$out/$name.log" 2>&1 || echo "exit $?" >> "$out/$name.log"
    t1=$(date +%s.%N)
    echo "measured wall time: $(python3 -c "print(round($t1 - $t0, 1))") s" >> "$out/$name.log"
}
run fixed
run precision --precision 0.05 --max-repeats 6
