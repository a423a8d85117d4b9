#!/usr/bin/env bash
# A study with its dry run's estimate made just before it and its measured wall time, on a GPU
# host, with release binaries in BIN (libtorch from the host's PyTorch):
#   BIN=.gpu scripts/gpu/timed-study.sh PLAN OUT [bench-cohort study flags...]
# Writes OUT/ (the study), OUT-dryrun.txt, OUT.log (ending with the measured wall time) and
# OUT-gpu.csv (the card).
set -euo pipefail
plan=${1:?usage: BIN=DIR scripts/gpu/timed-study.sh PLAN OUT [flags...]}
out=${2:?usage: BIN=DIR scripts/gpu/timed-study.sh PLAN OUT [flags...]}
shift 2
bin=${BIN:?BIN: the folder of the release binaries}
torch_lib=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib
export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$(dirname "$out")"
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit --format=csv \
    > "$out-gpu.csv"
study() {
    "$bin/bench-cohort" study "$plan" --out "$out" --worker-bin "$bin/bench-worker" \
        --no-progress-bar "$@"
}
study --dry-run "$@" > "$out-dryrun.txt" 2>&1
t0=$(date +%s.%N)
study "$@" > "$out.log" 2>&1 || echo "exit $?" >> "$out.log"
t1=$(date +%s.%N)
echo "measured wall time: $(python3 -c "print(round($t1 - $t0, 1))") s" >> "$out.log"
