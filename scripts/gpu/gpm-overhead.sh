#!/usr/bin/env bash
# What GPM and energy sampling cost a worker (docs/performance.md): solo training
# throughput with GPM off and on, side by side on one GPU, alternating ABBA (off,on,on,off, ...)
# so that drift hits both settings alike, REPEATS runs of each; then whether the difference is
# inside the run-to-run noise, judged from the spread of the repeats of each setting.
#
# Here (with Rust), once:   just dist && scripts/gpu/test-binaries.sh
#   (the dist tarball, plus the device crate's GPU test as .gpu/tests/real_nvml; carry both)
# On the GPU host (PyTorch 2.11, no Rust), in one device call:
#   scripts/gpu/gpm-overhead.sh "$OUT" [REPEATS=6] [WINDOW_S=20]
# Settings: gpm-off = `--gpm-interval-s 0` (telemetry at 10 Hz with the energy counter, as every
# worker samples); gpm-on = the defaults (the same plus GPM every 1 s). SETTINGS="none gpm-off
# gpm-on" adds `none` (no sampler thread at all: `--telemetry-hz 0 --gpm-interval-s 0`).
# WORKER_FLAGS are appended to every worker's flags (e.g. `--device cpu --image-size 32` to try
# the script without a GPU); BIN overrides the binaries' folder (default: the dist tarball's).
# Writes into OUT (5 files): overhead.txt (the verdict), overhead.json (every run), real_nvml.txt
# (GPM and energy read through the raw NVML calls, with the cost of one reading), runs.tar.gz
# (every run's worker folder and summary.json), log.txt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -n "${BIN:-}" ]]; then
  bin=$BIN
else
  # shellcheck source=use-dist.sh
  . "$root/scripts/gpu/use-dist.sh"
fi

out=${1:?usage: scripts/gpu/gpm-overhead.sh OUT [REPEATS] [WINDOW_S] }
repeats=${2:-6}
window=${3:-20}
read -r -a settings <<< "${SETTINGS:-gpm-off gpm-on}"
mkdir -p "$out"
work=$(mktemp -d)
mkdir -p "$work/sync" "$work/runs"
# Whatever happens, the runs made so far come back.
trap 'tar -C "$work" -czf "$out/runs.tar.gz" runs; rm -rf "$work"' EXIT
log="$out/log.txt"
exec > >(tee -a "$log") 2>&1

if [[ -n "${BIN:-}" ]]; then
  torch_lib="$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib"
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

flags_of() {
  case $1 in
    none) echo "--telemetry-hz 0 --gpm-interval-s 0" ;;
    gpm-off) echo "--gpm-interval-s 0" ;;
    gpm-on) echo "" ;;
    *) echo "unknown setting $1 (none, gpm-off, gpm-on)" >&2; exit 2 ;;
  esac
}

# One solo training worker through the barrier and a timed window; its summary beside it.
run_one() {
  local name=$1 setting=$2
  local dir="$work/runs/$name"
  mkdir -p "$dir"
  # shellcheck disable=SC2046,SC2086 # the setting's and WORKER_FLAGS's flags are meant to split
  "$bin/bench-worker" --experiment "gpm-overhead-$name-$$" --replica 0 --count 1 \
    --workload train --mode exclusive --sync-dir "$work/sync" --out "$dir/worker-0" \
    --window-s "$window" --warmup-batches 20 --start-lead-s 2 --quiet \
    $(flags_of "$setting") ${WORKER_FLAGS:-} > "$dir/worker.log" 2>&1 ||
    { echo "$name: bench-worker failed (see runs.tar.gz)"; cat "$dir/worker.log"; return 1; }
  "$bin/bench-summarize" "$dir" --out "$dir/summary.json" --format json > /dev/null
  echo "$(date -u +%T) $name: $(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
print(f\"{s['workers'][0]['samples_per_s']:.1f} samples/s\")" "$dir/summary.json")"
}

nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode --format=csv || true
if [[ -x "$root/.gpu/tests/real_nvml" ]]; then
  "$root/.gpu/tests/real_nvml" --nocapture --test-threads 1 > "$out/real_nvml.txt" 2>&1 ||
    echo "real_nvml FAILED (see real_nvml.txt)"
  grep -E "takes|gpm|energy" "$out/real_nvml.txt" || true
else
  echo "no .gpu/tests/real_nvml (run scripts/gpu/test-binaries.sh here first): skipping the raw NVML test" |
    tee "$out/real_nvml.txt"
fi

