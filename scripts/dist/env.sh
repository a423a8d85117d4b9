# coload bundle: source this file from bash or zsh to use the bundle from any directory:
#   . /path/to/coload-<version>/env.sh
# It puts the bundle's bin/ on PATH and finds the libtorch that bench-worker needs (libtorch
# 2.11.0, the version it was built against), first match wins:
#   1. $LIBTORCH: a folder holding lib/libtorch_cpu.so: an unpacked libtorch archive, or an
#      installed PyTorch package (.../site-packages/torch). ($LIBTORCH_LIB, when set, is used
#      instead of $LIBTORCH for the lib/ folder, as in torch-sys.)
#   2. the torch package of ${COLOAD_PYTHON:-python3}, located without importing it;
# then prepends its lib/ to LD_LIBRARY_PATH. When none is found, or it lacks a library the
# binary links, or its version differs, it says so and how to point at another (return 1).
#
# Sourcing is optional: bin/bench-worker sources this file itself before it starts the real
# binary in libexec/ (the dynamic loader would otherwise stop it before main with a bare
# "libtorch_cpu.so: cannot open shared object file"). bench-cohort and bench-summarize need no
# libtorch. The binaries carry no RUNPATH: nothing of the build machine's layout is in them.
# shellcheck shell=bash

if [ -n "${BASH_VERSION:-}" ]; then
  COLOAD_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
elif [ -n "${ZSH_VERSION:-}" ]; then
  # shellcheck disable=SC2296 # zsh's own expansion of the sourced file's path, inside eval
  eval 'COLOAD_HOME=$(cd "$(dirname "${(%):-%x}")" && pwd)'
elif [ -z "${COLOAD_HOME:-}" ]; then
  echo "coload: source env.sh from bash or zsh, or set COLOAD_HOME to the bundle's folder first" >&2
  # shellcheck disable=SC2317 # `exit` when run rather than sourced
  return 1 2>/dev/null || exit 1
fi
export COLOAD_HOME

# The libtorch version this bundle was built against, from its VERSION file.
_coload_built_against() {
  sed -n 's/^libtorch: \([0-9][0-9.]*\).*/\1/p' "$COLOAD_HOME/VERSION" 2>/dev/null
}

# The version of the libtorch whose lib/ folder is $1, when it says (PyTorch's version.py,
# a libtorch archive's build-version); empty when it does not.
_coload_version_of() {
  local root
  root=$(dirname "$1")
  if [ -f "$root/version.py" ]; then
    sed -n "s/^__version__ *= *['\"]\([0-9][0-9.]*\).*/\1/p" "$root/version.py"
  elif [ -f "$root/build-version" ]; then
    sed -n 's/^\([0-9][0-9.]*\).*/\1/p' "$root/build-version"
  fi
}

# Prints the lib/ folder to use, or explains on stderr why there is none and returns 1.
_coload_find_libtorch() {
  local want lib py found how missing needed version
  want=$(_coload_built_against)
  want=${want:-2.11.0}
  # The libtorch libraries the binary links (written by scripts/dist.sh from its NEEDED entries).
  needed=$(cat "$COLOAD_HOME/libexec/bench-worker.libs" 2>/dev/null) || needed="libtorch_cpu.so
libc10.so"
  if [ -n "${LIBTORCH_LIB:-}${LIBTORCH:-}" ]; then
    lib="${LIBTORCH_LIB:-$LIBTORCH}/lib"
    how="LIBTORCH=${LIBTORCH_LIB:-$LIBTORCH}"
  else
    py=${COLOAD_PYTHON:-python3}
    how="the torch package of $py"
    if ! command -v "$py" >/dev/null 2>&1; then
      found=""
    else
      found=$("$py" -c 'import importlib.util as u, sys
s = u.find_spec("torch")
if s is None or not s.submodule_search_locations: sys.exit(1)
print(list(s.submodule_search_locations)[0])' 2>/dev/null) || found=""
    fi
    if [ -z "$found" ]; then
      {
        echo "coload: bench-worker needs libtorch $want ($(printf '%s' "$needed" | tr '\n' ' ')) and cannot find it:"
        echo "  LIBTORCH is not set, and $py has no torch package."
        echo "Point at one, then run again:"
        echo "  export LIBTORCH=/path/to/site-packages/torch    # an installed PyTorch $want (or an unpacked libtorch $want)"
        echo "  export COLOAD_PYTHON=/path/to/venv/bin/python   # a Python whose torch is $want"
        echo "or install it: $py -m pip install torch==$want"
      } >&2
      return 1
    fi
    lib="$found/lib"
  fi
  missing=""
  while IFS= read -r so; do
    [ -z "$so" ] || [ -e "$lib/$so" ] || missing="$missing $so"
  done <<EOF
$needed
EOF
  if [ -n "$missing" ]; then
    {
      echo "coload: bench-worker needs libtorch $want; $how gives $lib, which lacks:$missing"
      case "$missing" in
        *libtorch_cuda.so*) echo "  (a CPU-only PyTorch? this bundle was built against the CUDA build of torch $want)" ;;
      esac
      echo "Point LIBTORCH at a folder whose lib/ holds them, or COLOAD_PYTHON at a Python whose torch is $want."
    } >&2
    return 1
  fi
  version=$(_coload_version_of "$lib")
  if [ -n "$version" ] && [ "$version" != "$want" ] && [ -z "${COLOAD_ALLOW_LIBTORCH_MISMATCH:-}" ]; then
    {
      echo "coload: bench-worker was built against libtorch $want, but $how is $version ($lib)."
      echo "Point LIBTORCH or COLOAD_PYTHON at a torch $want, or set COLOAD_ALLOW_LIBTORCH_MISMATCH=1 to try anyway."
    } >&2
    return 1
  fi
  echo "$lib"
}

_coload_env() {
  local lib
  case ":$PATH:" in
    *":$COLOAD_HOME/bin:"*) ;;
    *) PATH="$COLOAD_HOME/bin:$PATH" ;;
  esac
  export PATH
  # Already found (a worker started by bench-cohort inherits this): no second lookup.
  if [ -n "${COLOAD_LIBTORCH_LIB:-}" ] && [ -e "$COLOAD_LIBTORCH_LIB/libtorch_cpu.so" ]; then
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$COLOAD_LIBTORCH_LIB:"*) return 0 ;;
    esac
  fi
  lib=$(_coload_find_libtorch) || return 1
  COLOAD_LIBTORCH_LIB=$lib
  LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export COLOAD_LIBTORCH_LIB LD_LIBRARY_PATH
}

_coload_main() {
  local status=0
  _coload_env || status=1
  unset -f _coload_env _coload_find_libtorch _coload_version_of _coload_built_against _coload_main
  return "$status"
}

# `exit` is for when this file is run rather than sourced.
# shellcheck disable=SC2317
_coload_main || return 1 2>/dev/null || exit 1
