#!/usr/bin/env bash
# Launches one coload cohort as a Kubernetes Indexed Job (no Polyaxon): renders cohort-job.yaml
# (or the variant for --resource) with a fresh experiment id, the node, the cohort size and each
# index's workload, then `kubectl create`s it. --dry-run prints the manifest instead.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  cat <<'EOF'
usage: launch-job.sh --node NODE --mode MODE (--workload train|infer --count N | --workload SPEC)
                     [options]

Renders deploy/k8s/cohort-job*.yaml for one cohort and creates the Job with kubectl.

required:
  --node NODE           the node's kubernetes.io/hostname label (every worker runs there)
  --mode MODE           exclusive | mig | timeslice | mig-timeslice | mps (how NODE is prepared)
  --workload W          train or infer (with --count N), or a mixed spec such as infer=1,train=6
                        (indexes are numbered in spec order: here infer is index 0)
  --count N             cohort size; optional with a mixed spec (must then equal its sum)

options:
  --resource KEY        GPU resource each worker requests (default nvidia.com/gpu):
                          nvidia.com/gpu         exclusive, MIG single strategy, time-slicing or
                                                 MPS without rename
                          nvidia.com/gpu.shared  time-slicing or MPS with renameByDefault: true
                          nvidia.com/mig-PROFILE MIG mixed strategy, e.g. nvidia.com/mig-1g.10gb
                                                 (A100-80GB, H100-80GB), nvidia.com/mig-1g.18gb
                                                 (H200-141GB), nvidia.com/mig-1g.5gb (A100-40GB)
  --experiment ID       use this id instead of a fresh one (lowercase [a-z0-9-], 1-56 chars, as
                        it also names the Job); never reuse the id of an earlier cohort
  --image IMAGE         worker image (default coload/bench-worker:0.1.0)
  --window-s S          timed window, seconds (default 45)
  --mps-replicas N      --mode mps: the share of the node's device-plugin config (replicas: N;
                        mps-7 gives each client 14 % of the threads and 1/7 of the memory)
  --mps-unlimited       --mode mps: MPS without per-client limits
  --mps-threads P --mps-memory SIZE
                        --mode mps: an explicit share (e.g. 50 and 20GiB)
  --namespace, -n NS    namespace of the Job and of the gpu-benchmark-sync claim
  --dry-run             print the manifest and do not call kubectl
  -h, --help            this text

The node must have room for all N workers at once (2 CPUs, 4 GiB and one GPU unit each): the
workers meet at a barrier, and a worker whose peers never start fails after 600 s (exit 11).
EOF
}

die() {
  echo "error: $*" >&2
  echo "run 'launch-job.sh --help' for usage" >&2
  exit 2
}

need_value() {
  [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die "$1 needs a value"
}

# shellcheck source=SCRIPTDIR/../lib/cohort-args.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)/cohort-args.sh"

node="" mode="" workload="" count="" experiment="" resource="nvidia.com/gpu"
image="coload/bench-worker:0.1.0" window_s=45 namespace="" dry_run=0
mps_replicas="" mps_unlimited=0 mps_threads="" mps_memory=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --node) need_value "$@"; node=$2; shift 2 ;;
    --mode) need_value "$@"; mode=$2; shift 2 ;;
    --workload|--workers) need_value "$@"; workload=$2; shift 2 ;;
    --count) need_value "$@"; count=$2; shift 2 ;;
    --experiment) need_value "$@"; experiment=$2; shift 2 ;;
    --resource) need_value "$@"; resource=$2; shift 2 ;;
    --image) need_value "$@"; image=$2; shift 2 ;;
    --window-s) need_value "$@"; window_s=$2; shift 2 ;;
    --mps-replicas) need_value "$@"; mps_replicas=$2; shift 2 ;;
    --mps-unlimited) mps_unlimited=1; shift ;;
    --mps-threads) need_value "$@"; mps_threads=$2; shift 2 ;;
    --mps-memory) need_value "$@"; mps_memory=$2; shift 2 ;;
    -n|--namespace) need_value "$@"; namespace=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done

