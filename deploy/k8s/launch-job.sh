#!/usr/bin/env bash
# Launches one coload cohort as a Kubernetes Indexed Job: `bench-cohort render kubernetes` writes
# the Job from the cohort's flags (the one cohort spec: every flag bench-cohort run takes), and
# `kubectl create` submits it. No flag list lives here: everything after the options below goes
# to `bench-cohort render kubernetes` unchanged (see `bench-cohort render --help`).
#
#   deploy/k8s/launch-job.sh [--namespace NS] [--dry-run] --node NODE --resource KEY \
#     --workers infer=1,train=6 --mode timeslice [more cohort flags]
#
# --dry-run prints the Job instead of creating it. A cohort with --model-file prints where to copy
# the file on the claim first (the Pods check its SHA-256). BENCH_COHORT names the binary
# (default: bench-cohort on PATH).
set -euo pipefail

bench_cohort=${BENCH_COHORT:-bench-cohort}
namespace="" dry_run=0 pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n|--namespace)
      [[ $# -ge 2 ]] || { echo "error: $1 needs a value" >&2; exit 2; }
      namespace=$2; pass+=(--namespace "$2"); shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done
command -v "$bench_cohort" >/dev/null 2>&1 || { echo "error: $bench_cohort is not on PATH (set BENCH_COHORT)" >&2; exit 2; }

manifest=$("$bench_cohort" render kubernetes "${pass[@]}")
if [[ $dry_run -eq 1 ]]; then
  printf '%s\n' "$manifest"
  exit 0
fi
command -v kubectl >/dev/null 2>&1 || { echo "error: kubectl is not on PATH" >&2; exit 2; }
ns_args=()
[[ -z "$namespace" ]] || ns_args=(--namespace "$namespace")
printf '%s\n' "$manifest" | kubectl "${ns_args[@]}" create -f -
job=$(printf '%s\n' "$manifest" | sed -n 's/^  name: "\(.*\)"$/\1/p' | head -1)
experiment=$(printf '%s\n' "$manifest" | sed -n 's/^    coload\/experiment: "\(.*\)"$/\1/p' | head -1)
count=$(printf '%s\n' "$manifest" | sed -n 's/^  completions: \([0-9]*\)$/\1/p')
cat <<EOM
experiment: $experiment ($count worker(s))
wait:    kubectl${namespace:+ --namespace $namespace} wait --for=condition=complete job/$job --timeout=30m
collect: $(dirname "$0")/collect-artifacts.sh --experiment $experiment --count $count${namespace:+ --namespace $namespace}
EOM
