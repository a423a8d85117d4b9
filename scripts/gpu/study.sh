#!/usr/bin/env bash
# Runs a study plan on a GPU host that has PyTorch 2.11 but no Rust, with the binaries that
# scripts/gpu/bundle.sh put into .gpu/bin (it replaces the former matrix.sh and its plan files:
# the lanes, the order and the failures are now bench-cohort's, see docs/study.md).
#   scripts/gpu/study.sh article OUT [bench-cohort study flags...]
#   scripts/gpu/study.sh scripts/gpu/gpm.toml OUT
# Points the loader at the host's libtorch (python3 -c 'import torch') unless LD_LIBRARY_PATH
# already holds one. Run it again with the same OUT to resume.
set -euo pipefail
plan=${1:?usage: scripts/gpu/study.sh PLAN OUT [flags...]}
out=${2:?usage: scripts/gpu/study.sh PLAN OUT [flags...]}
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${BIN:-$root/.gpu/bin}
if [[ -z "${LD_LIBRARY_PATH:-}" ]] || ! ls "${LD_LIBRARY_PATH%%:*}"/libtorch.so >/dev/null 2>&1; then
  LD_LIBRARY_PATH="$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib"
  export LD_LIBRARY_PATH
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,mig.mode.current,compute_mode --format=csv || true
exec "$bin/bench-cohort" study "$plan" --out "$out" --worker-bin "$bin/bench-worker" --no-progress-bar "$@"
