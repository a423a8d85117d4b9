#!/usr/bin/env python3
"""Write docs/results.md from the data in the repository and a template (issue 23).

    scripts/results/results_page.py [--data docs/results/data] [--template T] [--out docs/results.md]
    scripts/results/results_page.py --check      # regenerate and diff against the committed page

Every figure on the page is computed here from `docs/results/data/**` (each study's
`index.json` and `report/comparison.json`, the capacity searches' `capacity.json`, the hog
cohorts' `isolation.json`, the GPM-overhead runs' `overhead.json`, round 1's cohorts and
`docs/results/comparison.json`); the template (`results.md.tmpl` beside this script) holds
the words around them and `{{name}}` placeholders, and is refused when it types a figure
itself. Standard library only (Python 3.11).

The rules are the report's (`coload_analysis::report`): p99 against solo is the group's
pooled p99 over the solo worker's p99; a mean over repeated cohorts carries its 95 % Student-t
interval from `comparison.json`; a capacity is written to the significant figures its search's
bracket resolves; one policy per study name (`mps-plugin`, `mps-unlimited`).
"""

import argparse
import difflib
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Rounds, newest first: (folder, date). The page leads with the newest.
ROUND3 = "2026-12-01-round3"
ROUND2 = "2026-11-30-round2"

POLICIES = ["timeslice", "mps-plugin", "mps-unlimited"]
POLICY_WORDS = {
    "timeslice": "time-slicing",
    "mps-plugin": "MPS, plugin replicas 7",
    "mps-unlimited": "MPS, unlimited",
    "mig": "MIG",
    "exclusive": "exclusive",
}
# The outcomes of a study's index that left a cohort's figures.
DONE = ("complete", "already_complete")


class DataError(Exception):
    """A file of the data is missing or does not read as expected."""


# ---------------------------------------------------------------- reading


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: {e}") from e


class Study:
    """A study folder: its index (policy per experiment) and its comparison."""

    def __init__(self, path):
        self.path = Path(path)
        self.index = read_json(self.path / "index.json")
        cmp_path = self.path / "report" / "comparison.json"
        if not cmp_path.is_file():
            cmp_path = self.path / "comparison.json"
        self.comparison = read_json(cmp_path)
        self.policy = {
            e["experiment"]: e["policy"] for e in self.index["cohorts"] if e.get("experiment")
        }
        self.baseline_experiments = {b["experiment"] for b in self.comparison["baselines"].values()}

    def solo(self, workload):
        b = self.comparison["baselines"].get(workload)
        return (b["samples_per_s"], b["p99_ms"]) if b else None

    def summaries(self):
        """Every complete cohort's summary.json."""
        out = []
        for e in self.index["cohorts"]:
            p = self.path / "cohorts" / e["name"] / "summary.json"
            if e["outcome"] in DONE and p.is_file():
                out.append(read_json(p))
        return out

    def probe_summaries(self):
        """The summary.json of every probe of the study's complete capacity searches."""
        out = []
        for e in self.index["cohorts"]:
            if e["outcome"] in DONE:
                folder = self.path / "cohorts" / e["name"]
                out += [read_json(p) for p in sorted(folder.glob("probe-*/summary.json"))]
        return out

    def cell(self, mix, group, policy):
        """One policy on one shape (`mix` as {"train": 7}), averaged over its repeats: aggregate,
        per-worker rate, pooled p99, ratios against solo, samples per joule and the intervals."""
        found = [
            k
            for k in self.comparison["cohorts"]
            if k["workload_mix"] == mix
            and self.policy.get(k["experiment"]) == policy
            and k["experiment"] not in self.baseline_experiments
            and group in k["groups"]
        ]
        if not found:
            return None
        gs = [k["groups"][group] for k in found]
        mean = lambda v: sum(v) / len(v)  # noqa: E731
        solo = self.solo(group)
        agg = mean([g["aggregate_samples_per_s"] for g in gs])
        rate = mean([mean([w["samples_per_s"] for w in g["per_worker"]]) for g in gs])
        p99 = mean([g["p99_ms"] for g in gs])
        spj = [g.get("samples_per_device_joule") for g in gs]
        cell = {
            "n": len(found),
            "aggregate": agg,
            "rate": rate,
            "p99": p99,
            "aggregate_vs_solo": agg / solo[0] if solo else None,
            "rate_vs_solo": rate / solo[0] if solo else None,
            "p99_vs_solo": p99 / solo[1] if solo else None,
            "samples_per_joule": mean(spj) if all(v is not None for v in spj) else None,
            "aggregate_ci": None,
            "p99_ci": None,
        }
        exps = {k["experiment"] for k in found}
        for r in self.comparison["repeats"]:
            if exps & set(r["experiments"]) and group in r["groups"]:
                s = r["groups"][group]
                cell["aggregate_ci"] = ci(s["aggregate_samples_per_s"])
                cell["p99_ci"] = ci(s["p99_ms"])
        return cell


def ci(e):
    if e.get("n", 0) > 1 and e.get("ci95_low") is not None and e.get("ci95_high") is not None:
        return (e["ci95_low"], e["ci95_high"])
    return None


# ---------------------------------------------------------------- words for figures


def round_half_away(v):
    """As Rust's `f64::round` (the report's): halves away from zero, where Python's `round`
    takes halves to even (1.25 a rate of `1.3` in the report, not `1.2`)."""
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def thousands(v):
    return f"{round_half_away(v):,}"


def num(v):
    """As the report writes a figure: whole numbers from 100, one decimal from 10, two below."""
    a = abs(v)
    if a >= 1000:
        return thousands(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(v):
    return "-" if v is None else (f"{v:.2f}" if abs(v) < 10 else num(v))


def with_ci(v, interval):
    return num(v) if interval is None else f"{num(v)} [{num(interval[0])} to {num(interval[1])}]"


def rate_words(v):
    """A probed request rate: whole numbers without decimals, others to one decimal."""
    r = round_half_away(v * 10) / 10
    return thousands(r) if r == round(r) else f"{r:,.1f}"


def round_sig(v, digits):
    if v == 0 or not math.isfinite(v):
        return v
    scale = 10 ** (digits - 1 - math.floor(math.log10(abs(v))))
    return round(v * scale) / scale


def capacity_words(c):
    """As `CapacityRow::capacity_words`: the bracket to the figures it resolves."""
    lo, hi = c.get("capacity_per_s"), c.get("failed_above_per_s")
    if lo is not None and hi is not None:
        width = abs(hi - lo)
        digits = 3 if width <= 0 or lo <= 0 else max(1, min(6, math.ceil(math.log10(lo / width)) + 1))
        return f"{thousands(round_sig(lo, digits))} to {thousands(round_sig(hi, digits))}"
    if lo is not None:
        return f"at least {rate_words(lo)}"
    if hi is not None:
        return f"below {rate_words(hi)}"
    return "unknown"


def probes_words(c):
    out = []
    for p in c["probes"]:
        p99 = [w["p99_ms"] for w in p.get("serve", []) if w.get("p99_ms") is not None]
        over = any(w.get("overloaded") for w in p.get("serve", []))
        verdict = {True: "pass", False: "fail", None: "cohort failed"}[p.get("passed")]
        lat = f"{num(max(p99))} ms" if p99 else "-"
        out.append(f"{rate_words(p['rate_per_s'])}: {lat} ({verdict}{', overloaded' if over else ''})")
    return "; ".join(out)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def best(cells, key, high=True):
    """The policy whose `key` is best, or None."""
    have = {p: c[key] for p, c in cells.items() if c and c.get(key) is not None}
    if not have:
        return None
    return (max if high else min)(have, key=have.get)


def bold_if(text, yes):
    return f"**{text}**" if yes else text


# ---------------------------------------------------------------- the page's parts


def protocol_words(study):
    """`ResNet18 ... 20 s windows ...`, read from the summaries' configs."""
    return config_words(study.summaries())


def config_words(summaries):
    seen = []
    for s in summaries:
        c = s["config"]
        w = (
            f"{c['model']}, batch {c['batch_size']} of 3x{c['image_size']}x{c['image_size']} "
            f"{c['precision']}, {c['execution']}; {num_plain(c['window_s'])} s windows, "
            f"{c['warmup_batches']} warmup batches, {num_plain(c['start_lead_s'])} s start lead"
        )
        if w not in seen:
            seen.append(w)
    return "; ".join(seen)


def num_plain(v):
    return thousands(v) if v == round(v) else num(v)


def study_dates(study):
    import datetime as dt

    spans = [s["common_interval"] for s in study.summaries() + study.probe_summaries()]
    if not spans:
        return "-"
    start = min(s["start_unix_ns"] for s in spans) / 1e9
    end = max(s["end_unix_ns"] for s in spans) / 1e9
    f = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc)  # noqa: E731
    a, b = f(start), f(end)
    if a.date() == b.date():
        return f"{a:%Y-%m-%d %H:%M} to {b:%H:%M} UTC"
    return f"{a:%Y-%m-%d %H:%M} to {b:%Y-%m-%d %H:%M} UTC"


def day(summaries):
    """The UTC day (or days) of the summaries' common intervals: `2026-12-01`."""
    import datetime as dt

    days = sorted({
        dt.datetime.fromtimestamp(s["common_interval"]["start_unix_ns"] / 1e9, dt.timezone.utc).strftime("%Y-%m-%d")
        for s in summaries
    })
    if not days:
        return "-"
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def capacity_searches(folder):
    """{policy: capacity.json} of a folder of searches named solo, timeslice6, mps-plugin6, ..."""
    out = {}
    for name, policy in [("solo", "exclusive"), ("timeslice6", "timeslice"),
                         ("mps-plugin6", "mps-plugin"), ("mps-unlimited6", "mps-unlimited")]:
        p = folder / name / "capacity.json"
        if p.is_file():
            out[policy] = read_json(p)
    return out


