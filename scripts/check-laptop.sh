#!/usr/bin/env bash
# `just check-laptop`: bench-summarize installs and runs where there is no libtorch (a laptop),
# by the command the README documents: `cargo install --locked --path bins/bench-summarize`,
# run with every LIBTORCH* variable, LD_LIBRARY_PATH and VIRTUAL_ENV removed and no virtual
# environment (this repository's .venv or any other) on PATH. Then: `cargo tree` shows no tch or
# torch-sys, the binary links no libtorch, and it summarizes a fixture cohort with the right answer.
# The build goes to <target>/laptop-check so that it shares nothing with libtorch builds.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=$(scripts/target-dir)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# PATH without virtual environments: drop every entry that has a pyvenv.cfg beside it.
clean_path=""
IFS=: read -r -a entries <<<"$PATH"
for entry in "${entries[@]}"; do
  [[ -n "$entry" && ! -e "$entry/../pyvenv.cfg" ]] || continue
  clean_path="${clean_path:+$clean_path:}$entry"
done
unset_args=(-u LD_LIBRARY_PATH -u VIRTUAL_ENV -u COLOAD_LIBTORCH_LIB)
while IFS= read -r name; do unset_args+=(-u "$name"); done < <(compgen -e | grep '^LIBTORCH' || true)
laptop() { env "${unset_args[@]}" PATH="$clean_path" CARGO_TARGET_DIR="$target/laptop-check" "$@"; }

if laptop sh -c 'command -v python3 >/dev/null && python3 -c "import torch"' 2>/dev/null; then
  # Not fatal: nothing below can reach it (cargo tree proves no torch-sys), but say so.
  echo "note: a python3 with torch is on PATH outside any virtual environment; this is not a bare laptop" >&2
fi

echo "cargo tree -p bench-summarize (no libtorch environment)" >&2
tree=$(laptop cargo tree --locked -p bench-summarize -e normal,build --prefix none)
if grep -E '^(tch|torch-sys|coload-workload) ' <<<"$tree" >&2; then
  echo "error: bench-summarize depends on libtorch (above); it must build on a laptop" >&2
  exit 1
fi

echo "cargo install --locked --path bins/bench-summarize (no libtorch environment)" >&2
laptop cargo install --locked --quiet --path bins/bench-summarize --root "$work/install"
bin="$work/install/bin/bench-summarize"
if ldd "$bin" | grep -E 'libtorch|libc10' >&2; then
  echo "error: the installed bench-summarize links libtorch (above)" >&2
  exit 1
fi
# solo-train: 10 batches of 32 samples in 10 s (fixtures/README.md).
out=$(laptop "$bin" fixtures/solo-train --format json)
if ! grep -q '"samples_per_s": 32.0' <<<"$out"; then
  echo "error: the installed bench-summarize did not give solo-train's 32.0 samples/s:" >&2
  echo "$out" | head -n 40 >&2
  exit 1
fi
echo "ok: bench-summarize installs and runs without libtorch ($(laptop "$bin" --version))"
