# shellcheck shell=bash
# Shared by deploy/polyaxon/launch-cohort.sh and deploy/k8s/launch-job.sh: the cohort's workload
# list and a fresh experiment id. Source it after defining `die MESSAGE`.

# expand_workloads: reads $workload (train, infer, or a spec such as infer=1,train=6) and $count;
# sets the array `workloads` (one entry per replica, in order) and `count`.
# shellcheck disable=SC2154 # $workload and $count are the sourcing script's parsed options
expand_workloads() {
  workloads=()
  local parts part kind n k
  if [[ "$workload" == *=* ]]; then
    IFS=',' read -r -a parts <<<"$workload"
    for part in "${parts[@]}"; do
      [[ "$part" =~ ^(train|infer)=([0-9]+)$ ]] || die "bad part '$part' in --workload '$workload' (expected train=N or infer=N, comma-separated)"
      kind=${BASH_REMATCH[1]} n=$((10#${BASH_REMATCH[2]}))
      [[ $n -ge 1 ]] || die "'$part' in --workload asks for no worker; leave it out"
      for ((k = 0; k < n; k++)); do workloads+=("$kind"); done
    done
    if [[ -n "$count" ]]; then
      [[ "$count" =~ ^[0-9]+$ ]] || die "--count must be a whole number, got '$count'"
      [[ $((10#$count)) -eq ${#workloads[@]} ]] || die "--count $count does not match --workload '$workload', which makes ${#workloads[@]} workers"
    fi
    count=${#workloads[@]}
  else
    [[ "$workload" == train || "$workload" == infer ]] || die "--workload '$workload' is not train, infer or a spec such as infer=1,train=6"
    [[ -n "$count" ]] || die "--count is required with --workload $workload (the number of workers)"
    [[ "$count" =~ ^[0-9]+$ ]] || die "--count must be a whole number, got '$count'"
    count=$((10#$count))
    [[ $count -ge 1 ]] || die "--count must be at least 1"
    for ((k = 0; k < count; k++)); do workloads+=("$workload"); done
  fi
  [[ $count -le 64 ]] || die "--count $count is more workers than one node can host (at most 64)"
}

# fresh_experiment_id: prints a new lowercase UUID. A fresh id for every cohort: the barrier
# directory is keyed by it, and reusing one mixes two cohorts' records.
fresh_experiment_id() {
  local id
  if command -v uuidgen >/dev/null 2>&1; then
    id=$(uuidgen)
  elif [[ -r /proc/sys/kernel/random/uuid ]]; then
    id=$(cat /proc/sys/kernel/random/uuid)
  else
    id=$(python3 -c 'import uuid; print(uuid.uuid4())')
  fi
  printf '%s' "$id" | tr '[:upper:]' '[:lower:]'
}
