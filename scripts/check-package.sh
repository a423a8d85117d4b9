#!/usr/bin/env bash
# `just package`: packages the library crates that do not link libtorch, as `cargo publish` would
# (without uploading or verifying the build), and checks that each package carries its README and
# both licence texts and that cargo has nothing to say about a manifest beyond the one warning no
# manifest can answer yet: coload has no public home, so no documentation, homepage or repository.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
crates=(coload-cohort-schema coload-measure coload-timing coload-barrier coload-device coload-analysis coload-report
  coload-spec coload-launch coload-study)
pkg_args=()
for crate in "${crates[@]}"; do pkg_args+=(-p "$crate"); done
known='^warning: manifest has no documentation, homepage or repository$'

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --allow-dirty: this checks the manifests and file lists of the working tree, not git's state.
if ! cargo package --locked --no-verify --allow-dirty "${pkg_args[@]}" 2>"$log"; then
  cat "$log" >&2
  exit 1
fi
status=0
if grep '^warning' "$log" | grep -v -- "$known" >&2; then
  echo "error: cargo package warned (above)" >&2
  status=1
fi
for crate in "${crates[@]}"; do
  files=$(cargo package --locked --list --allow-dirty -p "$crate" 2>/dev/null)
  for want in Cargo.toml README.md LICENSE-MIT LICENSE-APACHE src/lib.rs; do
    if ! grep -qx "$want" <<<"$files"; then
      echo "error: the $crate package lacks $want" >&2
      status=1
    fi
  done
done
[[ $status -eq 0 ]] && echo "ok: packaged ${crates[*]}"
exit "$status"
