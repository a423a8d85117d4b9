#!/usr/bin/env bash
# Installs the libtorch coload builds against: the PyPI wheel torch==2.11.0 (the version tch 0.24
# expects; it carries a complete libtorch and runs on machines without a GPU) into ./.venv, with
# numpy beside it: torch imports numpy when it can, and without it every import (provisioning,
# torch-sys's build script) prints "Failed to initialize NumPy" to a newcomer's first screen.
# Idempotent: once the stamp file for this package set exists, a second run does nothing; an older
# .venv (torch only) gets numpy on its next run.
set -euo pipefail

TORCH_VERSION=2.11.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
PACKAGES=("torch==$TORCH_VERSION" numpy)
stamp="$venv/.coload-torch-$TORCH_VERSION+numpy"

if [[ -f "$stamp" && -f "$venv/.coload-libtorch-lib" ]]; then
  exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 is needed to install libtorch (torch==$TORCH_VERSION)" >&2; exit 1; }
echo "provisioning libtorch: ${PACKAGES[*]} into $venv (once; a few GB)" >&2
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check --quiet "${PACKAGES[@]}"
"$venv/bin/python" - "$venv/.coload-libtorch-lib" <<'PY'
import os, sys, torch
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
assert os.path.exists(os.path.join(lib, "libtorch.so")), lib
open(sys.argv[1], "w").write(lib + "\n")
PY
touch "$stamp"
echo "libtorch ready: $(cat "$venv/.coload-libtorch-lib")" >&2
