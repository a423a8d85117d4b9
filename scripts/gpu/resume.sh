#!/usr/bin/env bash
# One slice of a study on a GPU host, resumed from the folder the repository keeps (a
# decision study takes more than one device call). Copies FOLDER (a study folder committed
# under docs/results/data, whose worker folders keep summaries and worker.json but no
# *.jsonl) to a short path on the host, runs the plan there for at most BUDGET seconds with the
# dist bundle (scripts/gpu/study.sh), and leaves under $OUT the study's log and the folder as a
# tarball without the bulky *.jsonl records, ready to unpack over FOLDER here:
#   scripts/gpu/resume.sh PLAN FOLDER [BUDGET_S] [study flags...]
#   scripts/gpu/resume.sh decision docs/results/data/2026-12-01-round4/decision 540
#   tar -xzf <files_at>/study.tar.gz -C /tmp && cp -r /tmp/study/. FOLDER/    # back here
# The short path matters: an MPS daemon's sockets live under the cohort's folder when it is
# short enough (coload-launch falls back to a private folder otherwise).
set -uo pipefail
plan=${1:?usage: scripts/gpu/resume.sh PLAN FOLDER [BUDGET_S] [flags...]}
folder=${2:?usage: scripts/gpu/resume.sh PLAN FOLDER [BUDGET_S] [flags...]}
budget=${3:-540}
shift $(($# < 3 ? $# : 3))
out=${OUT:?OUT must name the folder whose files come back}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=/tmp/coload-resume
if [[ ! -d "$work/study" ]]; then
  mkdir -p "$work"
  if [[ -d "$folder" ]]; then
    cp -r "$folder" "$work/study"
  fi
fi
"$root/scripts/gpu/study.sh" "$plan" "$work/study" --time-budget-s "$budget" "$@" >"$out/study.log" 2>&1
code=$?
echo "study exit $code"
tail -40 "$out/study.log"
tar -czf "$out/study.tar.gz" --exclude='*.jsonl' -C "$work" study 2>/dev/null
ls -la "$out"