def isolation_results(study):
    """{policy: (isolation.json, outcome words)} of a study's hog cohorts, failed runs too."""
    out = {}
    for e in study.index["cohorts"]:
        if "hog" not in e["workers"]:
            continue
        dirs = [study.path / "cohorts" / e["name"]] + [study.path / d for d in reversed(e["failed_dirs"])]
        for d in dirs:
            p = d / "isolation.json"
            if p.is_file():
                out[e["policy"]] = read_json(p)
                break
    return out


def isolation_words(r):
    gib = 1 << 30
    hog = next((w["hog"] for w in r["workers"] if w.get("hog")), None)
    others = [w for w in r["workers"] if w["workload"] != "hog"]
    oom = sum(1 for w in others if w.get("kind") == "out_of_memory")
    done = sum(1 for w in others if w["status"] == "complete")
    held = f"hog held {hog['granted_bytes'] / gib:.1f} GiB" if hog else "hog held nothing"
    tail = f"{oom} of {len(others)} others out of memory" if oom else f"{done} of {len(others)} others completed"
    word = "contained" if r["outcome"] == "contained" else "not contained"
    return f"{word}: {held}, {tail}"


class Plan:
    """A study's index read for the cells that have no figure: which cohorts the plan holds for
    a policy and shape, and what became of them (not run yet, not offered and why)."""

    def __init__(self, study):
        self.cohorts = study.index["cohorts"]

    def entries(self, policy, workers, tag=""):
        """The plan's cohorts of one policy and shape (`train=7`); `tag` picks the capacity
        searches of one objective by name (`capacity-10ms`)."""
        return [e for e in self.cohorts
                if e["policy"] == policy and e["workers"] == workers and tag in e["name"]]

    def offered(self, policy, workers, tag=""):
        """How many of those cohorts (repeats) the node offered."""
        return sum(1 for e in self.entries(policy, workers, tag) if e["outcome"] != "not_offered")

    def missing(self, policy, workers, tag=""):
        """Words for a cell without a figure, or None where the plan has no such cohort (or one
        that left its figures)."""
        found = self.entries(policy, workers, tag)
        outcomes = {e["outcome"] for e in found}
        if not found or outcomes & set(DONE):
            return None
        if outcomes == {"not_offered"}:
            return f"not offered ({short_reason(found[0]['reason'])})"
        if "not_run" in outcomes:
            return "not run yet"
        return "failed (its `failure.json` says why)"


def short_reason(reason):
    """The first clause of an index's reason: `exclusive with 2 workers needs 2 GPUs, one per worker`."""
    return (reason or "no reason recorded").split("; ")[0]


def shape_table(study, rows, columns, plan=None):
    """Rows: (label, mix, group, what) with what in aggregate|p99; columns: policies. With the
    study's `plan`, a cell without a figure says what the index says of its cohort."""
    out = []
    for label, mix, group, what in rows:
        cells = {p: study.cell(mix, group, p) for p in columns}
        key = "aggregate" if what == "aggregate" else "p99"
        top = best(cells, key, high=(what == "aggregate"))
        line = [label]
        for p in columns:
            c = cells[p]
            if not c:
                line.append((plan.missing(p, workers_words(mix)) if plan else None) or "")
                continue
            if what == "aggregate":
                text = f"{with_ci(c['aggregate'], c['aggregate_ci'])} ({ratio(c['aggregate_vs_solo'])}x)"
            else:
                text = f"{with_ci(c['p99'], c['p99_ci'])} ms ({ratio(c['p99_vs_solo'])}x solo)"
            line.append(bold_if(text, p == top and len([x for x in cells.values() if x]) > 1))
        if any(cells.values()):
            out.append(line)
    return table(["shape"] + [POLICY_WORDS.get(p, p) for p in columns], out)


def workers_words(mix):
    """A mix as the index writes its workers: {"train": 6, "infer": 1} -> `infer=1,train=6`."""
    return ",".join(f"{w}={n}" for w, n in sorted(mix.items()))


ARTICLE_ROWS = [
    ("1 trainer alone, rate", {"train": 1}, "train", "aggregate"),
    ("1 inference worker alone, rate", {"infer": 1}, "infer", "aggregate"),
    ("2 trainers, aggregate", {"train": 2}, "train", "aggregate"),
    ("4 trainers, aggregate", {"train": 4}, "train", "aggregate"),
    ("7 trainers, aggregate", {"train": 7}, "train", "aggregate"),
    ("7 trainers, group p99", {"train": 7}, "train", "p99"),
    ("4 inference workers, aggregate", {"infer": 4}, "infer", "aggregate"),
    ("7 inference workers, aggregate", {"infer": 7}, "infer", "aggregate"),
    ("1 infer + 6 train: inference p99", {"infer": 1, "train": 6}, "infer", "p99"),
    ("1 infer + 6 train: inference rate", {"infer": 1, "train": 6}, "infer", "aggregate"),
    ("1 infer + 6 train: the six trainers", {"infer": 1, "train": 6}, "train", "aggregate"),
]


def capacity_table(searches, missing=None):
    """One row per policy with a search in `searches` ({policy: capacity.json}); `missing(policy)`
    gives the words for a policy without one (None: no row)."""
    rows = []
    for policy in ["exclusive"] + POLICIES:
        c = searches.get(policy)
        beside = "nothing" if policy == "exclusive" else "6 trainers"
        label = f"{POLICY_WORDS[policy]}, beside {beside}"
        if not c:
            words = missing(policy) if missing else None
            if words:
                rows.append([label, words, "", "", ""])
            continue
        bracket = (f"[{rate_words(c['capacity_per_s']) if c.get('capacity_per_s') is not None else '0'}, "
                   f"{rate_words(c['failed_above_per_s']) if c.get('failed_above_per_s') is not None else '∞'})")
        rows.append([label, capacity_words(c), bracket, c["stop"], probes_words(c)])
    return table(["policy", "capacity, requests/s", "bracket [passed, failed)", "stop", "probes (requests/s: p99)"], rows)


def capacity_cohorts(study, objective):
    """{policy: capacity.json} of a study's capacity searches at one objective (`10ms`): the
    cohorts named `<policy>-serve1[-train6]-capacity-<objective>-r<n>` that completed."""
    out = {}
    for e in study.index["cohorts"]:
        p = study.path / "cohorts" / e["name"] / "capacity.json"
        if f"-capacity-{objective}-r" in e["name"] and e["outcome"] in DONE and p.is_file():
            out[e["policy"]] = read_json(p)
    return out


def capacity_missing(plan, objective):
    """`missing` for capacity_table: the plan's words for a policy's search not done."""
    tag = f"capacity-{objective}"
    return lambda policy: plan.missing(policy, "serve=1" if policy == "exclusive" else "serve=1,train=6", tag)


def decision_table(d):
    """The decision: one row per need, one column per policy. `d` says where each need's figures
    come from: `study` (the article's shapes and energy), `cap10` and `cap25` ({policy:
    capacity.json}), `isolation` ({policy: isolation.json}); optionally `plan` (the study's
    Plan: cells without a figure say what its index says, and a mean says how many of its
    planned repeats it has), `columns` (POLICIES unless MIG is offered too) and `source`
    ({need: words}) for a need measured by another round."""
    a, plan, source = d["study"], d.get("plan"), d.get("source", {})
    columns = d.get("columns", POLICIES)
    rows = []

    def missing(p, workers, tag="", default=""):
        return (plan.missing(p, workers, tag) if plan else None) or default

    def repeats(c, p, workers):
        """`; 1 of 3 repeats` while the plan has repeats of the shape still to run."""
        planned = plan.offered(p, workers) if plan else 0
        return f"; {c['n']} of {planned} repeats" if c["n"] < planned else ""

    def row(label, workers, cells, fmt, key, high=True, extra=""):
        top = best(cells, key, high)
        line = [label]
        for p in columns:
            c = cells.get(p)
            line.append(bold_if(fmt(c, p), p == top) if c else missing(p, workers))
        line.append(extra)
        rows.append(line)

    full = {p: a.cell({"train": 7}, "train", p) for p in columns}
    row("7 trainers on one card, total against one solo [95 % CI of the total]", "train=7", full,
        lambda c, p: (f"{ratio(c['aggregate_vs_solo'])}x ({with_ci(c['aggregate'], c['aggregate_ci'])}"
                      f"{repeats(c, p, 'train=7')})"), "aggregate")
    alone = {p: a.cell({"train": 1}, "train", p) for p in columns}
    row("one trainer alone under the policy (card not full), against solo", "train=1", alone,
        lambda c, p: f"{ratio(c['rate_vs_solo'])}x", "rate_vs_solo")
    two = {p: a.cell({"train": 2}, "train", p) for p in columns}
    cards = a.cell({"train": 2}, "train", "exclusive")
    not_two = missing("exclusive", "train=2")
    row("two trainers, total against one solo", "train=2", two, lambda c, p: f"{ratio(c['aggregate_vs_solo'])}x",
        "aggregate", extra=f"{ratio(cards['aggregate_vs_solo'])}x on two cards" if cards
        else (f"on two cards: {not_two}" if not_two else ""))
    solo_infer = a.solo("infer")
    tail = {p: a.cell({"infer": 1, "train": 6}, "infer", p) for p in columns}
    row(f"inference p99 beside 6 trainers (solo {num(solo_infer[1])} ms) [95 % CI]", "infer=1,train=6", tail,
        lambda c, p: (f"{with_ci(c['p99'], c['p99_ci'])} ms ({ratio(c['p99_vs_solo'])}x"
                      f"{repeats(c, p, 'infer=1,train=6')})"), "p99", high=False)
    for label, searches, tag in [(f"p99 <= 10 ms{source.get('cap10', '')}", d["cap10"], "capacity-10ms"),
                                 (f"p99 <= 25 ms{source.get('cap25', '')}", d["cap25"], "capacity-25ms")]:
        cells = {p: searches.get(p) for p in columns}
        key = lambda c: (c.get("capacity_per_s") or 0)  # noqa: E731
        top = max((p for p in columns if cells.get(p)), key=lambda p: key(cells[p]), default=None)
        line = [f"requests/s at {label} beside 6 trainers"]
        for p in columns:
            c = cells.get(p)
            line.append(bold_if(capacity_words(c), p == top and key(c) > 0) if c
                        else missing(p, "serve=1,train=6", tag))
        solo = searches.get("exclusive")
        not_solo = missing("exclusive", "serve=1", tag)
        line.append(f"alone: {capacity_words(solo)}" if solo else (f"alone: {not_solo}" if not_solo else ""))
        rows.append(line)
    line = [f"a memory hog beside 6 trainers{source.get('isolation', '')}"]
    for p in columns:
        r = d["isolation"].get(p)
        line.append(bold_if(isolation_words(r), r["outcome"] == "contained") if r
                    else missing(p, "hog=1,train=6", default="not run"))
    line.append("")
    rows.append(line)
    row("training samples per device joule, 7 trainers", "train=7", full,
        lambda c, p: num(c["samples_per_joule"]) if c["samples_per_joule"] is not None else "-", "samples_per_joule",
        extra=f"one alone: {num(a.cell_solo_spj('train'))}" if a.cell_solo_spj("train") else "")
    return table(["need"] + [POLICY_WORDS[p] for p in columns] + ["exclusive"], rows)


