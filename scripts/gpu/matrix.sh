#!/usr/bin/env bash
# Runs a plan of cohorts on a GPU host: lanes (one per GPU) in parallel, the cohorts of a lane one
# after another. Plan lines: `<gpu index> <name> <bench-cohort arguments...>` ('#' comments).
#   scripts/gpu/matrix.sh PLAN OUTDIR
# Each cohort goes to OUTDIR/<name>/ with bench-cohort's stdout/stderr beside it; failures are
# listed in OUTDIR/failed.txt (a failed cohort is reported, never dropped).
# The binaries come from the dist tarball (`just dist`): see scripts/gpu/use-dist.sh.
set -euo pipefail
plan=$1
out=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=use-dist.sh
. "$root/scripts/gpu/use-dist.sh"
mkdir -p "$out"
: > "$out/failed.txt"
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
