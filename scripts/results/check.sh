#!/usr/bin/env bash
# CI check (issue 23): docs/results.md is what scripts/results/results_page.py makes from
# docs/results/data/** and scripts/results/results.md.tmpl. Regenerates it in memory and fails
# (exit 1, with the diff) when the committed page differs: a figure edited by hand, data changed
# without regenerating, or a template that types a figure itself (exit 2).
#   scripts/results/check.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
exec python3 "$root/scripts/results/results_page.py" --check "$@"
