#!/usr/bin/env python3
"""Turn recorded coload cohorts into the generated material of docs/results.md.

Usage:
    python3 scripts/results/make_results.py docs/results/data --out docs/results

--bench-summarize defaults to the release build wherever cargo puts it (scripts/target-dir
asks cargo, so $CARGO_TARGET_DIR is honoured).

DATA holds one folder per cohort, each with summary.json (bench-summarize) and
worker-<i>.json (each worker's worker.json). The exclusive one-worker cohorts are the
solo baselines (one per workload). The script

1. runs `bench-summarize compare` over every other cohort against those baselines and
   copies comparison.json and comparison.md into OUT;
2. extracts the inline SVG plots of report.html into standalone OUT/<name>.svg files
   (checked: SVG namespace present, parses as XML);
3. writes OUT/tables.md (the tables of docs/results.md);
4. prints a short digest of the key numbers.

Python 3 standard library only. Nothing in DATA is modified.
"""

import argparse
import glob
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG_NS = "http://www.w3.org/2000/svg"
GIB = 1024 ** 3

# Cohort folders in reading order; any folder not named here follows, sorted.
PREFERRED_ORDER = [
    "timeslice-train1", "timeslice-train4",
    "timeslice-train7-r1", "timeslice-train7-r2", "timeslice-train7-r3",
    "timeslice-infer1", "timeslice-infer4", "timeslice-infer7",
    "timeslice-mixed-r1", "timeslice-mixed-r2", "timeslice-mixed-r3",
    "mps-train4", "mps-train7", "mps-train7-r2", "mps-mixed", "mps-mixed-r2",
]
# Cohorts whose per-cohort plots are extracted (unless --all-plots).
RATE_PLOTS = ["timeslice-mixed-r1", "timeslice-train7-r1", "mps-mixed", "mps-train7"]
CDF_PLOTS = ["timeslice-mixed-r1", "mps-mixed"]
# Time-slicing against MPS, side by side: shape -> (time-slice cohorts, MPS cohorts).
SIDE_BY_SIDE = [
    ("train4", ["timeslice-train4"], ["mps-train4"]),
    ("train7", ["timeslice-train7-r1", "timeslice-train7-r2", "timeslice-train7-r3"],
     ["mps-train7", "mps-train7-r2"]),
    ("mixed", ["timeslice-mixed-r1", "timeslice-mixed-r2", "timeslice-mixed-r3"],
     ["mps-mixed", "mps-mixed-r2"]),
]
WORKLOADS = ["train", "infer"]


# ---------------------------------------------------------------- helpers

def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fmt(x, digits=1):
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "-"
    return f"{x:,.{digits}f}"


