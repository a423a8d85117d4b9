#!/usr/bin/env bash
# Submits one coload cohort to Polyaxon as the article does: one `polyaxon run` per replica, all
# with one fresh experiment id. `bench-cohort render polyaxon` writes the operations from the
# cohort's flags (the one cohort spec) into a new folder with launch.sh, which this script runs.
# No flag list lives here: everything after the options below goes to `bench-cohort render
# polyaxon` unchanged (see `bench-cohort render --help`).
#
#   deploy/polyaxon/launch-cohort.sh --project P --queue AGENT/QUEUE [--dir DIR] [--dry-run] \
#     --node NODE --resource KEY --workers infer=1,train=6 --mode timeslice [more cohort flags]
#
# The queue must admit all the runs at once: the workers meet at a barrier and fail (exit 11)
# if their peers are held back. --dry-run writes the operations and prints the commands.
# BENCH_COHORT names the binary (default: bench-cohort on PATH).
set -euo pipefail

bench_cohort=${BENCH_COHORT:-bench-cohort}
project="" queue="" dir="" dry_run=0 pass=()
need() { [[ $# -ge 2 ]] || { echo "error: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p|--project) need "$@"; project=$2; shift 2 ;;
    -q|--queue) need "$@"; queue=$2; shift 2 ;;
    --dir) need "$@"; dir=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done
[[ -n "$project" ]] || { echo "error: --project is required (the Polyaxon project that owns the runs)" >&2; exit 2; }
[[ -n "$queue" ]] || { echo "error: --queue is required: a queue that admits all the cohort's runs at once" >&2; exit 2; }
command -v "$bench_cohort" >/dev/null 2>&1 || { echo "error: $bench_cohort is not on PATH (set BENCH_COHORT)" >&2; exit 2; }
[[ -n "$dir" ]] || dir="coload-cohort-$(date -u +%Y%m%dT%H%M%S)-$$"

"$bench_cohort" render polyaxon --out "$dir" "${pass[@]}"
if [[ $dry_run -eq 1 ]]; then
  for f in "$dir"/replica-*.yaml; do
    printf 'polyaxon run -f %q -p %q -q %q\n' "$f" "$project" "$queue"
  done
  exit 0
fi
command -v polyaxon >/dev/null 2>&1 || { echo "error: the polyaxon CLI is not on PATH" >&2; exit 2; }
sh "$dir/launch.sh" "$project" "$queue"
