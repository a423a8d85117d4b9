#!/usr/bin/env bash
# Runs `bench-cohort study quick` N times (default 10) on this machine's CPU, each into a fresh
# folder, and checks what a CPU run must show: no failed cohort, and every CPU worker records at
# least MIN_BATCHES (default 20) batches in its window. Prints one line per run and the smallest
# count seen.
#   scripts/check-quick.sh [N] [MIN_BATCHES]
# COLOAD_BIN=DIR uses the binaries in DIR instead of building the release ones.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
runs=${1:-10}
min_batches=${2:-20}
if [[ -n "${COLOAD_BIN:-}" ]]; then
  bin=$COLOAD_BIN
else
  scripts/with-libtorch cargo build --release -q -p bench-worker -p bench-cohort
  bin="$(scripts/target-dir)/release"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/empty-listing"
fail=0
lowest=
for k in $(seq 1 "$runs"); do
  out="$work/quick-$k"
  if ! scripts/with-libtorch "$bin/bench-cohort" study quick --out "$out" --no-progress-bar \
    --node-listing "$work/empty-listing" >"$work/log-$k" 2>&1; then
    echo "run $k: the study failed (exit $?); its log:" >&2
    tail -20 "$work/log-$k" >&2
    fail=1
    continue
  fi
  line=$(python3 - "$out" "$min_batches" <<'PY'
import json, pathlib, sys
out, need = pathlib.Path(sys.argv[1]), int(sys.argv[2])
counts = []
for w in sorted(out.glob("cohorts/*/worker-*/worker.json")):
    d = json.loads(w.read_text())
    counts.append((d["window"]["batches"], w.parent.parent.name, d["config"]["workload"]))
failed = [e["name"] for e in json.loads((out / "index.json").read_text())["cohorts"]
          if e["outcome"] not in ("complete", "not_offered")]
low = min(counts)
print(f"{len(counts)} workers, fewest batches {low[0]} ({low[1]}, {low[2]}), failed: {failed or 'none'}")
sys.exit(1 if failed or low[0] < need else 0)
PY
  ) || fail=1
  echo "run $k: $line"
  n=$(sed -E 's/.*fewest batches ([0-9]+).*/\1/' <<<"$line")
  if [[ -z "$lowest" || "$n" -lt "$lowest" ]]; then lowest=$n; fi
done
echo "fewest batches over $runs runs: ${lowest:-none} (need $min_batches)"
exit $fail