def short_uuid(u):
    if not u:
        return "-"
    m = re.match(r"(GPU|MIG)-([0-9a-fA-F]{8})", u)
    return f"{m.group(1)}-{m.group(2)}" if m else u[:12]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def table(headers, rows, align=None):
    """A markdown table; align is a string of 'l'/'r' per column (default: first l, rest r)."""
    if align is None:
        align = "l" + "r" * (len(headers) - 1)
    out = ["| " + " | ".join(headers) + " |",
           "| " + " | ".join("---" if a == "l" else "---:" for a in align) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- loading

class Cohort:
    def __init__(self, name, folder):
        self.name = name
        self.folder = folder
        self.summary = load(os.path.join(folder, "summary.json"))
        paths = glob.glob(os.path.join(folder, "worker-*.json"))
        key = lambda p: int(re.search(r"worker-(\d+)\.json$", p).group(1))
        self.workers = [load(p) for p in sorted(paths, key=key)]
        self.experiment = self.summary["experiment"]
        self.mode = self.summary["mode"]
        self.count = self.summary["count"]
        self.mix = self.summary["workload_mix"]
        if len(self.workers) != self.count:
            raise SystemExit(f"{folder}: {len(self.workers)} worker files for count {self.count}")
        for w in self.workers:
            if w["experiment"] != self.experiment:
                raise SystemExit(f"{folder}: worker {w['replica']} belongs to {w['experiment']}")

    def is_solo_baseline(self):
        return self.mode == "exclusive" and self.count == 1

    def mix_label(self):
        return ", ".join(f"{n} {k}" for k, n in sorted(self.mix.items(), key=lambda kv: WORKLOADS.index(kv[0]) if kv[0] in WORKLOADS else 9))

    def mps_clients(self):
        vals = [(w.get("runtime") or {}).get("mps_client") for w in self.workers]
        return sum(1 for v in vals if v), len(vals)


def discover(data_dir):
    folders = sorted(d for d in glob.glob(os.path.join(data_dir, "*"))
                     if os.path.isfile(os.path.join(d, "summary.json")))
    if not folders:
        raise SystemExit(f"no cohort folder with a summary.json under {data_dir}")
    cohorts = {os.path.basename(d): Cohort(os.path.basename(d), d) for d in folders}
    baselines = {}
    for c in cohorts.values():
        if c.is_solo_baseline():
            (wl,) = c.mix.keys()
            if wl in baselines:
                raise SystemExit(f"two solo baselines for {wl}: {baselines[wl].name}, {c.name}")
            baselines[wl] = c
    missing = [wl for wl in WORKLOADS if wl not in baselines]
    if missing:
        raise SystemExit(f"no exclusive one-worker baseline for {', '.join(missing)}")
    rest = [n for n in cohorts if not cohorts[n].is_solo_baseline()]
    order = [n for n in PREFERRED_ORDER if n in rest] + sorted(n for n in rest if n not in PREFERRED_ORDER)
    return cohorts, baselines, order


# ---------------------------------------------------------------- compare + plots

def run_compare(bench, cohorts, baselines, order, tmp):
    cmd = [bench, "compare"]
    cmd += [os.path.join(cohorts[n].folder, "summary.json") for n in order]
    cmd += ["--baseline"] + [os.path.join(baselines[wl].folder, "summary.json") for wl in WORKLOADS]
    cmd += ["--out", tmp]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"bench-summarize compare failed (exit {res.returncode})")
    return res


FIGURE_RE = re.compile(r"<figure>\s*(<svg\b.*?</svg>)\s*<figcaption>(.*?)</figcaption>\s*</figure>", re.S)


def extract_svgs(report_html, exp_to_name, wanted_rate, wanted_cdf, all_plots):
    """Returns [(file name, caption, svg text)] for the plots to keep, and every caption seen."""
    with open(report_html, encoding="utf-8") as f:
        text = f.read()
    found, seen = [], []
    for m in FIGURE_RE.finditer(text):
        svg, caption = m.group(1), html.unescape(re.sub(r"<[^>]+>", "", m.group(2))).strip()
        seen.append(caption)
        name = None
        mm = re.match(r"Latency CDF per worker, cohort (\S+)", caption)
        if mm:
            c = exp_to_name.get(mm.group(1), mm.group(1))
            if all_plots or c in wanted_cdf:
                name = f"latency-cdf-{c}.svg"
        mm = re.match(r"Per-worker rate against solo, cohort (\S+)", caption)
        if mm:
            c = exp_to_name.get(mm.group(1), mm.group(1))
            if all_plots or c in wanted_rate:
                name = f"rate-vs-solo-{c}.svg"
        mm = re.match(r"Aggregate (\w+) samples/s against worker count", caption)
        if mm:
            name = f"aggregate-vs-count-{mm.group(1)}.svg"
        if name:
            found.append((name, caption, svg))
    return found, seen


def standalone_svg(svg, caption):
    """Make an inline SVG a standalone document and check it; returns the text."""
    if f'xmlns="{SVG_NS}"' not in svg.split(">", 1)[0]:
        svg = svg.replace("<svg", f'<svg xmlns="{SVG_NS}"', 1)
    # A <title> right after the root element names the plot (tooltips, accessibility).
    head, rest = svg.split(">", 1)
    title = "<title>" + html.escape(caption, quote=False) + "</title>"
    doc = '<?xml version="1.0" encoding="UTF-8"?>\n' + head + ">\n" + title + rest.rstrip() + "\n"
    root = ET.fromstring(doc.encode("utf-8"))  # raises on malformed XML
    if root.tag != f"{{{SVG_NS}}}svg":
        raise ValueError(f"root element is {root.tag}, not an SVG <svg>")
    for attr in ("width", "height"):
        if attr not in root.attrib:
            raise ValueError(f"<svg> has no {attr}")
    return doc