# One discarded run first: the first process on a fresh machine pays for cold caches.
run_one warmup-discarded "${settings[-1]}"
order=()
for ((i = 0; i < repeats; i++)); do
  if ((i % 2 == 0)); then order+=("${settings[@]}"); else
    for ((j = ${#settings[@]} - 1; j >= 0; j--)); do order+=("${settings[j]}"); done
  fi
done
k=0
for setting in "${order[@]}"; do
  run_one "$(printf '%02d' $k)-$setting" "$setting"
  k=$((k + 1))
done

python3 - "$work/runs" "$out" "$window" <<'EOF'
"""Per setting: the runs' samples/s, mean, sample stddev, min, max, coefficient of variation.
Against gpm-off: the difference of means with a 95% Welch interval, and the mean of the paired
differences (neighbouring runs, which share the machine's drift) with its 95% interval. The
difference is within run-to-run noise when both intervals contain 0."""
import json, math, os, statistics as st, sys

runs_dir, out, window = sys.argv[1], sys.argv[2], float(sys.argv[3])
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 14: 2.145, 16: 2.120, 20: 2.086, 30: 2.042}
def t975(df):
    df = max(1, int(df))
    return T975.get(df) or T975[max(k for k in T975 if k <= df)]

runs = []
for name in sorted(os.listdir(runs_dir)):
    if name.startswith("warmup"):
        continue
    s = json.load(open(os.path.join(runs_dir, name, "summary.json")))
    w = json.load(open(os.path.join(runs_dir, name, "worker-0", "worker.json")))
    gpm = next((g for g in s.get("gpm", []) if g["scope"] == "device"), None)
    runs.append({"run": name, "setting": name.split("-", 1)[1],
                 "samples_per_s": s["workers"][0]["samples_per_s"],
                 "p99_ms": s["workers"][0]["latency_ms"]["p99"],
                 "gpm_readings": gpm["samples"] if gpm else 0,
                 "sm_occupancy_pct": (gpm or {}).get("metrics", {}).get("sm_occupancy_pct"),
                 "joules": (s.get("energy") or {}).get("joules"),
                 "gpm_supported": (w.get("gpm") or {}).get("supported"),
                 "gpm_reason": (w.get("gpm") or {}).get("reason")})
by = {}
for r in runs:
    by.setdefault(r["setting"], []).append(r["samples_per_s"])
lines = [f"solo train, {window:g} s windows, runs alternating ABBA; samples/s per run:", ""]
for r in runs:
    occ = r["sm_occupancy_pct"]
    lines.append(f"  {r['run']:<14} {r['samples_per_s']:9.1f}  p99 {r['p99_ms']:.3f} ms  "
                 f"gpm readings {r['gpm_readings']:3d}"
                 + (f"  SM occupancy {occ['mean']:.1f} %" if occ else "")
                 + (f"  {r['joules']:.0f} J" if r["joules"] else ""))
lines.append("")
stats = {}
for k, v in by.items():
    m, sd = st.mean(v), (st.stdev(v) if len(v) > 1 else 0.0)
    stats[k] = (m, sd, len(v))
    lines.append(f"{k:<8} n {len(v)}  mean {m:9.1f}  stddev {sd:6.1f}  min {min(v):9.1f}  "
                 f"max {max(v):9.1f}  spread (max-min)/mean {(max(v) - min(v)) / m * 100:.2f} %  "
                 f"cv {sd / m * 100:.2f} %")
verdicts = []
base = by.get("gpm-off")
for k, v in by.items():
    if k == "gpm-off" or not base:
        continue
    (m0, s0, n0), (m1, s1, n1) = stats["gpm-off"], stats[k]
    d = m1 - m0
    se = math.sqrt(s0 ** 2 / n0 + s1 ** 2 / n1)
    df = se ** 4 / ((s0 ** 2 / n0) ** 2 / max(n0 - 1, 1) + (s1 ** 2 / n1) ** 2 / max(n1 - 1, 1)) if se > 0 else 1
    lo, hi = d - t975(df) * se, d + t975(df) * se
    # Neighbouring off/on runs, in time order.
    seq = [(r["setting"], r["samples_per_s"]) for r in runs if r["setting"] in ("gpm-off", k)]
    pairs = [b[1] - a[1] if a[0] == "gpm-off" else a[1] - b[1]
             for a, b in zip(seq[0::2], seq[1::2]) if a[0] != b[0]]
    pm = st.mean(pairs) if pairs else float("nan")
    ps = st.stdev(pairs) if len(pairs) > 1 else float("nan")
    ph = t975(len(pairs) - 1) * ps / math.sqrt(len(pairs)) if len(pairs) > 1 else float("nan")
    inside = lo <= 0 <= hi and (math.isnan(ph) or pm - ph <= 0 <= pm + ph)
    lines += ["", f"{k} - gpm-off: {d:+.1f} samples/s ({d / m0 * 100:+.2f} %), 95% Welch interval "
              f"[{lo:+.1f}, {hi:+.1f}]; paired (n {len(pairs)}): {pm:+.1f} +- {ph:.1f}",
              f"verdict: {'WITHIN' if inside else 'OUTSIDE'} run-to-run noise "
              f"(one run's spread: cv {s0 / m0 * 100:.2f} % off, {s1 / m1 * 100:.2f} % on)"]
    verdicts.append({"setting": k, "difference": d, "relative": d / m0, "welch95": [lo, hi],
                     "paired_mean": pm, "paired_half95": ph, "within_noise": inside})
text = "\n".join(lines) + "\n"
print(text)
open(os.path.join(out, "overhead.txt"), "w").write(text)
json.dump({"window_s": window, "runs": runs, "verdicts": verdicts},
          open(os.path.join(out, "overhead.json"), "w"), indent=2)
EOF

echo "gpm overhead written to $out"
