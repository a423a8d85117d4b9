#!/usr/bin/env bash
# Side-by-side performance comparison on one GPU, in one device call (docs/performance.md):
#   - coload (bench-worker through bench-cohort, solo, exclusive) against PyTorch's own loop from
#     Python (scripts/perf/pytorch_step.py), eager against eager, for each model of $MODELS;
#   - coload --execution cuda-graph against PyTorch's own CUDA-graph replay of the same step,
#     for $GRAPH_MODELS;
# train and infer, batch 32, 224x224, fp32, interleaved (coload, PyTorch, coload, ...) so that
# drift hits every implementation alike. With TS7=1, then the 7-worker time-slice training
# cohort, coload against seven Python processes sharing one start instant.
#
#   scripts/perf/compare.sh [WINDOW_S]
#
# Binaries come from the dist tarball (`just dist`, carry dist/); everything is written under
# $OUT (the device tool's output folder; default out/perf): perf.jsonl (one JSON line per run),
# table.md (scripts/perf/table.py over it), perf.tar.gz (the cohorts' folders and logs).
# Environment: MODELS (default "resnet18 resnet50 mobilenet_v2"), GRAPH_MODELS (default
# "resnet18"), TS7 (default 0), PRECISION (fp32 or bf16) and MEMORY_FORMAT (contiguous or
# channels-last) for both sides, BIN (a folder of release binaries instead of the dist tarball).
set -euo pipefail
window=${1:-10}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The binaries come from the dist tarball (`just dist`): see scripts/gpu/use-dist.sh.
if [[ -n "${BIN:-}" ]]; then
  # Release binaries in a folder (BIN) and the host's libtorch, as docs/gpu.md runs them.
  bin=$(cd "$BIN" && pwd)
  torch_lib=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  # shellcheck source=../gpu/use-dist.sh
  . "$root/scripts/gpu/use-dist.sh"
fi
# The same precision and memory format on both sides (default fp32, contiguous).
precision=${PRECISION:-fp32}
memory_format=${MEMORY_FORMAT:-contiguous}
py="$root/scripts/perf/pytorch_step.py"
out=${OUT:-$root/out/perf}
models=${MODELS:-resnet18 resnet50 mobilenet_v2}
graph_models=${GRAPH_MODELS:-resnet18}
runs="$out/runs"
mkdir -p "$runs"
results="$out/perf.jsonl"
: > "$results"

# One solo coload worker; its summary.json becomes one line of perf.jsonl.
coload() { # impl(eager|cuda-graph) model workload
  local name="coload-$1-$2-$3"
  "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$runs/$name" \
    --count 1 --workload "$3" --mode exclusive --model "$2" --execution "$1" \
    --precision "$precision" --memory-format "$memory_format" --window-s "$window" --quiet > "$runs/$name.txt" 2> "$runs/$name.stderr" || {
      echo "{\"impl\": \"coload-$1\", \"model\": \"$2\", \"workload\": \"$3\", \"failed\": true}" >> "$results"
      echo "$name FAILED (see $runs/$name.stderr)" >&2
      return 0
    }
  python3 - "$runs/$name/summary.json" "$1" "$2" "$3" "$window" "$precision" "$memory_format" \
    >> "$results" <<'EOF'
import json, sys
path, execution, model, workload, window, precision, memory_format = sys.argv[1:]
s = json.load(open(path))
w = s["workers"][0]
print(json.dumps({
    "impl": f"coload-{execution}", "model": model, "workload": workload,
    "window_s": float(window), "batches": w["batches"], "samples_per_s": w["samples_per_s"],
    "p50_ms": w["latency_ms"]["p50"], "p99_ms": w["latency_ms"]["p99"],
    "mean_ms": w["latency_ms"]["mean"], "experiment": s["experiment"],
    "precision": precision, "memory_format": memory_format, "gpu_uuid": w.get("gpu_uuid"),
}))
EOF
}

pytorch() { # impl(eager|graph) model workload
  python3 "$py" --impl "$1" --model "$2" --workload "$3" --window-s "$window" \
    --precision "$precision" --memory-format "$memory_format" >> "$results" \
    2> "$runs/pytorch-$1-$2-$3.stderr" || {
      echo "{\"impl\": \"pytorch-$1\", \"model\": \"$2\", \"workload\": \"$3\", \"failed\": true}" >> "$results"
      echo "pytorch-$1-$2-$3 FAILED" >&2
    }
}

for model in $models; do
  for workload in train infer; do
    echo "$(date -u +%T) $model $workload: eager"
    coload eager "$model" "$workload"
    pytorch eager "$model" "$workload"
    if [[ " $graph_models " == *" $model "* ]]; then
      echo "$(date -u +%T) $model $workload: cuda-graph"
      coload cuda-graph "$model" "$workload"
      pytorch graph "$model" "$workload"
    fi
  done
done

if [[ "${TS7:-0}" == 1 ]]; then
  # Seven time-sliced trainers: the coload cohort through the barrier, then seven Python eager
  # processes sharing a start instant far enough ahead for all of them to import torch and warm up.
  "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$runs/coload-ts7-train" \
    --count 7 --workload train --mode timeslice --window-s "$window" --quiet \
    > "$runs/coload-ts7-train.txt"
  start_at=$(python3 -c 'import time; print(time.time() + 45)')
  for i in 0 1 2 3 4 5 6; do
    python3 "$py" --impl eager --workload train --window-s "$window" --start-at "$start_at" \
      --label "ts7-replica-$i" >> "$runs/pytorch-ts7.jsonl" &
  done
  wait
  cat "$runs/pytorch-ts7.jsonl" >> "$results"
fi

python3 "$root/scripts/perf/table.py" "$results" > "$out/table.md"
cat "$out/table.md"
tar -czf "$out/perf.tar.gz" -C "$out" runs
rm -rf "$runs"
echo "perf comparison written to $out"
