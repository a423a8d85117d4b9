#!/usr/bin/env bash
# Renders report.html for recorded cohorts and for a fresh `bench-cohort study quick` on this
# machine's CPU, opens each in headless Chromium (scripts/report-check.py), takes screenshots
# and fails on console errors, network fetches, empty charts or a verdict below the first
# screen. Installs Debian's chromium-headless-shell once when it is missing and we are root.
#   scripts/report-check.sh [OUT=<target dir>/report-check]
# OUT/<name>/report/report.html and OUT/<name>/shots/{first-screen,full-page,full-page-open,
# first-cohort}.png for name = fixtures (the H200 captures in fixtures/h200), results (the
# cohorts behind docs/results.md), quick (the study, CPU workers) and capacity (the round-2 H200
# capacity searches, resumed as a study: the load curve and the capacity table).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=$(scripts/target-dir)
out=${1:-$target/report-check}

if ! command -v chromium-headless-shell >/dev/null && ! command -v chromium >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing chromium-headless-shell (Debian package, about 220 MB, once)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null
  else
    echo "error: no headless Chromium; run: sudo apt-get install chromium-headless-shell" >&2
    exit 2
  fi
fi

scripts/with-libtorch cargo build -q -p bench-summarize -p bench-cohort -p bench-worker
bin=$target/debug
rm -rf "$out"
mkdir -p "$out"

h200=fixtures/h200
"$bin/bench-summarize" compare "$h200/exclusive-solo-train" "$h200/timeslice-mixed-r1" \
  "$h200/mps-train4" --baseline "$h200/exclusive-solo-train" --out "$out/fixtures/report" >/dev/null

data=docs/results/data
"$bin/bench-summarize" compare "$data"/*/summary.json \
  --baseline "$data/exclusive-solo-train/summary.json" "$data/exclusive-solo-infer/summary.json" \
  --out "$out/results/report" >/dev/null

: > "$out/no-gpu.txt" # an empty `nvidia-smi -L`: CPU workers, whatever this machine has
# The workers link libtorch and carry no RUNPATH: with-libtorch puts it on LD_LIBRARY_PATH.
OMP_NUM_THREADS=1 scripts/with-libtorch "$bin/bench-cohort" study quick --out "$out/quick" --node-listing "$out/no-gpu.txt" \
  --no-progress-bar > "$out/quick.txt" 2> "$out/quick.log" ||
  { cat "$out/quick.log" "$out/quick.txt"; exit 1; }

# The H200 capacity searches (round 2) as a study that resumes them: no worker runs, and its
# report is the capacity chart, the load curve and the capacity table. The folder names are the
# plan's (<policy>-<name>-r1): exclusive-solo-r1, timeslice-6-r1, mps-plugin-6-r1, ...
cap=docs/results/data/2026-11-30-round2/capacity
mkdir -p "$out/capacity/cohorts"
for search in solo timeslice6 mps-plugin6 mps-unlimited6; do
  case $search in solo) policy=exclusive name=solo ;; *) policy=${search%6} name=6 ;; esac
  cp -r "$cap/$search" "$out/capacity/cohorts/$policy-$name-r1"
done
printf 'GPU 0: NVIDIA H200 (UUID: GPU-report-check)\n' > "$out/one-gpu.txt"
scripts/with-libtorch "$bin/bench-cohort" study "$cap/study-plan.toml" --out "$out/capacity" \
  --node-listing "$out/one-gpu.txt" --node-mps --no-progress-bar > "$out/capacity.txt" 2> "$out/capacity.log" ||
  { cat "$out/capacity.log" "$out/capacity.txt"; exit 1; }
grep -q "4 complete (4 from earlier runs)" "$out/capacity.txt" ||
  { echo "error: the round-2 capacity searches did not resume as complete" >&2; cat "$out/capacity.txt"; exit 1; }

status=0
for name in fixtures results quick capacity; do
  python3 scripts/report-check.py "$out/$name/report/report.html" "$out/$name/shots" || status=1
done
exit $status
