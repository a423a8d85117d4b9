#!/usr/bin/env bash
# CI check: docs/results.md (and the decode tables of docs/performance.md) is what `bench-summarize results-page` renders from docs/results/data/**
# and its template (crates/report/src/results_page/results.md.tmpl), with the study reports' own
# rules. Renders it in memory and fails (exit 1, naming the first differing line) when the
# committed page differs: a figure edited by hand, or data changed without rendering the page
# again; a template that types a figure itself, or data that do not read, exit 2.
#   scripts/results/check.sh                      # check
#   cargo run -p bench-summarize -- results-page  # render the page again
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo run --locked -q -p bench-summarize -- results-page --check "$@"
# The decode tables of docs/performance.md, each from its run's folder.
data=docs/results/data
python3 scripts/perf/decode_table.py $data/2026-12-02-decode-1928-gpt2 --check
python3 scripts/perf/decode_table.py $data/2026-12-02-decode-1934-tinyllama-graph \
    --block decode-compare-tinyllama-graph --check
python3 scripts/perf/decode_table.py $data/2026-12-02-decode-1936-tinyllama-eager \
    --block decode-compare-tinyllama-eager --check
python3 scripts/perf/decode_table.py $data/2026-12-02-decode-attention \
    --block decode-attention --check
python3 scripts/perf/decode_table.py $data/2026-12-02-decode-1553 \
    --block decode-compare-1553 --check
python3 scripts/perf/decode_table.py docs/results/data/2026-12-02-decode-1544-b8 \
    --block decode-compare-b8 --check
python3 scripts/perf/decode_table.py docs/results/data/2026-12-02-decode \
    --block decode-compare-before --check
