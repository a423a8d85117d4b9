#!/usr/bin/env bash
# `just demo-llm`: co-located LLM decode workers on this machine, then their tokens/s and time per
# output token (TPOT); then a `serve-llm` worker (open loop, continuous batching) beside a decode
# worker, and its time to first token (TTFT), TPOT, tokens/s and SLO attainment per request.
# With an NVIDIA GPU: 4 decode workers of GPT-2 small (bf16), batch 8, 128-token prompts,
# 128 tokens generated per cycle, time-sliced on GPU 0, a 20 s window; then serve-llm=1,decode=1
# of GPT-2 small, 10 requests/s of 128 + 128 tokens, at most 16 running, TTFT <= 500 ms and
# TPOT <= 50 ms, a 20 s window.
# Without one: 2 decode workers of the tiny GPT-2 preset on the CPU (fp32), batch 4, 32-token
# prompts, 32 tokens per cycle, a 10 s window; then serve-llm=1 of the tiny GPT-2, 15 requests/s
# of 32 + 16 tokens, at most 8 running, TTFT <= 200 ms and TPOT <= 20 ms, a 10 s window.
# COLOAD_DEMO_PROFILE=debug uses the debug build (faster to build, slower to run).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
profile=${COLOAD_DEMO_PROFILE:-release}
case "$profile" in
  release) scripts/with-libtorch cargo build --release -q -p bench-worker -p bench-cohort -p bench-summarize ;;
  debug) scripts/with-libtorch cargo build -q -p bench-worker -p bench-cohort -p bench-summarize ;;
  *) echo "error: COLOAD_DEMO_PROFILE must be release or debug, got $profile" >&2; exit 2 ;;
esac
# Wherever cargo puts its builds (CARGO_TARGET_DIR or ./target).
bin="$(scripts/target-dir)/$profile"
out="runs/demo-llm-$(date -u +%Y%m%dT%H%M%S)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); running on cuda:0" >&2
  set -- --workers decode=4 --device cuda:0 --model gpt2-small --batch-size 8 \
    --prompt-tokens 128 --output-tokens 128 --window-s 20
  # shellcheck disable=SC2054 # the commas are inside --workers' value
  serve=(--workers serve-llm=1,decode=1 --device cuda:0 --model gpt2-small --batch-size 8
    --prompt-tokens 128 --output-tokens 128 --max-batch 16 --rate 10 --window-s 20
    --ttft-slo-ms 500 --tpot-slo-ms 50)
else
  echo "no GPU found: 2 decode workers of gpt2-tiny on the CPU" >&2
  set -- --workers decode=2 --device cpu --model gpt2-tiny --batch-size 4 \
    --prompt-tokens 32 --output-tokens 32 --window-s 10 --warmup-batches 32 --start-lead-s 3
  serve=(--workers serve-llm=1 --device cpu --model gpt2-tiny --prompt-tokens 32
    --output-tokens 16 --max-batch 8 --rate 15 --window-s 10 --warmup-batches 8 --start-lead-s 3
    --ttft-slo-ms 200 --tpot-slo-ms 20)
fi
scripts/with-libtorch "$bin/bench-cohort" --mode timeslice --out "$out/decode" "$@"
echo "tokens/s and TPOT per worker: the 'tokens (decode workers)' table above, and $out/decode/summary.json (workers[].decode)" >&2
echo "artifacts: $out/decode/worker-*/ (worker.json with config.llm, batches.jsonl with each iteration's phase)" >&2
echo >&2
echo "serve-llm: open-loop requests, continuous batching" >&2
scripts/with-libtorch "$bin/bench-cohort" --mode timeslice --out "$out/serve-llm" "${serve[@]}"
# The serve-llm worker's figures in one line each, from summary.json.
python3 - "$out/serve-llm/summary.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
fmt = lambda v: "-" if v is None else f"{v:.3f} ms"
for w in summary["workers"]:
    s = w.get("serve_llm")
    if not s:
        continue
    slo = s.get("slo")
    def verdict(slo):
        q = f"p{slo['quantile'] * 100:g}"
        if slo["meets"]:
            return f"{q} met"
        if slo["ttft_met"] and slo["tpot_met"] and not slo.get("early_stopping_pass", True):
            # Within the objectives, but too few requests to show it with 99 % confidence.
            return (f"{q} within the objectives but not shown: needs "
                    f"{slo.get('early_stopping_requests_needed')} requests (a longer window)")
        return f"{q} missed" + (" (overloaded)" if s.get("overloaded") else "")
    met = (f"{slo['attainment'] * 100:.1f} % of requests within TTFT {slo['ttft_slo_ms']} ms and "
           f"TPOT {slo['tpot_slo_ms']} ms, goodput {slo['goodput_per_s']:.2f}/s, "
           f"{verdict(slo)}") if slo else "no SLO"
    print(f"serve-llm replica {w['replica']}: {s['requests']} requests, {s['completed']} completed; "
          f"TTFT p50 {fmt(s['ttft_ms']['p50'])}, p99 {fmt(s['ttft_ms']['p99'])}; "
          f"TPOT p50 {fmt(s['tpot_ms']['p50'])}, p99 {fmt(s['tpot_ms']['p99'])}; "
          f"{s['output_tokens_per_s']:.1f} output tokens/s; {met}"
          f"{'; OVERLOADED' if s['overloaded'] else ''}")
PY
echo "artifacts: $out/serve-llm/worker-*/ (llm_requests.jsonl: every request's arrival and token times)" >&2
