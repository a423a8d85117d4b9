#!/usr/bin/env bash
# coload's `decode` worker against independent PyTorch decoders, side by side in one device call
# on one card (docs/performance.md, "Decode against PyTorch"):
#   - coload eager and cuda-graph: a solo `decode` worker through bench-cohort (exclusive);
#   - PyTorch eager and graph: scripts/perf/pytorch_decode.py --impl eager|graph (the graph
#     reference captures its static decode step once and replays it, as engines do);
# both presets (gpt2-small, tinyllama-1.1b), batches 1, 8 and 32, prompt 512 and 128 generated
# per cycle, bf16, two whole cycles of warmup on both sides; every configuration twice, the two
# repeats in opposite orders (coload first, then PyTorch first) so that drift hits both sides
# alike. First, scripts/perf/copy_bandwidth.py measures the card's copy bandwidth (the floor's
# denominator) and nvidia-smi names the card. Runs past the time budget are skipped and listed.
#
#   OUT=out/decode BIN=.gpu35/bin scripts/perf/decode-compare.sh [WINDOW_S] [BUDGET_S]
#
# MODELS, BATCHES and EXECUTIONS (space-separated) narrow the comparison to some presets,
# batches and executions (a first look before the whole run); the defaults are both presets at
# batch 8, 1 and 32, graph and eager. CONFIGS lists configurations outright instead, each
# `<model>:<batch>:<graph|eager>` (say, the graph rows and one preset's eager rows). REPEATS
# (default 2) runs each configuration that many times, alternating which side goes first.
#
# PIN (a CPU list, as taskset takes it: `2-5`) runs both sides under `taskset -c $PIN`, so that
# a host-bound eager step meets the same cores in every process; the folder's settings.txt
# records it with the window and the repeats, and decode_table.py words it in the table.
#
# BIN: a folder with release bench-cohort and bench-worker (the host's torch/lib goes on
# LD_LIBRARY_PATH); without it, the dist tarball (scripts/gpu/use-dist.sh). Writes under $OUT:
# card.csv, bandwidth.json, coload/<model>-b<B>-<eager|graph>-r<N>/ (the cohort: summary.json,
# worker-0/worker.json with the card's UUID, the date and the versions) with its .log, and
# pytorch/<model>-b<B>-<eager|graph>-r<N>.json (the same facts from PyTorch) with its .log.
# scripts/perf/decode_table.py turns the folder into the table of docs/performance.md.
#
# PROFILE=1 adds, after the comparison, kernel profiles of both presets at batch 8, eager and
# graph, into profiles/: PyTorch's (pytorch_decode.py --profile-steps 20: <model>-b8-<impl>.json
# and .log) and coload's (BIN's decode_profile, built with `cargo build --release -p
# coload-workload --example decode_profile`: coload-<model>-b8-<eager|graph>.json, the summary
# in the shape of PyTorch's `profile` object, .trace.json.gz, the chrome trace, and .log). The
# comparison then stops PROFILE_RESERVE_S (default 150) before the budget, so that the profiles
# fit in it too.
set -uo pipefail
window=${1:-4}
budget=${2:-540}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/out/decode-compare}
if [[ -n "${BIN:-}" ]]; then
  bin=$(cd "$BIN" && pwd)
  torch_lib=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  # shellcheck source=../gpu/use-dist.sh
  . "$root/scripts/gpu/use-dist.sh"
fi
py="$root/scripts/perf/pytorch_decode.py"
# Results are never overwritten: bench-cohort refuses a cohort folder that exists, and the
# PyTorch side would write over its JSON, so a run that finds an earlier one stops here.
if [[ -n "$(ls -A "$out" 2>/dev/null)" ]]; then
  echo "error: $out is not empty: give a fresh OUT (an earlier run's results are kept)" >&2
  exit 2
fi
mkdir -p "$out/coload" "$out/pytorch"
repeats=${REPEATS:-2}
pin=()
if [[ -n "${PIN:-}" ]]; then
  pin=(taskset -c "$PIN")
  if ! "${pin[@]}" true; then
    echo "error: taskset -c $PIN does not run here" >&2
    exit 2
  fi
fi
printf 'window_s=%s\nrepeats=%s\npin=%s\n' "$window" "$repeats" "${PIN:-}" > "$out/settings.txt"
began=$SECONDS
left() { (( SECONDS - began < budget - ${1:-0} )); }
# A run's timeout: at most $1 s, and never past the budget's end.
cap() { local rest=$(( budget - (SECONDS - began) )); echo $(( rest < $1 ? rest : $1 )); }
reserve=0
if [[ ${PROFILE:-0} == 1 ]]; then
  reserve=${PROFILE_RESERVE_S:-150}
  mkdir -p "$out/profiles"