def isolation_line(iso, plan=None):
    """The hog cohorts per policy in one line; with the study's plan, a sharing policy's without
    an `isolation.json` says what the index says of it (MIG is named where it was measured)."""
    out = []
    for p in POLICIES + ["mig"]:
        words = (isolation_words(iso[p]) if p in iso
                 else plan.missing(p, "hog=1,train=6") if plan and p in POLICIES else None)
        if words:
            out.append(f"{POLICY_WORDS[p]}: {words}")
    return "; ".join(out) or "not run"


def decision_columns(plan):
    """The policies of the decision table: MIG too where the node offered any MIG cohort."""
    offered = any(e["policy"] == "mig" and e["outcome"] != "not_offered" for e in plan.cohorts)
    return POLICIES + (["mig"] if offered else [])


def decision_mig(study):
    """MIG, named when the study did not measure it: the index's reason."""
    mig = [e for e in study.index["cohorts"] if e["policy"] == "mig"]
    if not mig:
        return "MIG is not in the plan of this study"
    left = [e for e in mig if e["outcome"] == "not_offered"]
    if len(left) < len(mig):
        return f"MIG: {len(mig) - len(left)} of the plan's {len(mig)} MIG cohorts offered on this node (the MIG column)"
    why = "; ".join(sorted({(e["reason"] or "no reason recorded").split("; ", 1)[-1] for e in left}))
    return f"MIG is not measured: the node offered none of the plan's {len(mig)} MIG cohorts; the index's reason: {why}"


def repeats_words(study):
    """Per shape the plan repeats: how many repeats have left figures, per policy."""
    shapes = {}
    for e in study.index["cohorts"]:
        if e["outcome"] == "not_offered":
            continue
        stem = re.sub(rf"^{re.escape(e['policy'])}-|-r\d+$", "", e["name"])
        shapes.setdefault((stem, e["workers"]), {}).setdefault(e["policy"], []).append(e)
    out = []
    for (_, workers), per in shapes.items():
        planned = max(len(v) for v in per.values())
        if planned < 2:
            continue
        done = {p: sum(1 for e in v if e["outcome"] in DONE) for p, v in per.items()}
        if len(set(done.values())) == 1:
            out.append(f"`{workers}`, {next(iter(done.values()))} of {planned} under each policy")
        else:
            out.append(f"`{workers}`, " + ", ".join(f"{POLICY_WORDS.get(p, p)} {n}" for p, n in done.items())
                       + f" of {planned}")
    return "; ".join(out) or "none"


def solo_words(study):
    """The exclusive solo references: `train 3,726 samples/s (p99 9.98 ms), infer ...`."""
    out = []
    for w in ["train", "infer"]:
        s = study.solo(w)
        if s:
            out.append(f"{w} {num(s[0])} samples/s (p99 {num(s[1])} ms)")
    return ", ".join(out) or "none"


def decision_protocol(study):
    """The study's protocol as its summaries record it, the capacity probes' apart (their
    window only where their workload words are the cohorts')."""
    words = protocol_words(study)
    probes = config_words(study.probe_summaries())
    if not probes:
        return words
    if probes.split("; ")[0] == words.split("; ")[0]:
        probes = probes.split("; ", 1)[1]
    return f"{words}; capacity probes: {probes}"


def solo_spj(self, workload):
    b = self.comparison["baselines"].get(workload)
    if not b:
        return None
    for k in self.comparison["cohorts"]:
        if k["experiment"] == b["experiment"]:
            return k["groups"].get(workload, {}).get("samples_per_device_joule")
    return None


Study.cell_solo_spj = solo_spj


def models_table(folder):
    rows = []
    for name in sorted(p.name for p in folder.iterdir() if (p / "index.json").is_file()):
        s = Study(folder / name)
        solo = s.solo("train")
        execution = next(iter(s.summaries()), {}).get("config", {}).get("execution", "")
        line = [f"{name} ({execution})", num(solo[0]) if solo else "-"]
        cells = {p: s.cell({"train": 7}, "train", p) for p in POLICIES}
        if not any(cells.values()):
            continue
        top = best(cells, "aggregate")
        for p in POLICIES:
            c = cells[p]
            line.append(bold_if(f"{num(c['aggregate'])} ({ratio(c['aggregate_vs_solo'])}x)", p == top) if c else "")
        rows.append(line)
    return table(["study (execution)", "its solo trainer"] + [f"7 trainers, {POLICY_WORDS[p]}" for p in POLICIES], rows)


def round1_table(comparison):
    """Round 1's comparison (docs/results/comparison.json): each cohort's groups."""
    rows = []
    base = {b["experiment"] for b in comparison["baselines"].values()}
    solo = {w: (b["samples_per_s"], b["p99_ms"]) for w, b in comparison["baselines"].items()}
    for k in comparison["cohorts"]:
        if k["experiment"] in base:
            continue
        mix = " + ".join(f"{n} {w}" for w, n in sorted(k["workload_mix"].items(), key=lambda x: x[1]))
        for w, g in k["groups"].items():
            per = sum(p["samples_per_s"] for p in g["per_worker"]) / len(g["per_worker"])
            rows.append([
                f"{mix}: {w}", k["mode"], k["experiment"],
                ratio(per / solo[w][0]) if w in solo else "-",
                ratio(g["aggregate_samples_per_s"] / solo[w][0]) if w in solo else "-",
                f"{num(g['p99_ms'])} ({ratio(g['p99_ms'] / solo[w][1])}x)" if w in solo else num(g["p99_ms"]),
            ])
    return table(["shape: group", "mode", "experiment", "per-worker rate ÷ solo", "aggregate ÷ solo", "group p99 ms (÷ solo)"], rows)


def gpm_overhead(path):
    d = read_json(path)
    on = [r["samples_per_s"] for r in d["runs"] if r["setting"] == "gpm-on"]
    off = [r["samples_per_s"] for r in d["runs"] if r["setting"] == "gpm-off"]
    if not on or not off:
        return "-"
    m_on, m_off = sum(on) / len(on), sum(off) / len(off)
    return (f"GPM on {num(m_on)} against off {num(m_off)} samples/s over {len(on)} and {len(off)} "
            f"runs of {num_plain(d['window_s'])} s ({(m_on / m_off - 1) * 100:+.1f} %)")


def mig_words(data):
    """What the workers' records say about MIG on the lent hosts."""
    modes = set()
    for p in sorted(data.glob("*/worker-*.json")):
        dev = read_json(p).get("device") or {}
        modes.add(dev.get("mig_mode"))
    if modes == {False}:
        return "MIG mode was disabled on every lent H200 (each worker.json records `device.mig_mode: false`)"
    return "MIG mode as recorded: " + ", ".join(sorted(str(m) for m in modes))


def hardware_words(data, pattern="*/worker-0.json"):
    """The GPUs and software the workers' records name: round 1's `worker-0.json` files by
    default, or those `pattern` finds under `data`."""
    seen = []
    for p in sorted(data.glob(pattern)):
        dev = read_json(p).get("device") or {}
        w = (f"{dev.get('gpu_name')}, driver {dev.get('driver_version')}, CUDA {dev.get('cuda_version')}, "
             f"libtorch {dev.get('libtorch_version')}, cuDNN {dev.get('cudnn_version')}")
        if w not in seen:
            seen.append(w)
    return "; ".join(seen) or "-"


