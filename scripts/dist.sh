#!/usr/bin/env bash
# `just dist`: a versioned tarball for GPU hosts that have PyTorch 2.11 but no Rust:
#   dist/coload-<version>-<git revision>-<arch>-linux.tar.gz
# holding bin/ (bench-cohort, bench-summarize, and a bench-worker launcher), libexec/bench-worker
# (the real binary), env.sh (finds the host's libtorch), share/ (man pages, shell completions),
# deploy/, VERSION, the licences and a README. See docs/deploy.md ("The dist tarball").
#
# The binaries are built with the `dist` profile (release, no debug info, stripped), no RUNPATH,
# and every build-machine path remapped (--remap-path-prefix for Rust, -ffile-prefix-map for the
# C++ that torch-sys and coload-workload compile, whose libtorch headers put __FILE__ into
# assertion messages), so that nothing of the builder's layout is in them.
# scripts/dist/test.sh checks that, and that the bundle runs.
set -euo pipefail
if [[ $# -gt 0 ]]; then
  echo "usage: scripts/dist.sh   (writes dist/coload-<version>-<rev>-<arch>-linux.tar.gz)" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=$(scripts/target-dir)

revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [[ $revision != unknown && -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  revision="$revision-dirty"
fi

# The libtorch this build uses (provisions .venv on first use), and every spelling of the
# build-machine folders that could end up in a binary, each mapped to a neutral name. Later maps
# win in both rustc and gcc, so the more specific folders come last.
libtorch_lib=$(scripts/with-libtorch printenv COLOAD_LIBTORCH_LIB)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
maps=()
add_map() { # FROM TO: the path as given and as resolved
  local from=$1 to=$2 real
  [[ -e "$from" ]] || return 0
  real=$(readlink -f "$from")
  maps+=("$from=$to")
  [[ "$real" == "$from" ]] || maps+=("$real=$to")
}
add_map "$HOME" home
add_map "$cargo_home" cargo-home
add_map "$root" coload
add_map "$target" target
add_map "$root/.venv" venv
add_map "$(dirname "$libtorch_lib")" libtorch
# torch-sys asks .venv's python, which names torch through the .venv path even when .venv is a
# link; mapped too, so the same commit builds the same bytes from any clone.
for torch_root in "$root"/.venv/lib/python*/site-packages/torch; do add_map "$torch_root" libtorch; done
for map in "${maps[@]}"; do
  if [[ "$map" =~ [[:space:]] ]]; then
    echo "error: cannot remap a build path with white space in it: $map (CXXFLAGS split on it); build from another folder" >&2
    exit 1
  fi
done
rustflags=${CARGO_ENCODED_RUSTFLAGS:-}
if [[ -z "$rustflags" && -n "${RUSTFLAGS:-}" ]]; then
  read -r -a words <<<"$RUSTFLAGS"
  rustflags=$(IFS=$'\x1f'; echo "${words[*]}")
fi
cxxflags=${CXXFLAGS:-}
cflags=${CFLAGS:-}
for map in "${maps[@]}"; do
  rustflags="${rustflags:+$rustflags$'\x1f'}--remap-path-prefix=$map"
  cxxflags="${cxxflags:+$cxxflags }-ffile-prefix-map=$map"
  cflags="${cflags:+$cflags }-ffile-prefix-map=$map"
done

echo "building the dist profile (git $revision, libtorch $libtorch_lib)" >&2
env -u RUSTFLAGS -u COLOAD_RUNPATH \
  CARGO_ENCODED_RUSTFLAGS="$rustflags" CXXFLAGS="$cxxflags" CFLAGS="$cflags" \
  COLOAD_GIT_REVISION="$revision" \
  scripts/with-libtorch cargo build --locked --profile dist \
  -p bench-worker -p bench-cohort -p bench-summarize
built="$target/dist"

version=$(scripts/with-libtorch "$built/bench-worker" --version)
crate_version=$(head -n 1 <<<"$version" | cut -d' ' -f2)
if ! grep -qx "git revision: $revision" <<<"$version"; then
  echo "error: bench-worker --version does not say git revision $revision:" >&2
  echo "$version" >&2
  exit 1
fi
name="coload-$crate_version-$revision-$(uname -m)-linux"
stage="$target/dist-stage/$name"
rm -rf "$target/dist-stage"
mkdir -p "$stage/bin" "$stage/libexec" "$stage/share"

install -m 0755 "$built/bench-worker" "$stage/libexec/bench-worker"
install -m 0755 "$built/bench-cohort" "$built/bench-summarize" "$stage/bin/"
install -m 0755 scripts/dist/bench-worker "$stage/bin/bench-worker"
install -m 0644 scripts/dist/env.sh scripts/dist/README.md LICENSE-MIT LICENSE-APACHE "$stage/"
# The libtorch libraries the worker links, for the launcher to check before it starts it.
readelf -d "$stage/libexec/bench-worker" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' \
  | while read -r so; do
      if [[ -e "$libtorch_lib/$so" ]]; then echo "$so"; fi
    done > "$stage/libexec/bench-worker.libs"
# Without libtorch_cuda.so as a dependency CUDA is silently unavailable at run time.
if [[ -e "$libtorch_lib/libtorch_cuda.so" ]] && ! grep -qx libtorch_cuda.so "$stage/libexec/bench-worker.libs"; then
  echo "error: bench-worker does not depend on libtorch_cuda.so (see bins/bench-worker/build.rs)" >&2
  exit 1
fi
{
  echo "coload $crate_version"
  tail -n +2 <<<"$version"
} > "$stage/VERSION"
scripts/completions.sh "$stage/share" "$built" 2>/dev/null
# Every deploy file but the offline tests of the repository.
tar -C "$root" --exclude=deploy/tests -cf - deploy | tar -C "$stage" -xf -

# Reproducible: sorted names, no owners, the commit's time, gzip without a name or time stamp.
mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
mkdir -p dist
tar -C "$target/dist-stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
  -cf - "$name" | gzip -n -9 > "dist/$name.tar.gz"
echo "dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1))"
