#!/usr/bin/env bash
# The model measurements on one GPU host in one device call: for resnet18, resnet50 and
# mobilenet_v2, a solo trainer (the baseline) and seven trainers under time-slicing, plugin-style
# MPS (replicas 7) and unlimited MPS; for resnet18, one inference worker beside six trainers
# under time-slicing, eager and by CUDA-graph replay, each against its own solos. One study per
# model and execution (a study compares against one baseline per workload), 10 s windows.
#   scripts/gpu/models.sh OUT          (dist/ carried; see scripts/gpu/use-dist.sh)
set -euo pipefail
out=${1:?usage: scripts/gpu/models.sh OUT [study flags...]}
shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$out"
plan() { # name model execution: writes $out/<name>.toml
  local name=$1 model=$2 execution=$3
  cat > "$out/$name.toml" <<PLAN
name = "$name"
description = "$model, $execution: solo against seven trainers per policy"
needs_gpu = true
repeats = 1

[flags]
window_s = 10
warmup_batches = 10
start_lead_s = 2
model = "$model"
execution = "$execution"

[[policy]]
name = "exclusive"
mode = "exclusive"

[[policy]]
name = "timeslice"
mode = "timeslice"

[[policy]]
name = "mps-plugin"
mode = "mps"
flags = { mps_replicas = 7 }

[[policy]]
name = "mps-unlimited"
mode = "mps"
flags = { mps_unlimited = true }

[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true
PLAN
}
mixed() { # appends the mixed cohort and its inference baseline to $out/<name>.toml
  cat >> "$out/$1.toml" <<PLAN

[[cohort]]
workers = "infer=1"
policies = ["exclusive"]
baseline = true

[[cohort]]
workers = "infer=1,train=6"
policies = ["timeslice"]
PLAN
}
seven() {
  cat >> "$out/$1.toml" <<PLAN

[[cohort]]
workers = "train=7"
policies = ["timeslice", "mps-plugin", "mps-unlimited"]
PLAN
}
plan resnet18 resnet18 eager && seven resnet18 && mixed resnet18
plan resnet18-graph resnet18 cuda-graph && mixed resnet18-graph
plan resnet50 resnet50 eager && seven resnet50
plan mobilenet_v2 mobilenet_v2 eager && seven mobilenet_v2
for name in resnet18 resnet18-graph resnet50 mobilenet_v2; do
  "$root/scripts/gpu/study.sh" "$out/$name.toml" "$out/$name" "$@" || echo "study $name: exit $?"
done