[[ -n "$node" ]] || die "--node is required: every worker of a cohort must run on the same prepared node"
[[ -n "$mode" ]] || die "--mode is required (exclusive, mig, timeslice, mig-timeslice or mps: how --node shares its GPU)"
[[ -n "$workload" ]] || die "--workload is required (train, infer, or a mixed spec such as infer=1,train=6)"
case "$mode" in
  exclusive|mig|timeslice|mig-timeslice|mps) ;;
  *) die "--mode '$mode' is not one of exclusive, mig, timeslice, mig-timeslice, mps" ;;
esac
[[ "$node" =~ ^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$ ]] || die "--node '$node' is not a valid node hostname"
[[ "$image" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]] || die "--image '$image' is not a valid image reference"
[[ "$window_s" =~ ^[0-9]+$ && $((10#$window_s)) -ge 1 ]] || die "--window-s must be a whole number of seconds >= 1, got '$window_s'"
[[ -z "$namespace" || "$namespace" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]] || die "--namespace '$namespace' is not a valid namespace name"

case "$resource" in
  nvidia.com/gpu) template="$here/cohort-job.yaml" ;;
  nvidia.com/gpu.shared) template="$here/cohort-job.gpu-shared.yaml" ;;
  nvidia.com/mig-*)
    [[ "$resource" =~ ^nvidia\.com/mig-[1-7]g\.[0-9]+gb(\.shared)?$ ]] \
      || die "--resource '$resource' is not a MIG resource name such as nvidia.com/mig-1g.10gb"
    template="$here/cohort-job.mig-1g.10gb.yaml" ;;
  *) die "--resource '$resource' is not nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<profile>" ;;
esac

# Expand the workload into one entry per index, in order.
workloads=()
expand_workloads
# The MPS share every worker declares (empty outside --mode mps).
mps_share_flags

[[ -n "$experiment" ]] || experiment=$(fresh_experiment_id)
# The id also names the Job (coload-<id>, at most 63 characters) and labels its Pods.
[[ "$experiment" =~ ^[a-z0-9]([a-z0-9-]{0,54}[a-z0-9])?$ ]] \
  || die "--experiment '$experiment' must be 1-56 characters of lowercase [a-z0-9-], starting and ending alphanumeric (it names the Job)"

# Replace the value on every line marked `# coload:<key>`; every marker must be hit.
set_marked() { # key value
  sed -e "s|^\([^#]*: \)[^#]*\(# coload:$1\)\$|\1$2  \2|"
}
manifest=$(set_marked job-name "coload-$experiment" <"$template" \
  | set_marked experiment-label "\"$experiment\"" \
  | set_marked experiment "\"$experiment\"" \
  | set_marked count "$count" \
  | set_marked count-str "\"$count\"" \
  | set_marked mode "\"$mode\"" \
  | set_marked workloads "\"${workloads[*]}\"" \
  | set_marked window-s "\"$((10#$window_s))\"" \
  | set_marked node "\"$node\"" \
  | set_marked image "\"$image\"" \
  | set_marked mps-share "\"$mps_share\"" \
  | sed -e "s|^\([^#]*\)nvidia\.com/[a-z0-9.-]*: 1  # coload:gpu-resource\$|\1$resource: 1  # coload:gpu-resource|")
# Every marked line of the template must be one this script sets, in the `key: value  # coload:x` form.
handled="job-name experiment-label experiment count count-str mode workloads window-s node image mps-share gpu-resource"
while IFS= read -r line; do
  key=${line##*# coload:}
  [[ " $handled " == *" $key "* && "$line" =~ ^[^#]*:\ [^#]*#\ coload:[a-z-]+$ ]] \
    || die "internal: $template has a marked line this script does not set: $line"
done < <(grep -v '^ *#' "$template" | grep '# coload:')

if [[ $dry_run -eq 1 ]]; then
  printf '%s\n' "$manifest"
  exit 0
fi

command -v kubectl >/dev/null 2>&1 || die "kubectl is not on PATH"
ns_args=()
[[ -z "$namespace" ]] || ns_args=(--namespace "$namespace")
printf '%s\n' "$manifest" | kubectl "${ns_args[@]}" create -f -

ns_hint=""
[[ -z "$namespace" ]] || ns_hint=" --namespace $namespace"
cat <<EOF
experiment: $experiment ($count worker(s) on $node, mode $mode${mps_share:+ $mps_share}, $resource)
wait:    kubectl${ns_hint} wait --for=condition=complete job/coload-$experiment --timeout=30m
collect: $here/collect-artifacts.sh --experiment $experiment --count $count${ns_hint}
EOF
