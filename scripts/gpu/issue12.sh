#!/usr/bin/env bash
# Issue 12 on the H200 host: runs scripts/gpu/plan-12a.txt (part a: plugin-style MPS at replicas 7,
# the exclusive solos and the hog) or plan-12b.txt (part b: unlimited MPS and time-slicing) with
# the release binaries in .gpu/bin (scripts/gpu/bundle.sh), then tars the cohorts into $OUT.
#   scripts/gpu/issue12.sh a|b
# About 4-5 minutes per part on one H200 (13 and 14 cohorts of ~20 s each).
# Writes $OUT/issue12-<part>.tar.gz (every cohort folder with its worker.json, batches.jsonl,
# logs, mps/control.txt, summary.json, isolation.json) and $OUT/issue12-<part>.txt (the matrix
# log, failed cohorts, the GPU's state before and after, and for part a the isolation results).
set -euo pipefail
part=${1:-}
case "$part" in
  a|b) ;;
  *) echo "usage: scripts/gpu/issue12.sh a|b" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${OUT:?OUT must name the folder the results go to}"
bin="$root/.gpu/bin"
for b in bench-worker bench-cohort bench-summarize; do
  [[ -x "$bin/$b" ]] || { echo "error: $bin/$b is missing: run scripts/gpu/bundle.sh here first" >&2; exit 1; }
done
work=$(mktemp -d)
results="$work/issue12-$part"
log="$OUT/issue12-$part.txt"
{
  echo "== GPU before"
  nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,compute_mode,mig.mode.current --format=csv
  echo "== plan-12$part"
  "$root/scripts/gpu/matrix.sh" "$root/scripts/gpu/plan-12$part.txt" "$results" || true
  if [[ $part == a ]]; then
    echo "== memory isolation (expected: hog-plugin7 contained, hog-timeslice not_contained)"
    "$bin/bench-summarize" isolation "$results/hog-plugin7" "$results/hog-timeslice" \
      --out "$results/isolation.json" || true
    echo "== what the plugin-style workers saw (worker-0 of each cohort: declared, free MiB, SMs)"
    for f in "$results"/plugin7-*/worker-0/worker.json "$results"/plugin7-*/rep-1/worker-0/worker.json; do
      [[ -f $f ]] || continue
      python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("share") or {}
o = s.get("observed") or {}
d = s.get("declared") or {}
print(sys.argv[1].split("issue12-a/")[-1], d.get("active_thread_percentage"), d.get("pinned_memory_limit_bytes"),
      (o.get("memory_free_bytes") or 0) >> 20, o.get("sm_count"), o.get("physical_sm_count"),
      [w["kind"] for w in r.get("warnings", [])])
PY
    done
  fi
  echo "== GPU after (compute mode must still be Default; no MPS server left)"
  nvidia-smi --query-gpu=index,memory.used,compute_mode --format=csv
  pgrep -a nvidia-cuda-mps || echo "no MPS process running"
} 2>&1 | tee "$log"
tar -C "$work" -czf "$OUT/issue12-$part.tar.gz" "issue12-$part"
ls -l "$OUT"
