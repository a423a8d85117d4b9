#!/usr/bin/env bash
# `just test-dist`: builds the dist tarball (scripts/dist.sh) unless one is given, unpacks it into
# a private folder and checks what a GPU host will get:
#   - the layout (binaries, launcher, env.sh, VERSION, licences, deploy/, man pages, completions);
#   - relocatable, clean binaries: stripped, no absolute RUNPATH/RPATH, and no build-machine path
#     (the repository, the target dir, the virtual environment, libtorch, CARGO_HOME, HOME) in
#     their bytes; bench-cohort and bench-summarize link no libtorch;
#   - the launcher with a host PyTorch (a python3 on PATH with torch 2.11, as on the H200):
#     `--version` equals VERSION, `--generate man` works, and a one-worker CPU cohort runs
#     through bin/bench-cohort -> bin/bench-worker -> libexec/bench-worker;
#   - the launcher without one, with one lacking a library, with another version: exit 127 and
#     a message naming the library and how to point at one;
#   - shellcheck of the shell scripts this issue added or changed.
# Ends with "N passed, M failed" and exits non-zero on any failure.
#   scripts/dist/test.sh [TARBALL]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
if [[ $# -gt 1 || "${1:-}" == -* ]]; then
  echo "usage: scripts/dist/test.sh [TARBALL]   (default: build one with scripts/dist.sh)" >&2
  exit 2
fi
if [[ $# -eq 1 ]]; then
  tarball=$1
else
  tarball=$(scripts/dist.sh | tail -n 1 | cut -d' ' -f1)
fi
[[ -f "$tarball" ]] || { echo "error: no tarball at $tarball" >&2; exit 1; }

target=$(scripts/target-dir)
libtorch_lib=$(scripts/with-libtorch printenv COLOAD_LIBTORCH_LIB)
venv_python="$root/.venv/bin/python3"
[[ -n "${LIBTORCH:-}" ]] && venv_python=""
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
name=$(basename "$tarball" .tar.gz)
home="$work/$name"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok    $1"; }
bad() {
  failed=$((failed + 1))
  echo "FAIL  $1"
  [[ -z "${2:-}" ]] || while IFS= read -r line; do echo "      $line"; done <<<"$2"
}
check() { # NAME COMMAND...: ok when the command succeeds
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}
# A clean environment: nothing of this build's libtorch, a PATH of system folders only.
clean() { env -i HOME="$work/home" PATH=/usr/local/bin:/usr/bin:/bin TMPDIR="$work" "$@"; }

# --- layout
expected=(bin/bench-worker bin/bench-cohort bin/bench-summarize libexec/bench-worker
  libexec/bench-worker.libs env.sh VERSION README.md LICENSE-MIT LICENSE-APACHE
  deploy/k8s/launch-job.sh deploy/k8s/pvc.yaml deploy/polyaxon/launch-cohort.sh deploy/docker/Dockerfile)
for b in bench-worker bench-cohort bench-summarize; do
  expected+=("share/man/man1/$b.1" "share/bash-completion/completions/$b"
    "share/zsh/site-functions/_$b" "share/fish/vendor_completions.d/$b.fish")
done
missing=""
for f in "${expected[@]}"; do [[ -s "$home/$f" ]] || missing+=" $f"; done
if [[ -z "$missing" ]]; then ok "layout: ${#expected[@]} files present"; else bad "layout: missing$missing"; fi
if [[ -e "$home/deploy/tests" ]]; then bad "deploy/tests is not shipped"; else ok "deploy/tests is not shipped"; fi
if [[ "$name" =~ ^coload-[0-9]+\.[0-9]+\.[0-9]+-([0-9a-f]{12}(-dirty)?|unknown)-[a-z0-9_]+-linux$ ]]; then
  ok "name: $name"
else
  bad "name: $name is not coload-<version>-<rev>-<arch>-linux"
fi

# --- the binaries: stripped, relocatable, free of build paths
elves=("$home/libexec/bench-worker" "$home/bin/bench-cohort" "$home/bin/bench-summarize")
build_paths=()
for p in "$root" "$target" "$root/.venv" "$(dirname "$libtorch_lib")" "${CARGO_HOME:-$HOME/.cargo}" "$HOME"; do
  [[ -e "$p" && "$p" != / ]] || continue
  # With a trailing slash: the home folder /root must not match the word "/root" elsewhere.
  build_paths+=("$p/" "$(readlink -f "$p")/")
done
for elf in "${elves[@]}"; do
  short=${elf#"$home"/}
  dynamic=$(readelf -d "$elf")
  # shellcheck disable=SC2016 # a literal $ORIGIN
  if grep -E 'RUNPATH|RPATH' <<<"$dynamic" | grep -v '\[\$ORIGIN' >/dev/null; then
    bad "$short: no absolute RUNPATH/RPATH" "$(grep -E 'RUNPATH|RPATH' <<<"$dynamic")"
  else
    ok "$short: no absolute RUNPATH/RPATH"
  fi
  sections=$(readelf -S -W "$elf")
  if grep -E '\.symtab|\.debug_(info|line|str|abbrev)' <<<"$sections" >/dev/null; then
    bad "$short: stripped" "$(grep -E '\.symtab|\.debug_(info|line|str|abbrev)' <<<"$sections")"
  else
    ok "$short: stripped"
  fi
  text=$(strings -a "$elf")
  found=""
  for p in "${build_paths[@]}"; do
    if grep -F -- "$p" <<<"$text" >/dev/null; then found+="$p: $(grep -F -m 2 -- "$p" <<<"$text")"$'\n'; fi
  done
  if [[ -z "$found" ]]; then ok "$short: no build-machine path in its bytes"; else bad "$short: no build-machine path in its bytes" "$found"; fi
done
for b in bench-cohort bench-summarize; do
  libs=$(ldd "$home/bin/$b")
  if grep -E 'libtorch|libc10|not found' <<<"$libs" >/dev/null; then bad "$b needs no libtorch" "$libs"; else ok "$b needs no libtorch"; fi
  check "$b --version runs from the bundle with a bare environment" clean "$home/bin/$b" --version
done
if [[ -e "$libtorch_lib/libtorch_cuda.so" ]]; then
  if grep -qx libtorch_cuda.so "$home/libexec/bench-worker.libs"; then ok "bench-worker links libtorch_cuda.so"
  else bad "bench-worker links libtorch_cuda.so" "$(cat "$home/libexec/bench-worker.libs")"; fi
fi

# --- the launcher with a host PyTorch: a python3 with torch first on PATH, nothing else set
if [[ -n "$venv_python" ]]; then
  # A wrapper, not a symlink: a venv's python finds its environment from the path it runs as.
  mkdir -p "$work/host-bin"
  printf '#!/bin/sh\nexec %q "$@"\n' "$venv_python" > "$work/host-bin/python3"
  chmod +x "$work/host-bin/python3"
  host() { env -i HOME="$work/home" PATH="$work/host-bin:/usr/local/bin:/usr/bin:/bin" TMPDIR="$work" "$@"; }
else
  host() { env -i HOME="$work/home" PATH=/usr/local/bin:/usr/bin:/bin TMPDIR="$work" LIBTORCH="$LIBTORCH" "$@"; }
fi
if out=$(host "$home/bin/bench-worker" --version 2>&1); then
  if [[ "$(tail -n +2 <<<"$out")" == "$(tail -n +2 "$home/VERSION")" ]]; then
    ok "bin/bench-worker --version (host PyTorch) prints VERSION's facts"
  else
    bad "bin/bench-worker --version (host PyTorch) prints VERSION's facts" "$out"$'\n--- VERSION\n'"$(cat "$home/VERSION")"
  fi
else
  bad "bin/bench-worker --version with a host PyTorch" "$out"
fi
if grep -q '^git revision: unknown' "$home/VERSION" || ! grep -q '^libtorch: 2\.11\.0' "$home/VERSION"; then
  bad "VERSION names a git revision and libtorch 2.11.0" "$(cat "$home/VERSION")"
else
  ok "VERSION names a git revision and libtorch 2.11.0"
fi
if out=$(host "$home/bin/bench-worker" --generate man 2>&1) && grep -q '^\.TH bench-worker 1' <<<"$out"; then
  ok "bin/bench-worker --generate man"
else
  bad "bin/bench-worker --generate man" "$(head -n 5 <<<"$out")"
fi
check "bash completions parse" bash -n "$home/share/bash-completion/completions/bench-worker"
for b in bench-worker bench-cohort bench-summarize; do
  if grep -q "^#compdef $b" "$home/share/zsh/site-functions/_$b" && grep -q "complete -c $b" "$home/share/fish/vendor_completions.d/$b.fish"; then
    ok "$b: zsh and fish completions name it"
  else
    bad "$b: zsh and fish completions name it"
  fi
done
# One worker on the CPU through the bundle's own bench-cohort (which starts bin/bench-worker).
cohort="$work/cohort"
if out=$(host OMP_NUM_THREADS=1 "$home/bin/bench-cohort" --count 1 --workload infer --mode exclusive \
    --device cpu --batch-size 2 --image-size 32 --warmup-batches 2 --window-s 2 --start-lead-s 1 \
    --out "$cohort" 2>&1) && [[ -s "$cohort/summary.json" ]] && grep -q '"libtorch_version": "2.11' "$cohort"/worker-0/worker.json; then
  ok "a one-worker CPU cohort runs through bin/bench-cohort and the launcher"
else
  bad "a one-worker CPU cohort runs through bin/bench-cohort and the launcher" "$out"
fi

# --- the launcher without a usable libtorch: exit 127 and a message that says what to do
mkdir -p "$work/no-torch-bin"
printf '#!/bin/sh\nexit 1\n' > "$work/no-torch-bin/python3"   # a python3 without torch
chmod +x "$work/no-torch-bin/python3"
expect_refusal() { # NAME WANT... -- COMMAND...: exit 127 and every WANT in the message
  local name=$1 wants=() out rc=0
  shift
  while [[ $1 != -- ]]; do wants+=("$1"); shift; done
  shift
  out=$("$@" 2>&1) || rc=$?
  local missing=""
  for w in "${wants[@]}"; do grep -qF -- "$w" <<<"$out" || missing+=" '$w'"; done
  if [[ $rc -eq 127 && -z "$missing" ]]; then ok "$name"; else bad "$name (exit $rc, missing$missing)" "$out"; fi
}
expect_refusal "no torch anywhere: exit 127 naming libtorch_cpu.so and LIBTORCH" \
  libtorch_cpu.so "export LIBTORCH=" "pip install torch==2.11.0" -- \
  env -i HOME="$work/home" PATH="$work/no-torch-bin:/usr/bin:/bin" "$home/bin/bench-worker" --version
expect_refusal "COLOAD_PYTHON that does not exist: exit 127" libtorch_cpu.so "/nonexistent/python3 has no torch" -- \
  clean COLOAD_PYTHON=/nonexistent/python3 "$home/bin/bench-worker" --version
# A torch folder with only some of the libraries, then one of another version.
mkdir -p "$work/partial/lib" "$work/other/lib"
while IFS= read -r so; do ln -s "$libtorch_lib/$so" "$work/other/lib/$so"; done < "$home/libexec/bench-worker.libs"
ln -s "$libtorch_lib/libc10.so" "$work/partial/lib/libc10.so"
expect_refusal "LIBTORCH lacking libtorch_cpu.so: named" "lacks: libtorch_cpu.so" "LIBTORCH=$work/partial" -- \
  clean LIBTORCH="$work/partial" "$home/bin/bench-worker" --version
echo "__version__ = '2.10.0+cu128'" > "$work/other/version.py"
expect_refusal "LIBTORCH of another version: both versions named" "2.11.0" "2.10.0" COLOAD_ALLOW_LIBTORCH_MISMATCH -- \
  clean LIBTORCH="$work/other" "$home/bin/bench-worker" --version
check "LIBTORCH to the real libtorch works with a bare environment" \
  clean LIBTORCH="$(dirname "$libtorch_lib")" "$home/bin/bench-worker" --version
# Sourcing env.sh from an interactive-like shell: PATH gains bin/, a failure returns (no exit).
if out=$(env -i HOME="$work/home" PATH="$work/no-torch-bin:/usr/bin:/bin" bash -c ". '$home/env.sh'; echo still-here rc=\$?" 2>&1) \
    && grep -q 'still-here rc=1' <<<"$out"; then
  ok "a failing env.sh returns 1 to the shell that sources it, without exiting it"
else
  bad "a failing env.sh returns 1 to the shell that sources it, without exiting it" "$out"
fi
if out=$(host bash -c ". '$home/env.sh' && command -v bench-worker && bench-worker --version" 2>&1) \
    && grep -qx "$home/bin/bench-worker" <<<"$out"; then
  ok "env.sh puts bin/ on PATH"
else
  bad "env.sh puts bin/ on PATH" "$out"
fi

# --- shellcheck
shellcheck="$root/.venv-tools/bin/shellcheck"
if [[ -x "$shellcheck" ]]; then
  check "shellcheck of the dist, laptop, package, demo and GPU-host scripts" "$shellcheck" -x -P SCRIPTDIR \
    scripts/dist.sh scripts/dist/test.sh scripts/dist/env.sh scripts/dist/bench-worker \
    scripts/target-dir scripts/completions.sh scripts/check-laptop.sh scripts/check-package.sh \
    scripts/demo.sh scripts/with-libtorch scripts/provision-libtorch.sh scripts/gpu/study.sh \
    scripts/gpu/use-dist.sh scripts/gpu/check.sh scripts/gpu/round2-serve.sh \
    scripts/gpu/test-binaries.sh scripts/gpu/gpm-overhead.sh scripts/gpu/models.sh scripts/gpu/llm-decode.sh scripts/gpu/resume.sh \
    scripts/perf/compare.sh scripts/perf/decode-compare.sh scripts/results/check.sh scripts/report-check.sh
else
  bad "shellcheck is missing: run scripts/provision-tools.sh"
fi

echo
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
