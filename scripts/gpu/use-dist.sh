# Sourced by scripts/gpu/study.sh, check.sh, round2-serve.sh, gpm-overhead.sh and scripts/perf/compare.sh on a GPU host that has PyTorch 2.11
# but no Rust. Uses the coload bundle at $COLOAD_HOME when that is set, else unpacks the newest
# dist/coload-*.tar.gz (`just dist` on the build machine; carry dist/ to the host) into a fresh
# folder under ${TMPDIR:-/tmp}. Then sources the bundle's env.sh, which finds the host's torch/lib
# (or $LIBTORCH) and prepends it to LD_LIBRARY_PATH, and sets `bin` to the bundle's bin/.
# shellcheck shell=bash disable=SC2154 # $root: set by the script that sources this one
if [[ -z "${COLOAD_HOME:-}" ]]; then
  _tarball=""
  for _candidate in "$root"/dist/coload-*.tar.gz; do
    if [[ -f "$_candidate" && ( -z "$_tarball" || "$_candidate" -nt "$_tarball" ) ]]; then _tarball=$_candidate; fi
  done
  if [[ -z "$_tarball" ]]; then
    echo "error: no dist/coload-*.tar.gz here and COLOAD_HOME is not set: run \`just dist\` on the build machine and bring dist/ along" >&2
    exit 1
  fi
  _unpacked=$(mktemp -d "${TMPDIR:-/tmp}/coload-dist.XXXXXX")
  tar -xzf "$_tarball" -C "$_unpacked"
  COLOAD_HOME=$(echo "$_unpacked"/coload-*)
  echo "using $(basename "$_tarball") unpacked in $COLOAD_HOME" >&2
  unset _tarball _candidate _unpacked
fi
# shellcheck source=../dist/env.sh
. "$COLOAD_HOME/env.sh" || exit 127
# shellcheck disable=SC2034 # used by the sourcing script
bin="$COLOAD_HOME/bin"
sed -n '1,3p' "$COLOAD_HOME/VERSION" >&2
