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

# mps_share_flags: reads $mode, $mps_replicas, $mps_unlimited (0/1), $mps_threads and $mps_memory
# (the launcher's --mps-* options) and sets `mps_share` to the bench-worker flags that declare the
# MPS share (issue 12), e.g. "--mps-replicas 7", or "" outside --mode mps. A worker under MPS must
# say which share it runs under: the node's device-plugin config decides it (mps-7 gives each
# client 100/7 % of the threads and 1/7 of the memory), and bench-worker checks it against what
# CUDA reports.
# shellcheck disable=SC2154,SC2034 # reads the sourcing script's options, sets its mps_share
mps_share_flags() {
  local given=()
  [[ -z "$mps_replicas" ]] || given+=(--mps-replicas)
  [[ "$mps_unlimited" -eq 0 ]] || given+=(--mps-unlimited)
  [[ -z "$mps_threads" && -z "$mps_memory" ]] || given+=(--mps-threads/--mps-memory)
  mps_share=""
  if [[ "$mode" != mps ]]; then
    [[ ${#given[@]} -eq 0 ]] || die "${given[0]} declares an MPS share, but --mode is $mode; use it with --mode mps"
    return
  fi
  [[ ${#given[@]} -eq 1 ]] || die "--mode mps needs exactly one share: --mps-replicas N (the node's device-plugin replicas: N; mps-7 in deploy/k8s/device-plugin), --mps-unlimited, or --mps-threads P --mps-memory SIZE"
  if [[ -n "$mps_replicas" ]]; then
    [[ "$mps_replicas" =~ ^[0-9]+$ && $((10#$mps_replicas)) -ge 1 && $((10#$mps_replicas)) -le 100 ]] \
      || die "--mps-replicas must be a whole number from 1 to 100, got '$mps_replicas'"
    mps_share="--mps-replicas $((10#$mps_replicas))"
  elif [[ "$mps_unlimited" -eq 1 ]]; then
    mps_share="--mps-unlimited"
  else
    [[ "$mps_threads" =~ ^[0-9]+$ && $((10#$mps_threads)) -ge 1 && $((10#$mps_threads)) -le 100 ]] \
      || die "--mps-threads must be a whole percentage from 1 to 100 (with --mps-memory), got '$mps_threads'"
    [[ "$mps_memory" =~ ^[0-9]+(B|KiB|MiB|GiB|TiB|Ki|Mi|Gi|Ti|kB|KB|MB|GB|TB)?$ ]] \
      || die "--mps-memory must be a size such as 20GiB (with --mps-threads), got '$mps_memory'"
    mps_share="--mps-threads $((10#$mps_threads)) --mps-memory $mps_memory"
  fi
}
