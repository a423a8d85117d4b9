#!/usr/bin/env bash
# Writes the man pages and shell completions of the three binaries, generated from their clap
# definitions by the hidden `--generate KIND` flag, under OUT in the layout of a `share/` folder:
#   man/man1/<bin>.1, bash-completion/completions/<bin>, zsh/site-functions/_<bin>,
#   fish/vendor_completions.d/<bin>.fish
#   scripts/completions.sh [OUT [BINDIR]]
# BINDIR holds bench-worker, bench-cohort and bench-summarize (default: the release build, built
# first). bench-worker runs through scripts/with-libtorch: it cannot start without libtorch.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ $# -gt 2 || "${1:-}" == -* ]]; then
  echo "usage: scripts/completions.sh [OUT [BINDIR]]" >&2
  exit 2
fi
out=${1:-$("$root/scripts/target-dir")/share}
bindir=${2:-}
if [[ -z "$bindir" ]]; then
  bindir="$("$root/scripts/target-dir")/release"
  "$root/scripts/with-libtorch" cargo build --release -q --manifest-path "$root/Cargo.toml" \
    -p bench-worker -p bench-cohort -p bench-summarize
fi
for bin in bench-worker bench-cohort bench-summarize; do
  [[ -x "$bindir/$bin" ]] || { echo "error: $bindir/$bin is missing; build it first" >&2; exit 1; }
  for kind in man complete-bash complete-zsh complete-fish; do
    case $kind in
      man) path="man/man1/$bin.1" ;;
      complete-bash) path="bash-completion/completions/$bin" ;;
      complete-zsh) path="zsh/site-functions/_$bin" ;;
      complete-fish) path="fish/vendor_completions.d/$bin.fish" ;;
    esac
    mkdir -p "$(dirname "$out/$path")"
    "$root/scripts/with-libtorch" "$bindir/$bin" --generate "$kind" > "$out/$path"
    [[ -s "$out/$path" ]] || { echo "error: $bin --generate $kind wrote nothing" >&2; exit 1; }
  done
done
echo "man pages and completions written under $out" >&2
