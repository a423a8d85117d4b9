#!/usr/bin/env bash
# Submits one coload cohort to Polyaxon: one `polyaxon run` of polyaxonfile.yaml per replica, all
# with one fresh experiment id, then prints how to download each run's artifacts into
# <download-dir>/worker-<i>/ and how to summarize them.
#
# Why one run per replica and not a matrix: each worker must know its replica id and the cohort
# size before it starts, and the runs must all be admitted together; see cohort-operation.yaml for
# the matrix form and its caveat.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  cat <<'EOF'
usage: launch-cohort.sh --project PROJECT --queue AGENT/QUEUE --node NODE --mode MODE
                        (--workload train|infer --count N | --workload SPEC) [options]

Submits one cohort: one Polyaxon run per replica, one shared fresh experiment id.

required:
  --project, -p PROJECT   Polyaxon project ('name' or 'owner/name')
  --queue, -q QUEUE       agent queue ('agent/queue'); it must admit all N runs at once
  --node NODE             the node's kubernetes.io/hostname label (every worker runs there)
  --mode MODE             exclusive | mig | timeslice | mig-timeslice | mps (how NODE is prepared)
  --workload W            train or infer (with --count N), or a mixed spec such as
                          infer=1,train=6 (replicas are numbered in spec order: here infer is 0)
  --count N               cohort size; optional with a mixed spec (must then equal its sum)

options:
  --experiment ID         use this id instead of a fresh one ([A-Za-z0-9._-], 1-128 chars);
                          never reuse the id of an earlier cohort
  --file PATH             component to run (default: polyaxonfile.yaml beside this script)
  --image IMAGE           worker image (default: the component's `image` input)
  --window-s S            timed window, seconds (default: the component's, 45)
  --warmup-batches N      untimed batches before the barrier (default: the component's, 20)
  --join-timeout-s S      barrier wait for peers, seconds (default: the component's, 600)
  --seed N                seed for weights and inputs (default: the component's, 0)
  --mps-replicas N        --mode mps: the share of the node's device-plugin config (replicas: N;
                          mps-7 gives each client 14 % of the threads and 1/7 of the memory)
  --mps-unlimited         --mode mps: MPS without per-client limits
  --mps-threads P --mps-memory SIZE
                          --mode mps: an explicit share (e.g. 50 and 20GiB)
  --download-dir DIR      where the printed download commands put worker-<i>/ (default: downloaded)
  --dry-run               print the polyaxon commands instead of running them
  -h, --help              this text

The queue must admit the whole cohort at once. A queue that admits one job at a time cannot run
a cohort: the first worker waits at the barrier for peers the queue holds back, and fails after
--join-timeout-s (exit 11, barrier_timeout); the others then fail the same way, one by one.
EOF
}

die() {
  echo "error: $*" >&2
  echo "run 'launch-cohort.sh --help' for usage" >&2
  exit 2
}

need_value() {
  [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die "$1 needs a value"
}

# shellcheck source=SCRIPTDIR/../lib/cohort-args.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)/cohort-args.sh"

project="" queue="" node="" mode="" workload="" count="" experiment=""
file="$here/polyaxonfile.yaml" image="" window_s="" warmup_batches="" join_timeout_s="" seed=""
download_dir="downloaded" dry_run=0
mps_replicas="" mps_unlimited=0 mps_threads="" mps_memory=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    -p|--project) need_value "$@"; project=$2; shift 2 ;;
    -q|--queue) need_value "$@"; queue=$2; shift 2 ;;
    --node) need_value "$@"; node=$2; shift 2 ;;
    --mode) need_value "$@"; mode=$2; shift 2 ;;
    --workload|--workers) need_value "$@"; workload=$2; shift 2 ;;
    --count) need_value "$@"; count=$2; shift 2 ;;
    --experiment) need_value "$@"; experiment=$2; shift 2 ;;
    --file) need_value "$@"; file=$2; shift 2 ;;
    --image) need_value "$@"; image=$2; shift 2 ;;
    --window-s) need_value "$@"; window_s=$2; shift 2 ;;
    --warmup-batches) need_value "$@"; warmup_batches=$2; shift 2 ;;
    --join-timeout-s) need_value "$@"; join_timeout_s=$2; shift 2 ;;
    --seed) need_value "$@"; seed=$2; shift 2 ;;
    --mps-replicas) need_value "$@"; mps_replicas=$2; shift 2 ;;
    --mps-unlimited) mps_unlimited=1; shift ;;
    --mps-threads) need_value "$@"; mps_threads=$2; shift 2 ;;
    --mps-memory) need_value "$@"; mps_memory=$2; shift 2 ;;
    --download-dir) need_value "$@"; download_dir=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done

# Required values, each with the reason it cannot be guessed.
[[ -n "$project" ]] || die "--project is required (the Polyaxon project that owns the runs)"
[[ -n "$queue" ]] || die "--queue is required: the cohort needs a queue that admits all its runs at once (a queue admitting one job at a time cannot run a cohort)"
[[ -n "$node" ]] || die "--node is required: every worker of a cohort must run on the same prepared node"
[[ -n "$mode" ]] || die "--mode is required (exclusive, mig, timeslice, mig-timeslice or mps: how --node shares its GPU)"
[[ -n "$workload" ]] || die "--workload is required (train, infer, or a mixed spec such as infer=1,train=6)"

