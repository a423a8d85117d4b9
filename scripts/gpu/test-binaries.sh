#!/usr/bin/env bash
# Builds the GPU-only test binaries here and copies them, stripped, into .gpu/tests for the device
# tool to carry (`carry: [".gpu", "dist"]`): the device crate's NVML/GPM test (real_nvml), the
# workload on CUDA (gpu) and CUDA-graph replay against eager (gpu_graph). The binaries the tests
# do not cover come from `just dist`. Run them there with the host's torch/lib on
# LD_LIBRARY_PATH, as scripts/gpu/check.sh does.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
mkdir -p .gpu/tests
{
  scripts/with-libtorch cargo test --release -p coload-workload --features gpu --no-run \
    --message-format=json
  cargo test --release -p coload-device --features gpu --no-run --message-format=json
} | python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["target"]["name"] in ("gpu", "gpu_graph", "gpu_llm", "real_nvml"):
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do
  cp "$exe" ".gpu/tests/$name"
  strip ".gpu/tests/$name"
done
du -sh .gpu/tests/*
