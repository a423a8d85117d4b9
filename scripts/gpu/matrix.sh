#!/usr/bin/env bash
# Runs a plan of cohorts on a GPU host: lanes (one per GPU) in parallel, the cohorts of a lane one
# after another. Plan lines: `<gpu index> <name> <bench-cohort arguments...>` ('#' comments).
#   scripts/gpu/matrix.sh PLAN OUTDIR
# Each cohort goes to OUTDIR/<name>/ with bench-cohort's stdout/stderr beside it; failures are
# listed in OUTDIR/failed.txt (a failed cohort is reported, never dropped).
set -euo pipefail
plan=$1
out=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$root/.gpu/bin"
mkdir -p "$out"
: > "$out/failed.txt"
if [[ -z "${LD_LIBRARY_PATH:-}" ]] || ! ls "${LD_LIBRARY_PATH%%:*}"/libtorch.so >/dev/null 2>&1; then
  LD_LIBRARY_PATH="$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib"
  export LD_LIBRARY_PATH
fi
lanes=$(awk '!/^#/ && NF {print $1}' "$plan" | sort -u)
for lane in $lanes; do
  (
    export CUDA_VISIBLE_DEVICES=$lane
    awk -v l="$lane" '!/^#/ && NF && $1 == l' "$plan" | while read -r _ name rest; do
      echo "$(date -u +%T) lane $lane: $name ($rest)"
      rc=0
      # shellcheck disable=SC2086 # the plan's arguments are meant to split
      "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$out/$name" $rest \
          > "$out/$name.summary.txt" 2> "$out/$name.stderr" < /dev/null || rc=$?
      if [[ $rc -ne 0 ]]; then
        echo "$name rc=$rc" >> "$out/failed.txt"
        echo "$(date -u +%T) lane $lane: $name FAILED (rc=$rc)"
      fi
    done
  ) &
done
wait
echo "done; failed cohorts:"; cat "$out/failed.txt"
