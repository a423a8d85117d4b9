#!/usr/bin/env bash
# Copies each worker's artifacts of one cohort (Indexed Job) from the shared claim into
# <download-dir>/worker-<i>/, through a short-lived reader Pod (collector-pod.yaml): the workers'
# own Pods have exited, and `kubectl cp` needs a running container. Failed workers' artifacts are
# copied too (their worker.json says why they failed). Exits non-zero, naming them, when any
# worker left no worker.json.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  cat <<'EOF'
usage: collect-artifacts.sh --experiment ID --count N [options]

Copies /mnt/benchmark-sync/coload-results/ID/worker-<i> (i = 0..N-1) into DIR/worker-<i>.

required:
  --experiment ID       the cohort's experiment id (printed by launch-job.sh, or in the Job's coload/experiment label)
  --count N             the cohort size

options:
  --namespace, -n NS    namespace of the Job and of the gpu-benchmark-sync claim
  --download-dir DIR    destination (default: downloaded); DIR/worker-<i> must not exist yet
  --image IMAGE         reader image with sh and tar (default coload/bench-worker:0.1.0)
  -h, --help            this text
EOF
}

die() {
  echo "error: $*" >&2
  echo "run 'collect-artifacts.sh --help' for usage" >&2
  exit 2
}

need_value() {
  [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die "$1 needs a value"
}

experiment="" count="" namespace="" download_dir="downloaded" image="coload/bench-worker:0.1.0"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --experiment) need_value "$@"; experiment=$2; shift 2 ;;
    --count) need_value "$@"; count=$2; shift 2 ;;
    -n|--namespace) need_value "$@"; namespace=$2; shift 2 ;;
    --download-dir) need_value "$@"; download_dir=$2; shift 2 ;;
    --image) need_value "$@"; image=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done

[[ -n "$experiment" ]] || die "--experiment is required (the id launch-job.sh printed, or the Job's coload/experiment label)"
[[ -n "$count" ]] || die "--count is required (the cohort size: every replica must be collected)"
[[ "$experiment" =~ ^[A-Za-z0-9._-]{1,128}$ && "$experiment" != *..* ]] || die "--experiment '$experiment' is not a valid experiment id"
[[ "$count" =~ ^[0-9]+$ && $((10#$count)) -ge 1 ]] || die "--count must be a whole number >= 1, got '$count'"
count=$((10#$count))
[[ "$image" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]] || die "--image '$image' is not a valid image reference"
[[ -z "$namespace" || "$namespace" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]] || die "--namespace '$namespace' is not a valid namespace name"
for ((r = 0; r < count; r++)); do
  [[ ! -e "$download_dir/worker-$r" ]] || die "$download_dir/worker-$r already exists; move it away or pick another --download-dir (an earlier cohort is never overwritten)"
done
command -v kubectl >/dev/null 2>&1 || die "kubectl is not on PATH"

ns_args=()
[[ -z "$namespace" ]] || ns_args=(--namespace "$namespace")
ns_prefix=""
[[ -z "$namespace" ]] || ns_prefix="$namespace/"

reader="coload-collect-$(printf '%s' "${experiment:0:40}" | tr '[:upper:]._' '[:lower:]--')"
reader=${reader%-}
sed -e "s|^\([^#]*: \)[^#]*\(# coload:reader-name\)\$|\1$reader  \2|" \
  -e "s|^\([^#]*: \)[^#]*\(# coload:image\)\$|\1\"$image\"  \2|" \
  "$here/collector-pod.yaml" | kubectl "${ns_args[@]}" create -f - >/dev/null
cleanup() { kubectl "${ns_args[@]}" delete pod "$reader" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT
kubectl "${ns_args[@]}" wait --for=condition=Ready "pod/$reader" --timeout=180s >/dev/null \
  || { echo "error: reader pod $reader did not become ready (is the claim gpu-benchmark-sync bound, and can the node pull $image?)" >&2; exit 1; }

mkdir -p "$download_dir"
missing=()
for ((r = 0; r < count; r++)); do
  src="/mnt/benchmark-sync/coload-results/$experiment/worker-$r"
  if kubectl "${ns_args[@]}" cp "$ns_prefix$reader:$src" "$download_dir/worker-$r" >/dev/null 2>&1 \
    && [[ -f "$download_dir/worker-$r/worker.json" ]]; then
    echo "worker-$r: collected into $download_dir/worker-$r" >&2
  else
    missing+=("$r")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "error: no worker.json for replica(s) ${missing[*]} of $experiment: the cohort is incomplete (see 'kubectl logs' of those Pods)" >&2
  exit 1
fi
printf 'all %d workers collected; summarize with:\nbench-summarize' "$count"
for ((r = 0; r < count; r++)); do printf ' %s/worker-%d' "$download_dir" "$r"; done
printf ' --out %s.summary.json\n' "$experiment"