# ---------------------------------------------------------------- tables

def solo_table(baselines):
    rows = []
    for wl in WORKLOADS:
        c = baselines[wl]
        w = c.summary["workers"][0]
        wk = c.workers[0]
        tel = wk.get("telemetry") or {}
        rows.append([
            wl, f"`{c.name}`", fmt(w["samples_per_s"], 1), fmt(w["latency_ms"]["p50"], 3),
            fmt(w["latency_ms"]["p99"], 3),
            fmt(w["peak_device_bytes"] / GIB if w.get("peak_device_bytes") is not None else None, 2),
            f"`{short_uuid(w.get('gpu_uuid'))}`",
            fmt((tel.get("power_w") or {}).get("mean"), 0),
            fmt((tel.get("sm_clock_mhz") or {}).get("mean"), 0),
        ])
    return table(["workload", "cohort", "samples/s", "p50 ms", "p99 ms", "peak memory GiB",
                  "GPU", "power mean W", "SM clock mean MHz"], rows, "llrrrrlrr")


def cohort_index_table(cohorts, baselines, order):
    rows = []
    for n in [baselines[wl].name for wl in WORKLOADS] + order:
        c = cohorts[n]
        gpus = c.summary["colocation"]["physical_gpus"]
        mc, tot = c.mps_clients()
        rows.append([f"`{n}`", f"`{c.experiment}`", c.mode, c.count, c.mix_label(),
                     ", ".join(f"`{g}`" for g in gpus) or "-",
                     f"{mc}/{tot}" if c.mode == "mps" else "-",
                     fmt(c.summary["common_interval"]["seconds"], 3)])
    return table(["cohort", "experiment", "mode", "workers", "mix", "GPU UUID", "MPS clients", "common s"],
                 rows, "lllrllrr")


def per_worker_tables(cohorts, cmp_by_exp, order):
    out = []
    for n in order:
        c = cohorts[n]
        cc = cmp_by_exp[c.experiment]
        pw = {}
        for wl, g in cc["groups"].items():
            for p in g["per_worker"]:
                pw[p["replica"]] = (wl, p)
        rows = []
        for w in sorted(c.summary["workers"], key=lambda w: w["replica"]):
            wl, p = pw[w["replica"]]
            rows.append([w["replica"], wl, fmt(w["samples_per_s"], 1), fmt(p.get("rate_vs_solo"), 3),
                         fmt(w["latency_ms"]["p50"], 3), fmt(w["latency_ms"]["p99"], 3),
                         fmt(p.get("p99_vs_solo"), 3)])
        out.append(f"#### `{n}` ({c.mode}, {c.mix_label()})\n\n" +
                   table(["replica", "workload", "samples/s", "rate vs solo", "p50 ms", "p99 ms", "p99 vs solo"],
                         rows, "rlrrrrr"))
    return "\n".join(out)


def group_table(cohorts, cmp_by_exp, order):
    rows = []
    for n in order:
        c = cohorts[n]
        cc = cmp_by_exp[c.experiment]
        for wl in WORKLOADS:
            g = c.summary["groups"].get(wl)
            if not g:
                continue
            pw = g["per_worker_samples_per_s"]
            rows.append([f"`{n}`", c.mode, wl, g["workers"], fmt(g["aggregate_samples_per_s"], 1),
                         fmt(cc["groups"][wl].get("aggregate_vs_solo"), 3),
                         fmt(pw["min"], 1), fmt(pw["mean"], 1), fmt(pw["max"], 1),
                         fmt(g["jain_fairness"], 4), fmt(g["latency_ms"]["p99"], 3)])
    return table(["cohort", "mode", "group", "workers", "aggregate samples/s", "aggregate vs solo",
                  "per-worker min", "per-worker mean", "per-worker max", "Jain", "pooled p99 ms"],
                 rows, "lllrrrrrrrr")