# ---------------------------------------------------------------- the LLM round (issue 24)

LLM = "2026-12-01-llm"
LLM_PRESETS = ["gpt2-small", "tinyllama-1.1b"]
LLM_BATCHES = [1, 8, 32]


def decode_of(folder):
    """(summary, its one decode worker's `decode` block) of a decode cohort folder, or None."""
    path = folder / "summary.json"
    if not path.is_file():
        return None
    s = read_json(path)
    decode = [w["decode"] for w in s["workers"] if w.get("decode")]
    return (s, decode[0]) if decode else None


def llm_solo_table(root):
    rows = []
    for model in LLM_PRESETS:
        for b in LLM_BATCHES:
            eager = decode_of(root / "solo" / f"{model}-b{b}-eager")
            graph = decode_of(root / "solo" / f"{model}-b{b}-cuda-graph")
            if not eager or not graph:
                continue
            e, g = eager[1], graph[1]
            rows.append([
                model, str(b),
                num(e["tokens_per_s"]), num(g["tokens_per_s"]),
                ratio(g["tokens_per_s"] / e["tokens_per_s"]),
                f"{num(e['tpot_ms']['p50'])} / {num(e['tpot_ms']['p99'])}",
                f"{num(g['tpot_ms']['p50'])} / {num(g['tpot_ms']['p99'])}",
                num(g["prefill_ms"]["p50"]),
            ])
    return table(["preset", "batch", "tokens/s eager", "tokens/s CUDA graph", "graph ÷ eager",
                  "TPOT p50 / p99 ms, eager", "TPOT p50 / p99 ms, graph", "prefill p50 ms"], rows)


def llm_share_rows(root):
    """(model, execution, exclusive decode, shared decode) for B = 8."""
    out = []
    for model in LLM_PRESETS:
        for execution in ["cuda-graph", "eager"]:
            alone = decode_of(root / "solo" / f"{model}-b8-{execution}")
            shared = decode_of(root / "mps" / f"{model}-b8-{execution}")
            if alone and shared:
                out.append((model, execution, alone[1], shared[1]))
    return out


def llm_share_table(root):
    rows = []
    for model, execution, a, s in llm_share_rows(root):
        rows.append([
            model, execution,
            f"{num(a['tpot_ms']['p50'])} → {num(s['tpot_ms']['p50'])}",
            ratio(s["tpot_ms"]["p50"] / a["tpot_ms"]["p50"]),
            f"{num(a['prefill_ms']['p50'])} → {num(s['prefill_ms']['p50'])}",
            ratio(s["prefill_ms"]["p50"] / a["prefill_ms"]["p50"]),
        ])
    return table(["preset", "execution", "TPOT p50 ms, alone → MPS share", "TPOT × alone",
                  "prefill p50 ms, alone → MPS share", "prefill × alone"], rows)


def llm_share_verdict(root):
    """MuxServe's claim against the graph-captured runs: decode's slowdown against prefill's."""
    graph = [(m, a, s) for m, x, a, s in llm_share_rows(root) if x == "cuda-graph"]
    if not graph:
        return "not measured"
    parts = []
    for m, a, s in graph:
        d = s["tpot_ms"]["p50"] / a["tpot_ms"]["p50"]
        p = s["prefill_ms"]["p50"] / a["prefill_ms"]["p50"]
        parts.append(f"{m}: a decode step {ratio(d)}x as long, a prefill {ratio(p)}x")
    return "; ".join(parts)


def llm_pytorch_pairs(root):
    """[(model, batch, coload eager decode summary, PyTorch reference, its folder)] for every
    preset and batch with both: the reference from the newest `*-llm-pytorch` folder of the data
    that has it (a rerun), else from the decode round's own `pytorch/`."""
    reruns = sorted(root.parent.glob("*-llm-pytorch"), reverse=True)
    out = []
    for model in LLM_PRESETS:
        for b in LLM_BATCHES:
            ours = decode_of(root / "solo" / f"{model}-b{b}-eager")
            for folder in reruns + [root]:
                path = folder / "pytorch" / f"{model}-b{b}.json"
                if path.is_file() and path.stat().st_size > 0:
                    break
            else:
                continue
            if ours:
                out.append((model, b, ours[1], read_json(path), folder))
    return out


def warmed_a_cycle(ref):
    warm = ref.get("warmup_iterations")
    return warm is not None and warm >= ref["output_tokens"]


def llm_pytorch_table(root):
    rows = []
    for model, b, c, ref, _ in llm_pytorch_pairs(root):
        rows.append([
            model, str(b),
            num(c["tokens_per_s"]), num(ref["tokens_per_s"]),
            f"{ratio(c['tokens_per_s'] / ref['tokens_per_s'])}x",
            f"{num(c['tpot_ms']['p50'])} / {num(c['tpot_ms']['p99'])}",
            f"{num(ref['tpot_p50_ms'])} / {num(ref['tpot_p99_ms'])}",
            "yes" if warmed_a_cycle(ref) else "no (its first cycle is in the window)",
        ])
    return table(["preset", "batch", "coload eager tokens/s", "PyTorch eager tokens/s", "coload ÷ PyTorch",
                  "coload TPOT p50 / p99 ms", "PyTorch TPOT p50 / p99 ms",
                  "PyTorch warmed a whole cycle"], rows)


def llm_pytorch_words(root):
    """What the side-by-side says, from its rows: where the references come from, whether they
    warmed a whole cycle, and the range of coload's tokens/s against PyTorch's."""
    pairs = llm_pytorch_pairs(root)
    if not pairs:
        return "No PyTorch reference run is in the data yet."
    folders = sorted({f"`docs/results/data/{f.name}/pytorch/`" for *_, f in pairs})
    presets = sorted({m for m, *_ in pairs})
    missing = [m for m in LLM_PRESETS if m not in presets]
    cold = [(m, b) for m, b, _, ref, _ in pairs if not warmed_a_cycle(ref)]
    ratios = [c["tokens_per_s"] / ref["tokens_per_s"] for _, _, c, ref, _ in pairs]
    text = f"The references: {', '.join(folders)}. "
    if cold:
        text += (f"Not yet a fair comparison of throughput: {len(cold)} of {len(pairs)} PyTorch runs warmed "
                 "fewer iterations than one cycle, so their window holds the first steps at each new KV "
                 "length, and their p99 is far above their p50; their tokens/s include those steps, and the "
                 "p50 columns compare like with like. `scripts/gpu/pytorch-decode.sh` runs them again with "
                 "two whole cycles of warmup (the script's default).")
    else:
        text += (f"Every PyTorch run warmed at least a whole cycle before its window: coload's eager "
                 f"worker makes {ratio(min(ratios))}x to {ratio(max(ratios))}x "
                 f"PyTorch eager's tokens/s ({'no slower at any batch' if min(ratios) >= 1 else 'slower at some batch'}).")
    if missing:
        text += f" Not run yet: {', '.join(missing)}."
    return text


def llm_protocol(root):
    any_summary = next(iter(sorted((root / "solo").glob("*/summary.json"))), None)
    if any_summary is None:
        return "-"
    c = read_json(any_summary)["config"]
    llm = c["llm"]
    return (f"prompt {llm['prompt_tokens']} tokens, {llm['output_tokens']} generated per cycle, "
            f"{llm['precision']}, {num_plain(c['warmup_batches'])} warmup iterations, "
            f"{num_plain(c['window_s'])} s windows, one cohort per configuration")


def llm_day(root):
    return day([read_json(p) for p in sorted(root.glob("*/*/summary.json"))])


# ---------------------------------------------------------------- the `llm` study (issue 24)
#
# The built-in plan `crates/study/plans/llm.toml`, run on the H200 in slices of a device call.
# The section reads the newest study folder of that plan under the data (found by its index,
# so no folder name is typed here); until there is one, it says so and how to run it.

LLM_STUDY_PLAN = "llm"
LLM_STUDY_RUN = "scripts/gpu/resume.sh llm docs/results/data/<date>-llm-study/llm 540"
DONE = ("complete", "already_complete")
FAILED = ("failed", "failed_earlier")
WORKER_WORDS = {"train": "trainer", "infer": "inference worker", "serve": "serve worker",
                "decode": "decode worker", "serve-llm": "LLM endpoint", "hog": "hog"}
GIB = 1 << 30
MIB = 1 << 20


def find_llm_study(data):
    """The newest study folder of the `llm` plan under `data` (`<round>/<study>/index.json`,
    newest by the round's folder name, which starts with its date), or None."""
    found = [p.parent for p in sorted(data.glob("*/*/index.json"))
             if read_json(p).get("plan") == LLM_STUDY_PLAN]
    return found[-1] if found else None


def workers_mix(workers):
    """`serve-llm=1,train=6` as {"serve-llm": 1, "train": 6}."""
    return {w.strip(): int(n) for w, n in (part.split("=") for part in workers.split(","))}


def beside_words(mix):
    """The workers beside the LLM endpoint: `nothing`, `6 trainers`."""
    parts = [f"{n} {WORKER_WORDS.get(w, w)}{'s' if n > 1 else ''}" for w, n in mix.items() if w != "serve-llm"]
    return " and ".join(parts) or "nothing"


def quantile_words(q):
    """0.99 as `p99`, 0.999 as `p99.9`."""
    return f"p{q * 100:.10g}"


def gib(v):
    return f"{v / GIB:.1f} GiB"


def first_line(text):
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else "no reason recorded"


