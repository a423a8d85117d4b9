#!/usr/bin/env bash
# Renders the report of the H200 capacity searches (p99 <= 25 ms and <= 10 ms) by resuming them as
# a study (docs/results/data/2026-12-01-round3/capacity-report/study-plan.toml): no worker runs.
#   scripts/results/capacity-report.sh [OUT]   (default: that folder's report/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
data=docs/results/data
here=$data/2026-12-01-round3/capacity-report
out=${1:-$here}
scripts/with-libtorch cargo build -q -p bench-cohort
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/study/cohorts"
for search in solo timeslice6 mps-plugin6 mps-unlimited6; do
  case $search in solo) policy=exclusive name=solo ;; *) policy=${search%6} name=6 ;; esac
  cp -r "$data/2026-11-30-round2/capacity/$search" "$work/study/cohorts/$policy-$name-25ms-r1"
  cp -r "$data/2026-12-01-round3/capacity-10ms/$search" "$work/study/cohorts/$policy-$name-10ms-r1"
done
printf 'GPU 0: NVIDIA H200 (UUID: GPU-capacity-report)\n' > "$work/one-gpu.txt"
scripts/with-libtorch "$(scripts/target-dir)/debug/bench-cohort" study "$here/study-plan.toml" \
  --out "$work/study" --node-listing "$work/one-gpu.txt" --node-mps --no-progress-bar
mkdir -p "$out/report"
cp "$work/study/report/"* "$out/report/"
echo "wrote $out/report/"