def repeats_tables(comparison, exp_to_name):
    out = []
    for r in comparison["repeats"]:
        if len(r["experiments"]) < 2:
            continue
        names = [exp_to_name.get(e, e) for e in r["experiments"]]
        mix = ", ".join(f"{r['workload_mix'][k]} {k}" for k in WORKLOADS if k in r["workload_mix"])
        rows = []
        for wl in WORKLOADS:
            g = r["groups"].get(wl)
            if not g:
                continue
            for key, label, d in (("aggregate_samples_per_s", "aggregate samples/s", 1),
                                  ("per_worker_samples_per_s", "per-worker samples/s", 1),
                                  ("p99_ms", "pooled p99 ms", 3)):
                e = g[key]
                ci = "-" if e.get("ci95_low") is None else f"[{fmt(e['ci95_low'], d)}, {fmt(e['ci95_high'], d)}]"
                rows.append([wl, label, e["n"], fmt(e["mean"], d), fmt(e["stddev"], d), ci])
        crow = []
        for wl in WORKLOADS:
            g = r["groups"].get(wl)
            if not g:
                continue
            for x in g["cohorts"]:
                crow.append([f"`{exp_to_name.get(x['experiment'], x['experiment'])}`", wl,
                             fmt(x["aggregate_samples_per_s"], 1), fmt(x["per_worker_samples_per_s"], 1),
                             fmt(x["p99_ms"], 3)])
        out.append(f"#### {r['mode']}, {r['count']} workers ({mix}): {', '.join('`'+n+'`' for n in names)}\n\n"
                   + table(["group", "quantity", "n", "mean", "stddev", "95% CI (Student t)"], rows, "llrrrr")
                   + "\n"
                   + table(["cohort", "group", "aggregate samples/s", "per-worker samples/s", "pooled p99 ms"],
                           crow, "llrrr"))
    return "\n".join(out)


def side_by_side(cohorts, cmp_by_exp):
    out = []
    for shape, ts, mps in SIDE_BY_SIDE:
        rows = []
        mixed = shape == "mixed"
        for mode_label, names in (("time-slicing", ts), ("MPS", mps)):
            names = [n for n in names if n in cohorts]
            per = []
            for n in names:
                c = cohorts[n]
                cc = cmp_by_exp[c.experiment]
                mc, tot = c.mps_clients()
                tr = cc["groups"].get("train")
                row = {"agg": tr["aggregate_vs_solo"], "jain": tr["jain_fairness"], "p99": tr["p99_ms"],
                       "rate": mean([p["rate_vs_solo"] for p in tr["per_worker"]])}
                if mixed:
                    inf = cc["groups"]["infer"]["per_worker"][0]
                    row.update({"irate": inf["rate_vs_solo"], "ip99": inf["p99_ms"], "ip99r": inf["p99_vs_solo"]})
                per.append(row)
                rows.append([mode_label, f"`{n}`", f"{mc}/{tot}", *cells(row, mixed)])
            if len(per) > 1:
                m = {k: mean([p[k] for p in per]) for k in per[0]}
                rows.append([mode_label, f"**mean of {len(per)}**", "", *cells(m, mixed)])
        headers = ["mode", "cohort", "MPS clients", "train aggregate vs solo", "train per-worker rate vs solo",
                   "train Jain", "train pooled p99 ms"]
        if mixed:
            headers += ["infer rate vs solo", "infer p99 ms", "infer p99 vs solo"]
        out.append(f"#### {shape}\n\n" + table(headers, rows, "llr" + "r" * (len(headers) - 3)))
    return "\n".join(out)


def cells(row, mixed):
    c = [fmt(row["agg"], 3), fmt(row["rate"], 3), fmt(row["jain"], 4), fmt(row["p99"], 3)]
    if mixed:
        c += [fmt(row["irate"], 3), fmt(row["ip99"], 3), fmt(row["ip99r"], 3)]
    return c