class LlmStudy:
    """A study folder of the `llm` plan: its index, its plan and what each cohort left."""

    def __init__(self, path, data):
        import tomllib

        self.path = path
        self.where = f"docs/results/data/{path.relative_to(data).as_posix()}"
        self.index = read_json(path / "index.json")
        try:
            self.plan = tomllib.loads((path / "plan.toml").read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise DataError(f"{path / 'plan.toml'}: {e}") from e
        self.entries = self.index["cohorts"]

    def plan_cohort(self, e):
        """The plan's `[[cohort]]` an index entry comes from: by the cohort's name where the plan
        names it (the entry is `<policy>-<name>-r<k>`), else by its workers."""
        cohorts = self.plan.get("cohort", [])
        for c in cohorts:
            if c.get("name") and e["name"].startswith(f"{e['policy']}-{c['name']}-r"):
                return c
        for c in cohorts:
            policies = c.get("policies", [e["policy"]])
            if not c.get("name") and c["workers"] == e["workers"] and e["policy"] in policies:
                return c
        return {}

    def kind(self, e):
        """`decode`, `capacity` (a serve-llm capacity search), `serve` (serve-llm at a fixed rate)."""
        mix = workers_mix(e["workers"])
        if "serve-llm" in mix:
            return "capacity" if self.plan_cohort(e).get("flags", {}).get("find_capacity") else "serve"
        return "decode" if set(mix) == {"decode"} else None

    def of_kind(self, kind):
        """The entries of one kind that the node offered (the status line names the others)."""
        return [e for e in self.entries if e["outcome"] != "not_offered" and self.kind(e) == kind]

    def summary(self, e):
        p = self.path / "cohorts" / e["name"] / "summary.json"
        return read_json(p) if e["outcome"] in DONE and p.is_file() else None

    def capacity(self, e):
        """(capacity.json, its folder) of a search, from its folder or its newest failed one."""
        for d in [self.path / "cohorts" / e["name"]] + [self.path / f for f in reversed(e["failed_dirs"])]:
            if (d / "capacity.json").is_file():
                return read_json(d / "capacity.json"), d
        return None, None

    def failure(self, e):
        """(folder, failure.json) of a failed cohort's newest failed folder that has one."""
        for f in reversed(e["failed_dirs"]):
            if (self.path / f / "failure.json").is_file():
                return self.path / f, read_json(self.path / f / "failure.json")
        return None, None

    def summaries(self):
        """Every summary the study left, capacity probes included."""
        return [read_json(p) for p in sorted(self.path.glob("cohorts/*/summary.json"))
                + sorted(self.path.glob("cohorts/*/probe-*/summary.json"))]


def worker_files(folder):
    """Every `worker-<i>/worker.json` of a cohort folder, by replica."""
    out = {}
    for p in folder.glob("worker-*/worker.json"):
        w = read_json(p)
        out[w["replica"]] = w
    return dict(sorted(out.items()))


def entry_state(study, e):
    """A cohort without figures, in words: `not run yet`, `not offered (...)`, `failed: ...`."""
    o = e["outcome"]
    if o == "not_offered":
        return f"not offered ({first_line(e.get('reason'))})"
    if o in FAILED:
        folder, f = study.failure(e)
        if f is None:
            return f"failed: {first_line(e.get('reason'))}"
        w = worker_files(folder).get(f.get("replica")) or {}
        stage = (w.get("failure") or {}).get("stage")
        words = f"failed: {f['kind']}" + (f" in {stage}" if stage else "")
        if f.get("replica") is not None:
            words += f", replica {f['replica']}" + (f" ({w['config']['workload']})" if w else "")
        return words
    if o in DONE:
        return "complete"
    return o.replace("_", " ") + (" yet" if o == "not_run" else "")


def llm_study_status(study):
    """Where the study ran and how far it has come, from its index."""
    offered = [e for e in study.entries if e["outcome"] != "not_offered"]
    done = [e for e in offered if e["outcome"] in DONE]
    failed = [e for e in offered if e["outcome"] in FAILED]
    rest = [e for e in offered if e not in done and e not in failed]
    report = ""
    if (study.path / "report" / "report.html").is_file():
        report = f", its report `{study.where}/report/report.html`"
    when = day(study.summaries())
    words = (f"`bench-cohort study {LLM_STUDY_PLAN}` {'has begun' if when == '-' else 'ran ' + when} "
             f"(folder `{study.where}/`{report}; "
             f"node: {study.index['node']}): {len(done)} of {len(offered)} offered cohorts complete")
    if failed:
        words += f", {len(failed)} failed ({', '.join(e['name'] for e in failed)})"
    if rest:
        words += (f", {len(rest)} not run yet ({', '.join(e['name'] for e in rest)}; "
                  f"`scripts/gpu/resume.sh {LLM_STUDY_PLAN} {study.where} 540` runs them)")
    absent = {e["policy"]: first_line(e.get("reason")) for e in study.entries if e["outcome"] == "not_offered"}
    if absent:
        words += "; not offered on this node: " + ", ".join(
            f"{POLICY_WORDS.get(p, p)} ({r})" for p, r in absent.items())
    return words + "."


# Decode: aggregate tokens/s and the slowest worker's TPOT p99 per shape and policy.


def decode_cell(study, entries):
    """The decode figures of one shape under one policy, over its repeats: mean aggregate
    tokens/s, mean of the slowest worker's TPOT p99, or the state of the first entry without
    figures."""
    aggs, tpots = [], []
    for e in entries:
        s = study.summary(e)
        if s is None:
            return {"state": entry_state(study, e)}
        decode = [w["decode"] for w in s["workers"] if w.get("decode")]
        aggs.append(sum(d["tokens_per_s"] for d in decode))
        p99 = [d["tpot_ms"]["p99"] for d in decode if d.get("tpot_ms")]
        tpots.append(max(p99) if p99 else None)
    return {"n": len(aggs), "aggregate": sum(aggs) / len(aggs),
            "tpot_p99": None if None in tpots else sum(tpots) / len(tpots)}


def decode_solo(study):
    """(tokens/s, TPOT p50, TPOT p99, summary) of the exclusive one-worker baseline, or None."""
    for e in study.of_kind("decode"):
        s = study.summary(e) if e["baseline"] else None
        if s:
            d = next(w["decode"] for w in s["workers"] if w.get("decode"))
            return d["tokens_per_s"], d["tpot_ms"]["p50"], d["tpot_ms"]["p99"], s
    return None


def decode_cells(study):
    """{(workers, policy): cell} of the shared decode cohorts."""
    shapes = {}
    for e in study.of_kind("decode"):
        if not e["baseline"]:
            shapes.setdefault((workers_mix(e["workers"])["decode"], e["policy"]), []).append(e)
    return {k: decode_cell(study, v) for k, v in sorted(shapes.items())}


def llm_decode_table(study, solo, cells):
    counts = sorted({n for n, _ in cells})
    policies = [p for p in POLICIES if any(k[1] == p for k in cells)]
    rows = []
    for n in counts:
        by_policy = {p: cells.get((n, p)) for p in policies}
        have = {p: c for p, c in by_policy.items() if c and "aggregate" in c}
        label = f"{n} decode worker{'s' if n > 1 else ''}"
        for what, key, high in [("tokens/s in total", "aggregate", True),
                                ("TPOT p99, slowest worker", "tpot_p99", False)]:
            top = best(have, key, high) if len(have) > 1 else None
            line = [f"{label}: {what}"]
            for p in policies:
                c = by_policy[p]
                if c is None:
                    line.append("")
                elif "state" in c:
                    line.append(c["state"])
                elif key == "aggregate":
                    line.append(bold_if(f"{num(c['aggregate'])} ({ratio(c['aggregate'] / solo[0])}x)", p == top))
                elif c["tpot_p99"] is None:
                    line.append("-")
                else:
                    text = f"{num(c['tpot_p99'])} ms ({ratio(c['tpot_p99'] / solo[2])}x solo)"
                    line.append(bold_if(text, p == top))
            rows.append(line)
    return table(["decode shape"] + [POLICY_WORDS[p] for p in policies], rows)


def decode_protocol(s):
    c = s["config"]
    llm = c["llm"]
    return (f"`{llm['model']}`, batch {llm['batch_size']}, prompt {llm['prompt_tokens']} tokens and "
            f"{llm['output_tokens']} generated per cycle, {llm['precision']}, {c['execution']}; "
            f"{num_plain(c['window_s'])} s windows, {num_plain(c['warmup_batches'])} warmup iterations")


def decode_verdict(solo, cells):
    """At the most decode workers measured: which policy gives the most tokens/s and which the
    lowest TPOT p99."""
    counts = sorted({n for n, _ in cells})
    if not counts:
        return None
    n = counts[-1]
    have = {p: cells[(n, p)] for p in POLICIES if (n, p) in cells and "aggregate" in cells[(n, p)]}
    if not have:
        return None
    most = best(have, "aggregate")
    missing = [p for p in POLICIES if (n, p) in cells and p not in have]
    words = (f"{n} decode workers on one card make the most tokens under {POLICY_WORDS[most]}"
             f"{' (of the policies measured so far)' if missing else ''}: "
             f"{num(have[most]['aggregate'])} tokens/s, {ratio(have[most]['aggregate'] / solo[0])}x one worker alone")
    fast = best(have, "tpot_p99", high=False)
    if fast:
        words += (f"; the lowest TPOT p99 of the slowest worker is under {POLICY_WORDS[fast]}: "
                  f"{num(have[fast]['tpot_p99'])} ms, {ratio(have[fast]['tpot_p99'] / solo[2])}x alone")
    return words + "."


def decode_one_verdict(solo, cells):
    """One decode worker under each policy against alone: what a policy costs a lone decoder
    (under an MPS share, MuxServe's claim)."""
    one = {p: cells[(1, p)] for p in POLICIES if "aggregate" in cells.get((1, p), {})}
    if not one:
        return None
    parts = [f"{POLICY_WORDS[p]}: {ratio(c['aggregate'] / solo[0])}x tokens/s"
             + (f", {ratio(c['tpot_p99'] / solo[2])}x TPOT p99" if c["tpot_p99"] is not None else "")
             for p, c in one.items()]
    return "one worker under a policy, against alone: " + "; ".join(parts) + "."


# The endpoint's capacity at its TTFT and TPOT objectives, alone and beside trainers.


def llm_objective(c):
    """`TTFT p99 <= 500 ms and TPOT p99 <= 50 ms` from a search's capacity.json."""
    q = quantile_words(c["quantile"])
    return f"TTFT {q} <= {num_plain(c['ttft_slo_ms'])} ms and TPOT {q} <= {num_plain(c['tpot_slo_ms'])} ms"


def llm_probe_words(c, folder):
    """Each probe: `20: TTFT 35.2 / TPOT 12.1 ms, 198 requests (pass)`, the slowest endpoint's
    latencies at the objective's quantile."""
    out = []
    for p in c["probes"]:
        llm = p.get("serve_llm", [])
        ttft = [w["ttft_ms"] for w in llm]
        tpot = [w["tpot_ms"] for w in llm]
        lat = lambda v: "-" if not v or None in v else num(max(v))  # noqa: E731
        missed = [what for what, bad in [
            ("TTFT", any(not w["ttft_met"] for w in llm)),
            ("TPOT", any(not w["tpot_met"] for w in llm)),
            ("overloaded", any(w["overloaded"] for w in llm)),
            ("too few requests for the quantile", any(not w.get("early_stopping_pass", True) for w in llm)),
        ] if bad]
        verdict = {True: "pass", False: "fail" + (f": {', '.join(missed)}" if missed else ""),
                   None: "cohort failed"}[p.get("passed")]
        n = probe_requests(folder, p)
        n = "" if n is None else f", {n} requests"
        out.append(f"{rate_words(p['rate_per_s'])}: TTFT {lat(ttft)} / TPOT {lat(tpot)} ms{n} ({verdict})")
    return "; ".join(out)


def probe_requests(folder, p):
    """The fewest requests a serve-llm worker of a probe was offered, from the probe's summary
    (the search keeps each probe's folder inside its own), or None."""
    s = folder / Path(p["dir"]).name / "summary.json"
    reqs = [w["serve_llm"]["requests"] for w in read_json(s)["workers"] if w.get("serve_llm")] if s.is_file() else []
    return min(reqs) if reqs else None


def few_requests_words(found):
    """A note where a probe had too few requests for its quantile to be more than their maximum
    (nearest rank: below 1 / (1 - q) requests, the quantile is the slowest one)."""
    for _, c, folder in found:
        for p in (c or {}).get("probes", []):
            n = probe_requests(folder, p)
            if n is not None and n * (1 - c["quantile"]) < 1:
                return (f"; a probe of fewer than {round(1 / (1 - c['quantile'])):,} requests has its "
                        f"{quantile_words(c['quantile'])} at its slowest request")
    return ""


def llm_capacities(study):
    """[(entry, capacity.json or None, its folder)] of the study's searches, exclusive first."""
    order = ["exclusive"] + POLICIES
    found = []
    for e in study.of_kind("capacity"):
        c, folder = study.capacity(e)
        found.append((e, c, folder))
    rank = lambda e: order.index(e["policy"]) if e["policy"] in order else len(order)  # noqa: E731
    return sorted(found, key=lambda x: (rank(x[0]), x[0]["name"]))


def serve_llm_execution(study, e):
    """How the plan runs an entry's serve-llm endpoint: `cuda-graph` or `eager`, from its
    `execution` flag (one for every workload, or per workload as `serve-llm=cuda-graph,...`)."""
    flags = {**study.plan.get("flags", {}), **study.plan_cohort(e).get("flags", {})}
    value = str(flags.get("execution", "eager"))
    if "=" in value:
        per = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        value = per.get("serve-llm", "eager")
    return value


NUMBER_WORDS = {2: "two", 3: "three", 4: "four"}


def search_count_words(found):
    """`one capacity search per policy`, or how many a policy had when one had several."""
    per = {}
    for e, _, _ in found:
        per[e["policy"]] = per.get(e["policy"], 0) + 1
    if all(n == 1 for n in per.values()):
        return "one capacity search per policy"
    several = [f"{NUMBER_WORDS.get(n, n)} for {POLICY_WORDS.get(p, p)}" for p, n in per.items() if n > 1]
    return f"a capacity search per policy ({'; '.join(several)}: the rows name how they differ)"


def llm_capacity_table(study, found, alone):
    rows = []
    # Searches of one policy and mix that differ in execution (the endpoint alone, eager and
    # graph-captured) name it, or their rows would read the same.
    # Searches of one policy, mix and execution that differ in their probes (a second search
    # below the first's floor, with longer windows) name the probes' window.
    seen, same = {}, {}
    for e, _, _ in found:
        seen.setdefault((e["policy"], e["workers"]), set()).add(serve_llm_execution(study, e))
        key = (e["policy"], e["workers"], serve_llm_execution(study, e))
        same[key] = same.get(key, 0) + 1
    for e, c, folder in found:
        mix = workers_mix(e["workers"])
        policy = POLICY_WORDS.get(e["policy"], e["policy"])
        if len(seen[(e["policy"], e["workers"])]) > 1:
            policy += f" ({serve_llm_execution(study, e)})"
        if same[(e["policy"], e["workers"], serve_llm_execution(study, e))] > 1:
            policy += f" ({search_window_s(study, e):g} s probes)"
        if c is None:
            rows.append([policy, beside_words(mix), entry_state(study, e), "", "", "", ""])
            continue
        x_alone = "-"
        base = (alone or {}).get("capacity_per_s")
        if e["policy"] != "exclusive" and c.get("capacity_per_s") and base:
            x_alone = f"{ratio(c['capacity_per_s'] / base)}x"
        lo, hi = c.get("capacity_per_s"), c.get("failed_above_per_s")
        bracket = f"[{'0' if lo is None else rate_words(lo)}, {'∞' if hi is None else rate_words(hi)})"
        rows.append([policy, beside_words(mix), capacity_words(c), x_alone,
                     bracket, c["stop"], llm_probe_words(c, folder)])
    return table(["policy", "beside the endpoint", "capacity, requests/s", "x alone", "bracket [passed, failed)",
                  "stop", "probes (requests/s: the endpoint's TTFT / TPOT at the quantile)"], rows)


def search_window_s(study, e):
    """The window of a capacity search's probes, seconds, as the plan sets it."""
    flags = {**study.plan.get("flags", {}), **study.plan_cohort(e).get("flags", {})}
    return float(flags.get("window_s", 0))


def best_searches(pairs):
    """One (entry, capacity.json) per policy and mix, as the study report's verdict picks it: the
    search with the highest rate that passed; when none passed, the lowest rate that failed (a
    second search below the first's floor knows more). Brackets are not merged."""
    best = {}
    for e, c in pairs:
        key = (e["policy"], e["workers"])
        if key not in best:
            best[key] = (e, c)
            continue
        b = best[key][1]
        lo, blo = c.get("capacity_per_s"), b.get("capacity_per_s")
        hi, bhi = c.get("failed_above_per_s") or math.inf, b.get("failed_above_per_s") or math.inf
        if (lo is not None and (blo is None or lo > blo)) or (lo is None and blo is None and hi < bhi):
            best[key] = (e, c)
    return list(best.values())


def llm_capacity_verdict(found, alone):
    """Beside other workers: which policy sustains the highest rate, and each policy's rate as
    a fraction of the endpoint's alone (the lower ends of the brackets)."""
    beside = [(e, c) for e, c, _ in found if e["policy"] != "exclusive"]
    several = len({(e["policy"], e["workers"]) for e, c in beside if c is not None}) < \
        len([1 for e, c in beside if c is not None])
    measured = best_searches([(e, c) for e, c in beside if c is not None])
    measured.sort(key=lambda ec: -(ec[1].get("capacity_per_s") or 0))
    if not measured:
        return None
    base = alone.get("capacity_per_s") if alone else None

    def words(e, c):
        x = f", {ratio(c['capacity_per_s'] / base)}x alone" if base and c.get("capacity_per_s") else ""
        return f"{POLICY_WORDS.get(e['policy'], e['policy'])}: {capacity_words(c)} requests/s{x}"

    text = (f"at {llm_objective(measured[0][1])}, the endpoint's capacity alone is "
            f"{capacity_words(alone) + ' requests/s' if alone else 'not measured yet'}; beside "
            f"{beside_words(workers_mix(measured[0][0]['workers']))}, ")
    top = measured[0][1].get("capacity_per_s")
    if top is None:
        text += "no policy passed a probe (" + "; ".join(words(e, c) for e, c in measured) + ")"
    else:
        winners = [POLICY_WORDS.get(e["policy"], e["policy"])
                   for e, c in measured if c.get("capacity_per_s") == top]
        text += (f"{' and '.join(winners)} sustain{'s' if len(winners) == 1 else ''} the highest rate "
                 f"({'; '.join(words(e, c) for e, c in measured)}")
        text += "; x alone: the lower ends of the brackets)" if base else ")"
    if several:
        text += ("; a policy searched more than once is given by its best-informed search (the highest "
                 "rate that passed, else the lowest that failed)")
    missing = [e["name"] for e, c in beside if c is None]
    if missing:
        text += f"; not measured yet: {', '.join(missing)}"
    return text + "."


# Serve-llm at a fixed rate: the KV-cache cohort (a cache larger than the MPS memory share).


def llm_endpoint_worker(folder):
    """The serve-llm worker's worker.json of a cohort folder, or None."""
    workers = worker_files(folder).values()
    return next((w for w in workers if w["config"].get("workload") == "serve-llm"), None)


def kv_per_sequence(study):
    """{model: (bytes of KV cache per sequence, precision)} from the study's completed endpoints
    (a cache holds `max_batch` sequences of the whole context)."""
    out = {}
    for s in study.summaries():
        llm = s["config"].get("llm")
        for w in s["workers"]:
            v = w.get("serve_llm")
            if v and v.get("kv_cache_bytes") and llm:
                out[llm["model"]] = (v["kv_cache_bytes"] / v["max_batch"], llm["precision"])
    return out


def llm_fixed_rows(study):
    """One row per fixed-rate serve-llm cohort (its state, KV cache, the memory limit its share
    declared and its figures), and the facts the verdict reads."""
    per_seq = kv_per_sequence(study)
    rows, facts = [], []
    for e in study.of_kind("serve"):
        policy, beside = POLICY_WORDS.get(e["policy"], e["policy"]), beside_words(workers_mix(e["workers"]))
        folder = study.path / "cohorts" / e["name"]
        if e["outcome"] in FAILED:
            folder = study.failure(e)[0] or folder
        w = llm_endpoint_worker(folder) if folder.is_dir() else None
        if w is None:
            rows.append([policy, beside, entry_state(study, e), "", "", "", ""])
            continue
        cfg = w["config"]
        sl = cfg["serve_llm"]
        room = f"{sl['max_batch']} sequences of {thousands(sl['context_tokens'])} tokens"
        held = (cfg.get("llm") or {}).get("kv_cache_bytes")
        asked = None
        if held:
            cache = f"{gib(held)} held ({room})"
        else:
            model = (cfg.get("model_by_workload") or {}).get("serve-llm") or cfg.get("model")
            cache = f"none built; room for {room} asked"
            if model in per_seq:
                each, precision = per_seq[model]
                asked = each * sl["max_batch"]
                cache += (f" (about {gib(asked)}: {sl['max_batch']} times the {num(each / MIB)} MiB per sequence "
                          f"of the study's other `{model}` endpoints, {precision})")
        limit = (((w.get("share") or {}).get("declared")) or {}).get("pinned_memory_limit_bytes")
        state, latency, attain = entry_state(study, e), "-", "-"
        s = study.summary(e)
        v = next((x["serve_llm"] for x in s["workers"] if x.get("serve_llm")), None) if s else None
        if v:
            p99 = lambda d: "-" if d["p99"] is None else num(d["p99"])  # noqa: E731
            latency = f"{p99(v['ttft_ms'])} / {p99(v['tpot_ms'])}"
            q = v["slo"]
            if q:
                attain = (f"{q['attainment'] * 100:.1f} % of {v['requests']} requests, goodput "
                          f"{num(q['goodput_per_s'])}/s "
                          f"({llm_slo_words(v, {'met': 'meets', 'missed': 'misses'})})")
            state = f"complete at {num(v['offered_per_s'])} requests/s offered"
            state += ", overloaded" if v["overloaded"] else ""
        rows.append([policy, beside, state, cache, gib(limit) + " pinned" if limit else "none", latency, attain])
        facts.append({"policy": policy, "beside": beside, "state": state, "held": held, "asked": asked,
                      "limit": limit, "summary": v})
    header = ["policy", "beside the endpoint", "outcome", "KV cache", "memory limit per client",
              "TTFT / TPOT p99 ms", "SLO attainment"]
    return table(header, rows), facts


def llm_slo_outcome(v):
    """`met`, `missed`, or `short` (as the study report's row: every quantile within its objective
    and the endpoint not overloaded, but the early-stopping test needed more requests than the
    window held: not a miss, and not a claim either)."""
    q = v.get("slo")
    if q["meets"]:
        return "met"
    if q["ttft_met"] and q["tpot_met"] and not v["overloaded"]:
        return "short"
    return "missed"


def llm_slo_words(v, verb):
    """An endpoint's outcome against its objectives: `meets its p99 objectives`, ..."""
    q, outcome = v["slo"], llm_slo_outcome(v)
    quantile = quantile_words(q["quantile"])
    if outcome == "short":
        needed = q.get("early_stopping_requests_needed")
        return (f"within its {quantile} objectives, on too few requests to show them: {v['requests']}, "
                f"where the early-stopping test needs {needed if needed else 'more'}")
    return f"{verb[outcome]} its {quantile} objectives"


def llm_kv_verdict(facts):
    """Per policy: whether the endpoint held its cache beside the others, against its memory
    limit, and met its objectives."""
    parts = []
    for f in facts:
        name = f["policy"]
        held, asked, limit, v = f["held"], f["asked"], f["limit"], f["summary"]
        if v is not None:
            against = ""
            if held and limit:
                against = f" ({'above' if held > limit else 'within'} the {gib(limit)} pinned per client)"
            met = ""
            if v.get("slo"):
                outcome = llm_slo_words(v, {"met": "met", "missed": "missed"})
                if llm_slo_outcome(v) == "short":
                    met = f", {outcome}"
                else:
                    met = f" and {outcome} ({v['slo']['attainment'] * 100:.1f} % of requests within both)"
            cache = f"{gib(held)} cache" if held else "cache"
            parts.append(f"under {name} the endpoint held its {cache}{against} beside {f['beside']}{met}")
        else:
            against = f", about {gib(asked)} against the {gib(limit)} pinned per client" if asked and limit else ""
            parts.append(f"under {name} the cohort {f['state']}{against}")
    if not parts:
        return None
    words = "; ".join(parts) + "."
    return words[0].upper() + words[1:]


def llm_study(data):
    """The `llm` study's section: a line when it has not run, else its status, tables and verdicts."""
    path = find_llm_study(data)
    if path is None:
        return (f"The `{LLM_STUDY_PLAN}` study has not been run on the H200 yet: there is no study folder of "
                f"plan `{LLM_STUDY_PLAN}` under `docs/results/data/`. It runs on the GPU host in slices of a "
                f"device call, `{LLM_STUDY_RUN}`, each slice's `study.tar.gz` unpacked over that folder here, "
                f"until its index has every offered cohort complete; this section is then generated from the "
                f"newest study folder of that plan.")
    study = LlmStudy(path, data)
    out = [llm_study_status(study)]
    short = []
    solo = decode_solo(study)
    cells = decode_cells(study)
    if solo:
        out.append("### Decode workers together\n\n"
                   f"Protocol, as the baseline's summary records it: {decode_protocol(solo[3])}. Alone "
                   f"(exclusive, one worker): {num(solo[0])} tokens/s, TPOT p50 / p99 {num(solo[1])} / "
                   f"{num(solo[2])} ms. Tokens/s in total against that one worker; the slowest worker's TPOT "
                   f"p99 against its p99.\n\n" + llm_decode_table(study, solo, cells))
        v = decode_verdict(solo, cells)
        if v:
            short.append(f"- Decode: {v}")
        v = decode_one_verdict(solo, cells)
        if v:
            short.append(f"- Decode, {v}")
    elif cells:
        base = next((e for e in study.of_kind("decode") if e["baseline"]), None)
        out.append("### Decode workers together\n\nNo figures against alone yet: the exclusive baseline is "
                   + (entry_state(study, base) if base else "not in the plan") + ".")
    found = llm_capacities(study)
    if found:
        # The endpoint alone as it runs beside the others (graph-captured or eager): the eager
        # search alone is what the graphs change, not the base of "x alone".
        beside = {serve_llm_execution(study, e) for e, _, _ in found if e["policy"] != "exclusive"}
        solos = [(e, c) for e, c, _ in found if e["policy"] == "exclusive"]
        alone = next((c for e, c in solos if serve_llm_execution(study, e) in beside),
                     solos[0][1] if solos else None)
        objectives = sorted({llm_objective(c) for _, c, _ in found if c})
        out.append("### The endpoint's capacity, alone and beside trainers\n\n"
                   f"One `serve-llm` endpoint, {search_count_words(found)} at "
                   f"{'; '.join(objectives) or 'its objectives'}: a probe passes when the endpoint meets both at "
                   "the quantile and is not overloaded; a TTFT of `-` falls on a request that got no first "
                   f"token in the window, a TPOT of `-` means no request completed{few_requests_words(found)}."
                   "\n\n" + llm_capacity_table(study, found, alone))
        v = llm_capacity_verdict(found, alone)
        if v:
            short.append(f"- Serving: {v[0].upper()}{v[1:]}")
    if study.of_kind("serve"):
        t, facts = llm_fixed_rows(study)
        out.append("### A larger KV cache beside the trainers\n\n"
                   "The endpoint at a fixed rate with room for more sequences than in the capacity searches "
                   "(`max_batch`), beside the same workers: its KV cache is allocated whole before the window, "
                   "so it fits beside them under the policy's memory limit, or the cohort fails.\n\n" + t)
        v = llm_kv_verdict(facts)
        if v:
            short.append(f"- Memory: {v}")
    if short:
        out.insert(1, "In short, from this study's data:\n\n" + "\n".join(short))
    return "\n\n".join(out)


ROUND4 = "2026-12-01-round4"


def wall_words(index):
    """The study's wall time and the part inside measurement windows, by the rule of the report's
    `wall time` line (`coload_analysis::study_report::wall_time`): runs add up, a failed cohort
    has no time in a window, and cohorts whose build kept no times are counted, never guessed."""
    ran = [e for e in index["cohorts"]
           if e["outcome"] in ("complete", "already_complete", "failed", "failed_earlier")]

    def windows(e):
        return 0.0 if e["outcome"] in ("failed", "failed_earlier") else e.get("in_windows_s")

    timed = [e for e in ran if e.get("duration_s") is not None and windows(e) is not None]
    runs = index.get("runs", [])
    if not runs and not timed:
        return ("not recorded: the builds that ran it kept no run or cohort times (a study's "
                "runs record them since; `docs/study.md`)")
    wall = sum(r["wall_s"] for r in runs)
    inside = sum(windows(e) for e in timed)
    cohorts = sum(e["duration_s"] for e in timed)
    lanes = max(len(index.get("lanes", [])), 1)
    n = len(runs)
    runs_words = f"{n} run{'' if n == 1 else 's'}"
    if len(timed) == len(ran) and runs:
        return (f"{thousands(round(wall))} s in {runs_words}, {thousands(round(inside))} s of it inside "
                f"measurement windows ({100 * inside / (wall * lanes):.0f} % of "
                f"{'one lane' if lanes == 1 else f'{lanes} lanes'}'{'s' if lanes == 1 else ''} time)")
    untimed = len(ran) - len(timed)
    recorded = f"{thousands(round(wall))} s in the {runs_words} that recorded times; " if runs else ""
    share = f"{100 * inside / cohorts:.0f} %" if cohorts > 0 else "-"
    return (f"{recorded}the {len(timed)} cohort{'' if len(timed) == 1 else 's'} with recorded times "
            f"took {thousands(round(cohorts))} s, {share} of it inside measurement windows; "
            f"{untimed} other{'' if untimed == 1 else 's'} ran in earlier runs whose builds kept no times")


def decision_progress(folder):
    """How far the decision study has come, from its index: `33 of 49 offered cohorts ...`."""
    index = read_json(folder / "index.json")
    cohorts = index["cohorts"]
    offered = [e for e in cohorts if e["outcome"] != "not_offered"]
    done = [e for e in offered if e["outcome"] in ("complete", "already_complete")]
    failed = [e for e in offered if e["outcome"] in ("failed", "failed_earlier")]
    hogs = [e for e in failed if e["workers"].startswith("hog=")]
    words = f"{len(done)} of {len(offered)} offered cohorts complete"
    if hogs:
        words += (f", {len(hogs)} hog cohort{'s' if len(hogs) > 1 else ''} whose trainers ran out of "
                  f"memory beside the hog (the measurement; recorded as failed by the build that ran them)")
    rest = len(offered) - len(done) - len(hogs)
    if rest:
        words += f", {rest} not run yet"
    return words


def figures(data):
    article = Study(data / ROUND3 / "article")
    round2 = Study(data / ROUND2 / "study")
    d = {
        "study": article,
        "cap10": capacity_searches(data / ROUND3 / "capacity-10ms"),
        "cap25": capacity_searches(data / ROUND2 / "capacity"),
        "isolation": isolation_results(round2),
        "source": {"cap25": " (round 2)", "isolation": " (round 2)"},
    }
    decision = Study(data / ROUND4 / "decision")
    plan = Plan(decision)
    d4 = {
        "study": decision,
        "plan": plan,
        "columns": decision_columns(plan),
        "cap10": capacity_cohorts(decision, "10ms"),
        "cap25": capacity_cohorts(decision, "25ms"),
        "isolation": isolation_results(decision),
    }
    round1 = read_json(data.parent / "comparison.json")
    article_cohorts = len(article.index["cohorts"])
    complete = sum(1 for e in article.index["cohorts"] if e["outcome"] in ("complete", "already_complete"))
    return {
        "decision_table": decision_table(d4),
        "article_protocol": protocol_words(article),
        "article_dates": study_dates(article),
        "article_node": article.index["node"],
        "article_complete": f"{complete} of {article_cohorts}",
        "article_table": shape_table(article, ARTICLE_ROWS, POLICIES + ["exclusive"]),
        "article_solo_train": num(article.solo("train")[0]),
        "article_solo_train_p99": num(article.solo("train")[1]),
        "article_solo_infer": num(article.solo("infer")[0]),
        "article_solo_infer_p99": num(article.solo("infer")[1]),
        "capacity10_table": capacity_table(d["cap10"]),
        "capacity25_table": capacity_table(d["cap25"]),
        "models_table": models_table(data / ROUND3 / "models"),
        "models_protocol": protocol_words(Study(data / ROUND3 / "models" / "resnet18")),
        "round2_protocol": protocol_words(round2),
        "round2_dates": study_dates(round2),
        "round2_table": shape_table(round2, [r for r in ARTICLE_ROWS if r[1] != {"train": 2}], POLICIES),
        "round2_isolation": isolation_line(d["isolation"]),
        "round2_gpm_overhead": gpm_overhead(data / ROUND2 / "gpm-overhead" / "overhead.json"),
        "round1_table": round1_table(round1),
        "round1_day": day([read_json(p) for p in sorted(data.glob("*/summary.json"))]),
        "round2_day": day(round2.summaries()),
        "round3_day": day(article.summaries()),
        "hardware": hardware_words(data),
        "mig": mig_words(data),
        "decision_progress": decision_progress(data / ROUND4 / "decision"),
        "decision_dates": study_dates(decision),
        "decision_node": decision.index["node"],
        "decision_protocol": decision_protocol(decision),
        "decision_mig": decision_mig(decision),
        "round4_day": day(decision.summaries() + decision.probe_summaries()),
        "round4_hardware": hardware_words(decision.path / "cohorts", "*/worker-0/worker.json"),
        "round4_solo": solo_words(decision),
        "round4_repeats": repeats_words(decision),
        "round4_table": shape_table(decision, ARTICLE_ROWS, d4["columns"] + ["exclusive"], plan),
        "round4_capacity10_table": capacity_table(d4["cap10"], capacity_missing(plan, "10ms")),
        "round4_capacity25_table": capacity_table(d4["cap25"], capacity_missing(plan, "25ms")),
        "round4_isolation": isolation_line(d4["isolation"], plan),
        "round4_wall": wall_words(decision.index),
        "round3_decision_table": decision_table(d),
        "llm_day": llm_day(data / LLM),
        "llm_protocol": llm_protocol(data / LLM),
        "llm_solo_table": llm_solo_table(data / LLM),
        "llm_share_table": llm_share_table(data / LLM),
        "llm_share_verdict": llm_share_verdict(data / LLM),
        "llm_pytorch_table": llm_pytorch_table(data / LLM),
        "llm_pytorch_words": llm_pytorch_words(data / LLM),
        "llm_study": llm_study(data),
    }


# ---------------------------------------------------------------- the template

PLACEHOLDER = re.compile(r"\{\{([a-z0-9_]+)\}\}")
# A figure typed into the template: a decimal, a thousands group, or a number with a unit or
# a multiplier. Names such as ResNet18, H200, p99, fp32 or a date in a path are not figures.
TYPED_FIGURE = re.compile(
    r"(?<![\w.-])(\d+\.\d+|\d{1,3}(?:,\d{3})+|\d+\s?(?:x|×|%|ms|s|GiB|MiB|W|J|samples/s|requests/s)(?![\w]))"
)


def check_template(text):
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("    ") or line.startswith("```"):
            continue
        bare = PLACEHOLDER.sub("", line)
        bare = re.sub(r"`[^`]*`", "", bare)  # code: commands, flags, paths
        bare = re.sub(r"\]\([^)]*\)", "]", bare)  # link targets
        bare = bare.replace("95 %", "")  # the confidence level of every interval: a method, not a result
        for m in TYPED_FIGURE.finditer(bare):
            problems.append(f"template line {n}: `{m.group(0)}` is a figure typed by hand; compute it")
    return problems


def render(template, values):
    missing = sorted(set(PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise DataError(f"template names figures the script does not compute: {', '.join(missing)}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "docs/results/data"))
    ap.add_argument("--template", default=str(HERE / "results.md.tmpl"))
    ap.add_argument("--out", default=str(ROOT / "docs/results.md"))
    ap.add_argument("--check", action="store_true",
                    help="regenerate and compare with --out; exit 1 on any difference")
    a = ap.parse_args()
    try:
        template = Path(a.template).read_text(encoding="utf-8")
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    problems = check_template(template)
    if problems:
        print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
        return 2
    try:
        page = render(template, figures(Path(a.data)))
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out)
    if a.check:
        try:
            committed = out.read_text(encoding="utf-8")
        except OSError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if committed != page:
            diff = difflib.unified_diff(committed.splitlines(), page.splitlines(),
                                        f"{out} (committed)", f"{out} (from the data)", lineterm="")
            print("\n".join(diff))
            print(f"error: {out} differs from what the data give: edit the template or the data, "
                  f"then run scripts/results/results_page.py", file=sys.stderr)
            return 1
        print(f"{out} matches the data")
        return 0
    out.write_text(page, encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
