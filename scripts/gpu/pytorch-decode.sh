#!/usr/bin/env bash
# The PyTorch eager reference of the decode comparison, alone (step 4 of
# scripts/gpu/llm-decode.sh): scripts/perf/pytorch_decode.py per preset and batch, with its
# default warmup of two whole cycles, on a GPU host with PyTorch. Writes OUT/pytorch/<model>-b<B>.json
# (and .log); put OUT under docs/results/data/<date>-llm-pytorch/ here, and results.md compares
# the newest such folder with the coload eager runs of docs/results/data/2026-12-01-llm/solo.
#   scripts/gpu/pytorch-decode.sh OUT [BUDGET_S]
set -uo pipefail
out=${1:?usage: scripts/gpu/pytorch-decode.sh OUT [BUDGET_S]}
budget=${2:-300}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$out/pytorch"
began=$SECONDS
for model in gpt2-small tinyllama-1.1b; do
  for b in 8 1 32; do
    if (( SECONDS - began > budget - 40 )); then echo "skipped (budget): pytorch $model b$b"; continue; fi
    timeout 90 python3 "$root/scripts/perf/pytorch_decode.py" --model "$model" --batch-size "$b" \
      --prompt-tokens 512 --output-tokens 128 --window-s 8 \
      >"$out/pytorch/$model-b$b.json" 2>"$out/pytorch/$model-b$b.log"
    echo "pytorch $model b$b rc=$? ($((SECONDS - began)) s): $(cat "$out/pytorch/$model-b$b.json")"
  done
done