def device_tables(cohorts, baselines, order):
    rows, mem_rows = [], []
    for n in [baselines[wl].name for wl in WORKLOADS] + order:
        c = cohorts[n]
        tels = [w.get("telemetry") or {} for w in c.workers]
        devs = [w.get("device") or {} for w in c.workers]
        gpus = sorted({d.get("gpu_uuid") for d in devs if d.get("gpu_uuid")})
        drivers = sorted({d.get("driver_version") for d in devs if d.get("driver_version")})
        g = lambda t, a, b: (t.get(a) or {}).get(b)
        pmean = mean([g(t, "power_w", "mean") for t in tels])
        pmax = max((x for x in (g(t, "power_w", "max") for t in tels) if x is not None), default=None)
        tmax = max((x for x in (g(t, "temperature_c", "max") for t in tels) if x is not None), default=None)
        cmin = min((x for x in (g(t, "sm_clock_mhz", "min") for t in tels) if x is not None), default=None)
        cmean = mean([g(t, "sm_clock_mhz", "mean") for t in tels])
        mmax = max((x for x in (g(t, "memory_used_bytes", "max") for t in tels) if x is not None), default=None)
        throttle = sorted({r for t in tels for r in (t.get("throttle_reasons") or [])})
        cpus = sorted({(w.get("host") or {}).get("cpus_allowed") for w in c.workers} - {None})
        rows.append([f"`{n}`", ", ".join(f"`{short_uuid(u)}`" for u in gpus) or "-",
                     ", ".join(drivers) or "-", ", ".join(str(x) for x in cpus) or "-",
                     fmt(pmean, 0), fmt(pmax, 0), fmt(tmax, 0), fmt(cmin, 0), fmt(cmean, 0),
                     fmt(mmax / GIB if mmax is not None else None, 2), ", ".join(throttle) or "none"])
        for d in c.summary["colocation"]["devices"]:
            tot, ps, hr = d.get("memory_total_bytes"), d.get("peak_sum_bytes"), d.get("headroom_bytes")
            mem_rows.append([f"`{n}`", f"`{short_uuid(d['device'])}`", len(d["replicas"]),
                             fmt(ps / GIB if ps is not None else None, 2),
                             fmt(tot / GIB if tot is not None else None, 2),
                             fmt(hr / GIB if hr is not None else None, 2),
                             fmt(100.0 * ps / tot if ps is not None and tot else None, 1)])
    t1 = table(["cohort", "GPU", "driver", "CPUs", "power mean W", "power max W", "temp max °C",
                "SM clock min MHz", "SM clock mean MHz", "memory used max GiB", "throttle reasons"],
               rows, "lllrrrrrrrl")
    t2 = table(["cohort", "device", "workers", "sum of peaks GiB", "device memory GiB", "headroom GiB",
                "sum of peaks %"], mem_rows, "llrrrrr")
    return t1, t2


def barrier_table(cohorts, baselines, order):
    rows, spreads = [], []
    for n in [baselines[wl].name for wl in WORKLOADS] + order:
        c = cohorts[n]
        bs = [w.get("barrier") or {} for w in c.workers]
        acts = [b["actual_start_unix_ns"] for b in bs if b.get("actual_start_unix_ns") is not None]
        scheds = {b.get("scheduled_start_unix_ns") for b in bs}
        late = [b["lateness_ns"] for b in bs if b.get("lateness_ns") is not None]
        offs = [b["clock_offset_ns"] for b in bs if b.get("clock_offset_ns") is not None]
        unc = [b["clock_offset_uncertainty_ns"] for b in bs if b.get("clock_offset_uncertainty_ns") is not None]
        spread = (max(acts) - min(acts)) / 1e3 if acts else None
        latest = max(c.workers, key=lambda w: (w.get("barrier") or {}).get("lateness_ns") or 0)["replica"]
        if spread is not None:
            spreads.append((spread, n))
        rows.append([f"`{n}`", len(c.workers), len(scheds), fmt(spread, 1),
                     fmt(max(late) / 1e3 if late else None, 1), latest if len(c.workers) > 1 else "-",
                     f"{fmt(min(offs) / 1e6, 3)} .. {fmt(max(offs) / 1e6, 3)}" if offs else "-",
                     fmt(max(unc) / 1e6 if unc else None, 3)])
    t = table(["cohort", "workers", "scheduled starts", "start spread µs", "max lateness µs",
               "latest replica", "clock offset range ms", "max offset uncertainty ms"], rows, "lrrrrrrr")
    return t, max(spreads) if spreads else (None, None)


