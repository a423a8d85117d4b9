#!/usr/bin/env bash
# Builds the release binaries here and puts them, stripped, into .gpu/bin for the device tool to
# carry to a GPU host that has PyTorch 2.11 but no Rust (see docs/performance.md, docs/results.md).
# With --tests, also the GPU test binaries of coload-workload (feature gpu) into .gpu/tests:
# run them there as `.gpu/tests/gpu_graph --test-threads=1 --nocapture`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
scripts/with-libtorch cargo build --release -p bench-worker -p bench-cohort -p bench-summarize
mkdir -p .gpu/bin
for b in bench-worker bench-cohort bench-summarize; do
  cp "target/release/$b" ".gpu/bin/$b"
  strip ".gpu/bin/$b"
done
# Without libtorch_cuda.so as a dependency CUDA is silently unavailable at run time.
if ! readelf -d .gpu/bin/bench-worker | grep -q 'libtorch_cuda.so'; then
  echo "error: bench-worker does not depend on libtorch_cuda.so (see bins/bench-worker/build.rs)" >&2
  exit 1
fi
if [[ "${1:-}" == --tests ]]; then
  mkdir -p .gpu/tests
  scripts/with-libtorch cargo test --release -p coload-workload --features gpu --no-run \
      --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("gpu", "gpu_graph"):
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do
    cp "$exe" ".gpu/tests/$name"
    strip ".gpu/tests/$name"
  done
  du -sh .gpu/tests/*
fi
du -sh .gpu/bin/*