fi
# prompt 512, 128 generated, two whole cycles of warmup (2 x 128 iterations) on both sides
warmup=256

nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv \
  > "$out/card.csv" 2>&1
cat "$out/card.csv"
timeout 60 python3 "$root/scripts/perf/copy_bandwidth.py" > "$out/bandwidth.json" \
  2> "$out/bandwidth.log"
echo "bandwidth rc=$? $(cut -c1-160 "$out/bandwidth.json")"

coload() { # model batch eager|graph repeat
  local name="$1-b$2-$3-r$4" execution=eager
  [[ $3 == graph ]] && execution=cuda-graph
  if ! left $((25 + reserve)); then echo "skipped (budget): coload $name"; return; fi
  timeout 120 "${pin[@]}" "$bin/bench-cohort" --worker-bin "$bin/bench-worker" --out "$out/coload/$name" \
    --mode exclusive --workers decode=1 --model "$1" --batch-size "$2" --execution "$execution" \
    --device cuda:0 --prompt-tokens 512 --output-tokens 128 --warmup-batches "$warmup" \
    --window-s "$window" --start-lead-s 1 --quiet > "$out/coload/$name.log" 2>&1
  echo "rc=$? coload $name ($((SECONDS - began)) s)"
}

pytorch() { # model batch eager|graph repeat
  local name="$1-b$2-$3-r$4"
  if ! left $((25 + reserve)); then echo "skipped (budget): pytorch $name"; return; fi
  timeout 120 "${pin[@]}" python3 "$py" --impl "$3" --model "$1" --batch-size "$2" --prompt-tokens 512 \
    --output-tokens 128 --warmup-iterations "$warmup" --window-s "$window" \
    > "$out/pytorch/$name.json" 2> "$out/pytorch/$name.log"
  echo "rc=$? pytorch $name ($((SECONDS - began)) s)"
}

configs=()
if [[ -n "${CONFIGS:-}" ]]; then
  for c in $CONFIGS; do
    if [[ ! $c =~ ^[a-z0-9.-]+:[0-9]+:(graph|eager)$ ]]; then
      echo "error: CONFIGS entry '$c' is not <model>:<batch>:<graph|eager>" >&2
      exit 2
    fi
    configs+=("$c")
  done
else
  for model in ${MODELS:-gpt2-small tinyllama-1.1b}; do
    for b in ${BATCHES:-8 1 32}; do
      for impl in ${EXECUTIONS:-graph eager}; do
        configs+=("$model:$b:$impl")
      done
    done
  done
fi
for (( repeat = 1; repeat <= repeats; repeat++ )); do
  for c in "${configs[@]}"; do
    IFS=: read -r model b impl <<< "$c"
    if (( repeat % 2 == 1 )); then
      coload "$model" "$b" "$impl" "$repeat"
      pytorch "$model" "$b" "$impl" "$repeat"
    else
      pytorch "$model" "$b" "$impl" "$repeat"
      coload "$model" "$b" "$impl" "$repeat"
    fi
  done
done
profile_pytorch() { # model eager|graph
  local name="$1-b8-$2"
  if ! left 25; then echo "skipped (budget): pytorch profile $name"; return; fi
  timeout "$(cap 90)" python3 "$py" --impl "$2" --model "$1" --batch-size 8 --prompt-tokens 512 \
    --output-tokens 128 --warmup-iterations "$warmup" --window-s 0.5 --profile-steps 20 \
    > "$out/profiles/$name.json" 2> "$out/profiles/$name.log"
  echo "rc=$? pytorch profile $name ($((SECONDS - began)) s)"
}

profile_coload() { # model (eager and graph in one process)
  local name="coload-$1-b8"
  if ! left 50; then echo "skipped (budget): coload profile $name"; return; fi
  if [[ ! -x "$bin/decode_profile" ]]; then
    echo "skipped: no $bin/decode_profile (cargo build --release -p coload-workload --example decode_profile)"
    return
  fi
  timeout "$(cap 150)" "$bin/decode_profile" --model "$1" --batch-size 8 --steps 20 --device cuda:0 \
    --execution both --prompt-tokens 512 --output-tokens 128 --warmup-iterations "$warmup" \
    --out "$out/profiles" > "$out/profiles/$name.log" 2>&1
  echo "rc=$? coload profile $name ($((SECONDS - began)) s)"
  # An eager trace holds every CPU operator too (megabytes); Perfetto opens the .gz as it is.
  gzip -f "$out/profiles/$name"-*.trace.json 2>/dev/null
}

if [[ ${PROFILE:-0} == 1 ]]; then
  for model in tinyllama-1.1b gpt2-small; do
    profile_coload "$model"
    profile_pytorch "$model" graph
    profile_pytorch "$model" eager
  done
fi
echo "done in $((SECONDS - began)) s"