def warnings_table(cohorts, baselines, order):
    rows = []
    for n in [baselines[wl].name for wl in WORKLOADS] + order:
        c = cohorts[n]
        kinds = {}
        for w in c.summary.get("warnings", []):
            k = w["kind"]
            if k == "worker_warning":
                mm = re.match(r"replica \d+: (\w+):", w["message"])
                k = f"worker_warning ({mm.group(1)})" if mm else k
            kinds.setdefault(k, []).append(w["message"])
        for k, msgs in kinds.items():
            rows.append([f"`{n}`", k, len(msgs), msgs[0].replace("|", "\\|")])
    if not rows:
        return "No summary carries a warning.\n"
    return table(["cohort", "warning", "count", "first message"], rows, "llrl")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="folder of cohort folders (summary.json + worker-<i>.json)")
    ap.add_argument("--bench-summarize", default=None,
                    help="bench-summarize binary (default: <cargo target dir>/release/bench-summarize)")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--all-plots", action="store_true", help="extract every cohort's plots, not only the key ones")
    args = ap.parse_args()

    if args.bench_summarize is None:
        target_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target-dir")
        target = subprocess.run([target_dir], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
        args.bench_summarize = os.path.join(target, "release", "bench-summarize")

    cohorts, baselines, order = discover(args.data)
    exp_to_name = {c.experiment: n for n, c in cohorts.items()}
    os.makedirs(args.out, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="coload-results-") as tmp:
        run_compare(args.bench_summarize, cohorts, baselines, order, tmp)
        for f in ("comparison.json", "comparison.md"):
            shutil.copyfile(os.path.join(tmp, f), os.path.join(args.out, f))
        plots, captions = extract_svgs(os.path.join(tmp, "report.html"), exp_to_name,
                                       RATE_PLOTS, CDF_PLOTS, args.all_plots)
    expected = {f"rate-vs-solo-{c}.svg" for c in RATE_PLOTS if c in cohorts} | \
               {f"latency-cdf-{c}.svg" for c in CDF_PLOTS if c in cohorts}
    got = {p[0] for p in plots}
    if not expected <= got or not any(n.startswith("aggregate-vs-count") for n in got):
        raise SystemExit(f"report.html lacks plots: {sorted(expected - got)} (captions seen: {captions})")
    written = []
    for name, caption, svg in plots:
        doc = standalone_svg(svg, caption)
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            f.write(doc)
        written.append((name, caption))

    comparison = load(os.path.join(args.out, "comparison.json"))
    cmp_by_exp = {c["experiment"]: c for c in comparison["cohorts"]}
    dev_t, mem_t = device_tables(cohorts, baselines, order)
    bar_t, (max_spread, max_spread_cohort) = barrier_table(cohorts, baselines, order)
    cfg = baselines["train"].summary["config"]

    md = []
    md.append("<!-- generated by scripts/results/make_results.py from docs/results/data; do not edit by hand -->\n")
    md.append("# Generated tables\n")
    md.append(f"Protocol: {cfg['model']} batch {cfg['batch_size']}, 3x{cfg['image_size']}x{cfg['image_size']} "
              f"{cfg['precision']}, {cfg['warmup_batches']} warmup batches, {cfg['start_lead_s']:g} s start lead, "
              f"{cfg['window_s']:g} s window. Rates are samples/s over the common interval; latencies are the "
              "execution time of one batch (device work completed), nearest rank. Ratios are against the "
              "exclusive solo of the same workload (rate vs solo below 1 and p99 vs solo above 1 are slowdowns). "
              "Training and inference are never added together.\n")
    md.append("## Cohorts\n")
    md.append(cohort_index_table(cohorts, baselines, order))
    md.append("## a. Solo baselines\n")
    md.append(solo_table(baselines))
    md.append("## b. Per cohort, per worker\n")
    md.append(per_worker_tables(cohorts, cmp_by_exp, order))
    md.append("## c. Per cohort and workload group\n")
    md.append("Aggregate = sum of the group's per-worker rates; Jain = (Σx)² / (n Σx²) over the per-worker "
              "rates; pooled p99 = over every kept batch of the group.\n")
    md.append(group_table(cohorts, cmp_by_exp, order))
    md.append("## d. Repeats\n")
    md.append("One value per cohort; mean, sample standard deviation and the 95% Student-t interval of the "
              "mean, as computed by `bench-summarize compare` (comparison.json `repeats`).\n")
    md.append(repeats_tables(comparison, exp_to_name))
    md.append("## e. Time-slicing against MPS\n")
    md.append("Per-worker rate vs solo is the mean over the group's workers. \"MPS clients\" counts the workers "
              "that recorded `runtime.mps_client: true`.\n")
    md.append(side_by_side(cohorts, cmp_by_exp))
    md.append("## f. Device and telemetry\n")
    md.append("Device-wide NVML samples (10 Hz) taken by every worker over its window; mean = mean of the "
              "workers' means, max/min = over all workers. Under time-slicing and MPS none of it belongs to "
              "one worker.\n")
    md.append(dev_t)
    md.append("Peak device memory (caching allocator, per worker) summed per device, against the device's "
              "memory (`colocation.devices`):\n")
    md.append(mem_t)
    md.append("## g. Barrier\n")
    md.append("Start spread = max − min of `barrier.actual_start_unix_ns` across the workers; lateness = actual − "
              "scheduled start; clock offset = worker host − shared-directory clock (recorded, not applied).\n")
    md.append(bar_t)
    md.append(f"Overall maximum start spread: {fmt(max_spread, 1)} µs (`{max_spread_cohort}`).\n")
    md.append("## Summary warnings\n")
    md.append(warnings_table(cohorts, baselines, order))
    md.append("## Plots\n")
    md.append(table(["file", "what"], [[f"[`{n}`]({n})", cap] for n, cap in sorted(written)], "ll"))
    with open(os.path.join(args.out, "tables.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))

    # ---- digest
    print(f"wrote {args.out}/comparison.json, comparison.md, tables.md and {len(written)} SVG plots: "
          + ", ".join(n for n, _ in written))
    print(f"baselines: train {fmt(comparison['baselines']['train']['samples_per_s'], 1)} samples/s "
          f"p99 {fmt(comparison['baselines']['train']['p99_ms'], 3)} ms; infer "
          f"{fmt(comparison['baselines']['infer']['samples_per_s'], 1)} samples/s "
          f"p99 {fmt(comparison['baselines']['infer']['p99_ms'], 3)} ms")
    for shape, ts, mps in SIDE_BY_SIDE:
        if shape not in ("train7", "mixed"):
            continue
        for label, names in (("time-slicing", ts), ("MPS", mps)):
            names = [n for n in names if n in cohorts]
            for n in names:
                cc = cmp_by_exp[cohorts[n].experiment]
                mc, tot = cohorts[n].mps_clients()
                tag = f" [mps clients {mc}/{tot}]" if cohorts[n].mode == "mps" else ""
                if shape == "mixed":
                    inf = cc["groups"]["infer"]["per_worker"][0]
                    print(f"mixed  {label:12s} {n:20s} infer rate vs solo {inf['rate_vs_solo']:.3f}, "
                          f"p99 vs solo {inf['p99_vs_solo']:.2f} ({inf['p99_ms']:.2f} ms); train aggregate vs solo "
                          f"{cc['groups']['train']['aggregate_vs_solo']:.3f}{tag}")
                else:
                    print(f"train7 {label:12s} {n:20s} aggregate vs solo "
                          f"{cc['groups']['train']['aggregate_vs_solo']:.3f}{tag}")
    print(f"max barrier start spread: {fmt(max_spread, 1)} µs ({max_spread_cohort})")
    warn = [n for n in order if cohorts[n].summary.get("warnings")]
    if warn:
        print("summaries with warnings: " + ", ".join(
            f"{n} ({', '.join(sorted({w['kind'] for w in cohorts[n].summary['warnings']}))})" for n in warn))


if __name__ == "__main__":
    main()
