#!/usr/bin/env bash
# Runs a study plan on a GPU host that has PyTorch 2.11 but no Rust, with the binaries of the
# dist tarball (`just dist` here, dist/ carried; see scripts/gpu/use-dist.sh). It replaces the
# former matrix.sh and its plan files: the lanes, the order and the failures are now
# bench-cohort's, see docs/study.md.
#   scripts/gpu/study.sh article OUT [bench-cohort study flags...]
#   scripts/gpu/study.sh scripts/gpu/gpm.toml OUT
# The bundle's env.sh points the loader at the host's libtorch. Run it again with the same OUT to
# resume.
set -euo pipefail
plan=${1:?usage: scripts/gpu/study.sh PLAN OUT [flags...]}
out=${2:?usage: scripts/gpu/study.sh PLAN OUT [flags...]}
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=use-dist.sh
. "$root/scripts/gpu/use-dist.sh"
nvidia-smi --query-gpu=index,name,uuid,driver_version,mig.mode.current,compute_mode --format=csv || true
exec "$bin/bench-cohort" study "$plan" --out "$out" --worker-bin "$bin/bench-worker" --no-progress-bar "$@"
