# coload: run `just` for this list. Every cargo call goes through scripts/with-libtorch, which
# provisions libtorch (torch==2.11.0 in .venv) on first use unless $LIBTORCH is set.

set shell := ["bash", "-euo", "pipefail", "-c"]

tl := justfile_directory() / "scripts/with-libtorch"

# List the recipes
help:
    @just --list --unsorted

# Install libtorch into .venv (torch==2.11.0, once; skipped when $LIBTORCH is set)
provision:
    @if [[ -z "${LIBTORCH:-}" ]]; then scripts/provision-libtorch.sh; else echo "using LIBTORCH=$LIBTORCH"; fi

# Run a real cohort end to end on this machine (GPU when present, else CPU) and print its summary
demo:
    scripts/demo.sh

# Run a serve worker beside trainers (GPU when present, else CPU) and print its request latency
demo-serve:
    scripts/demo-serve.sh

# Run co-located LLM decode workers (GPU when present, else CPU) and print their tokens/s and TPOT
demo-llm:
    scripts/demo-llm.sh

# Run every test of the workspace (provisions libtorch first), deploy/ and the dist tarball
test:
    # coload-cluster's end-to-end and YAML tests read manifests with .venv-tools' Python (PyYAML)
    scripts/provision-tools.sh
    {{tl}} cargo test --workspace --all-targets
    {{tl}} cargo test --workspace --doc
    {{just_executable()}} test-deploy
    {{just_executable()}} test-dist

# Validate deploy/ offline (polyaxon check, kubernetes-validate, script stubs; installs .venv-tools once)
test-deploy:
    scripts/provision-tools.sh
    deploy/tests/run.sh

# Check formatting, lints (clippy pedantic, warnings are errors) and the import picture (no circles, nothing upward)
lint:
    cargo fmt --all -- --check
    python3 scripts/check-imports.py
    {{tl}} cargo clippy --workspace --all-targets -- -D warnings

# Format the code
fmt:
    cargo fmt --all

# Run the micro-benchmarks (per-batch host overhead, summarize speed)
bench:
    {{tl}} cargo bench -p coload-timing --bench overhead -- --noplot
    {{tl}} cargo bench -p coload-timing --bench serve -- --noplot
    cargo run --release -q -p coload-analysis --example summarize_bench
    cargo run --release -q -p coload-analysis --example serve_summarize_bench

# Build the release binaries
build:
    {{tl}} cargo build --release --workspace --bins

# Run bench-cohort from the release build with libtorch found, e.g. `just cohort --count 2 --workload train --mode timeslice --out runs/ts2`
cohort *ARGS:
    {{tl}} cargo build --release -q -p bench-worker -p bench-cohort
    {{tl}} "$(scripts/target-dir)/release/bench-cohort" {{ARGS}}

# Build the GPU-host tarball dist/coload-<version>-<rev>-<arch>-linux.tar.gz (binaries, env.sh, deploy/, man pages, completions)
dist:
    scripts/dist.sh

# Build the dist tarball and check it: relocatable, no build paths, runs with a host PyTorch, clear errors without
test-dist:
    scripts/provision-tools.sh
    scripts/dist/test.sh

# Write man pages and shell completions of the release binaries under OUT (share/ layout; default <target>/share)
completions OUT="":
    scripts/completions.sh {{OUT}}

# Install and run bench-summarize as on a laptop: no libtorch variables, no virtual environment on PATH
check-laptop:
    scripts/check-laptop.sh

# Package the library crates that do not link libtorch (cargo package --no-verify; nothing uploaded)
package:
    scripts/check-package.sh


# Render the reports (recorded cohorts, a CPU `study quick`) in headless Chromium: screenshots, and a failure on console errors or empty charts
report-check OUT="":
    scripts/report-check.sh {{OUT}}

# Check that docs/results.md is what the data under docs/results/data give (regenerate: cargo run -p bench-summarize -- results-page)
results-check:
    scripts/results/check.sh

# Run a study plan on this node (article, quick, or a TOML file), e.g. `just study quick runs/quick`
study PLAN OUT *FLAGS:
    {{tl}} cargo build --release -p bench-cohort -p bench-worker
    {{tl}} "$(scripts/target-dir)/release/bench-cohort" study {{PLAN}} --out {{OUT}} {{FLAGS}}

# What CI runs: lint, the tests, the laptop build, packaging, then the reports in a real browser
ci: lint test check-laptop package report-check results-check

# Fuzz the worker.json / batches.jsonl readers for SECONDS each (nightly + cargo-fuzz; not in CI)
fuzz SECONDS="60":
    command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
    cd fuzz && cargo +nightly fuzz run worker_report -- -max_total_time={{SECONDS}}
    cd fuzz && cargo +nightly fuzz run batches -- -max_total_time={{SECONDS}}