case "$mode" in
  exclusive|mig|timeslice|mig-timeslice|mps) ;;
  *) die "--mode '$mode' is not one of exclusive, mig, timeslice, mig-timeslice, mps" ;;
esac

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
for pair in "window-s:$window_s" "warmup-batches:$warmup_batches" "join-timeout-s:$join_timeout_s" "seed:$seed"; do
  name=${pair%%:*} value=${pair#*:}
  [[ -z "$value" ]] || is_uint "$value" || die "--$name must be a whole number, got '$value'"
done
[[ -z "$window_s" || "$window_s" -gt 0 ]] || die "--window-s must be at least 1"
[[ -z "$join_timeout_s" || "$join_timeout_s" -gt 0 ]] || die "--join-timeout-s must be at least 1"
[[ -f "$file" ]] || die "component file '$file' does not exist"

# Expand the workload into one entry per replica, in order.
workloads=()
expand_workloads
# The MPS share every worker declares (empty outside --mode mps).
mps_share_flags

# A fresh experiment id for every cohort: the barrier directory is keyed by it, and reusing one
# mixes two cohorts' records.
[[ -n "$experiment" ]] || experiment=$(fresh_experiment_id)
[[ "$experiment" =~ ^[A-Za-z0-9._-]{1,128}$ && "$experiment" != *..* ]] \
  || die "--experiment '$experiment' must be 1-128 characters of [A-Za-z0-9._-] without '..'"

if [[ $dry_run -eq 0 ]] && ! command -v polyaxon >/dev/null 2>&1; then
  die "the polyaxon CLI is not on PATH (pip install polyaxon, then polyaxon config set --host=...)"
fi

short=${experiment:0:8}
echo "cohort $experiment: $count worker(s) on node $node, mode $mode${mps_share:+ ($mps_share)}, queue $queue" >&2
echo "the queue must admit all $count runs at once, or the workers time out at the barrier" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

uuids=()
for ((r = 0; r < count; r++)); do
  cmd=(polyaxon run -f "$file" -p "$project" -q "$queue"
    --name "coload-$short-r$r" --tags "coload,$experiment"
    -P "experiment=$experiment" -P "node_name=$node" -P "mode=$mode"
    -P "replica=$r" -P "count=$count" -P "workload=${workloads[$r]}")
  [[ -z "$image" ]] || cmd+=(-P "image=$image")
  [[ -z "$window_s" ]] || cmd+=(-P "window_s=$window_s")
  [[ -z "$warmup_batches" ]] || cmd+=(-P "warmup_batches=$warmup_batches")
  [[ -z "$join_timeout_s" ]] || cmd+=(-P "join_timeout_s=$join_timeout_s")
  [[ -z "$seed" ]] || cmd+=(-P "seed=$seed")
  [[ -z "$mps_share" ]] || cmd+=(-P "mps_share=$mps_share")
  if [[ $dry_run -eq 1 ]]; then
    printf '%q ' "${cmd[@]}"
    echo
    uuids+=("RUN_UUID_$r")
    continue
  fi
  # `-o path=FILE` makes the CLI write the created run as JSON, which carries its uuid. (The CLI
  # skips uploads when -o is given, which is fine: the image carries the worker; no `-u` here.)
  out="$tmp/run-$r.json"
  if ! "${cmd[@]}" -o "path=$out" >"$tmp/run-$r.log" 2>&1 || [[ ! -s "$out" ]]; then
    cat "$tmp/run-$r.log" >&2
    echo "error: submitting replica $r failed; replicas 0..$((r - 1)) were submitted and will fail at the barrier without it" >&2
    for ((k = 0; k < r; k++)); do
      echo "  stop them: polyaxon ops stop -p $project -uid ${uuids[$k]}" >&2
    done
    exit 1
  fi
  uuid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["uuid"])' "$out") \
    || { echo "error: could not read the run uuid from the CLI's output for replica $r" >&2; exit 1; }
  uuids+=("$uuid")
  echo "replica $r (${workloads[$r]}): run $uuid" >&2
done

cat <<EOF

experiment: $experiment
When every run has succeeded, download each worker's artifacts:
EOF
for ((r = 0; r < count; r++)); do
  echo "polyaxon ops artifacts -p $project -uid ${uuids[$r]} -f outputs/worker.json -f outputs/batches.jsonl -f outputs/telemetry.jsonl --path $download_dir/.run-$r"
  echo "mv $download_dir/.run-$r/outputs $download_dir/worker-$r && rmdir $download_dir/.run-$r"
done
printf '\nThen summarize the cohort:\nbench-summarize'
for ((r = 0; r < count; r++)); do printf ' %s/worker-%d' "$download_dir" "$r"; done
printf ' --out %s.summary.json\n' "$experiment"
