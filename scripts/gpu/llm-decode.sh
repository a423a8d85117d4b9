#!/usr/bin/env bash
# The decode measurements on a GPU host (dist/ and .gpu/tests carried; see
# scripts/gpu/use-dist.sh and scripts/gpu/test-binaries.sh), in order of what matters most, each
# step skipped once the time budget is spent:
#   1. the decoder's GPU tests (gpu_llm: graph replay against eager, bf16, TinyLlama builds);
#   2. solo `decode` per preset at B = 1, 8, 32, eager and CUDA graph (prompt 512, output 128);
#   3. MuxServe's claim: one decode worker under a plugin-style MPS share (--mps-replicas 7,
#      about 14 % of the SMs) against the exclusive runs of step 2, per preset, B = 8;
#   4. the same decode in plain PyTorch eager (scripts/perf/pytorch_decode.py) per preset and B;
#   5. decode cohorts of 4 and 7 GPT-2 small workers under time-slicing, plugin MPS, unlimited MPS.
#   scripts/gpu/llm-decode.sh OUT [BUDGET_S]
set -uo pipefail
out=${1:?usage: scripts/gpu/llm-decode.sh OUT [BUDGET_S]}
budget=${2:-540}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit
# shellcheck source=use-dist.sh
. "$root/scripts/gpu/use-dist.sh"
mkdir -p "$out"/solo "$out"/mps "$out"/pytorch "$out"/cohorts
began=$SECONDS
left() { (( SECONDS - began < budget - ${1:-0} )); }
common=(--device cuda:0 --prompt-tokens 512 --output-tokens 128 --window-s 8 --warmup-batches 10
  --start-lead-s 2)
cohort() { # OUT-SUBDIR then bench-cohort flags
  local dir=$1
  shift
  if ! left 25; then echo "skipped (budget): $dir"; return; fi
  "$bin/bench-cohort" --out "$out/$dir" "${common[@]}" "$@" >"$out/$dir.log" 2>&1
  echo "rc=$? $dir ($((SECONDS - began)) s)"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv

if [[ -x .gpu/tests/gpu_llm ]]; then
  timeout 150 .gpu/tests/gpu_llm --nocapture --test-threads 1 >"$out/gpu_llm.log" 2>&1
  echo "gpu_llm rc=$? ($((SECONDS - began)) s)"
  tail -5 "$out/gpu_llm.log"
fi

for model in gpt2-small tinyllama-1.1b; do
  for b in 8 1 32; do
    for execution in eager cuda-graph; do
      cohort "solo/$model-b$b-$execution" --mode exclusive --workers decode=1 --model "$model" \
        --batch-size "$b" --execution "$execution"
    done
  done
done

for model in gpt2-small tinyllama-1.1b; do
  for execution in cuda-graph eager; do
    cohort "mps/$model-b8-$execution" --mode mps --mps-replicas 7 --workers decode=1 \
      --model "$model" --batch-size 8 --execution "$execution"
  done
done

for model in gpt2-small tinyllama-1.1b; do
  for b in 8 1 32; do
    if ! left 20; then echo "skipped (budget): pytorch $model b$b"; continue; fi
    timeout 60 python3 scripts/perf/pytorch_decode.py --model "$model" --batch-size "$b" \
      --prompt-tokens 512 --output-tokens 128 --window-s 8 \
      >"$out/pytorch/$model-b$b.json" 2>"$out/pytorch/$model-b$b.log"
    echo "pytorch $model b$b rc=$? ($((SECONDS - began)) s): $(cat "$out/pytorch/$model-b$b.json")"
  done
done

for n in 4 7; do
  cohort "cohorts/timeslice-decode$n" --mode timeslice --workers "decode=$n" --model gpt2-small \
    --batch-size 8 --execution cuda-graph
  cohort "cohorts/mps-plugin-decode$n" --mode mps --mps-replicas 7 --workers "decode=$n" \
    --model gpt2-small --batch-size 8 --execution cuda-graph
  cohort "cohorts/mps-unlimited-decode$n" --mode mps --mps-unlimited --workers "decode=$n" \
    --model gpt2-small --batch-size 8 --execution cuda-graph
done
echo "done in $((SECONDS - began)) s"
