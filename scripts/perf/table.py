#!/usr/bin/env python3
"""The comparison table of scripts/perf/compare.sh, from its perf.jsonl.

  scripts/perf/table.py perf.jsonl

Prints Markdown: one row per (model, workload, implementation) with samples/s, p50, p99 and
batches, then the ratios the goals in docs/performance.md are stated in:

  coload eager / PyTorch eager, throughput              goal >= 1.10 (ResNet18)
  coload cuda-graph / PyTorch CUDA graph, throughput    goal within 2 % (0.98 or more)

Standard library only. A run that failed is listed as failed, never left out.
"""

import json
import sys

IMPLS = ["coload-eager", "pytorch-eager", "coload-cuda-graph", "pytorch-graph"]
GOALS = {
    ("coload-eager", "pytorch-eager"): ("eager vs PyTorch eager", 1.10),
    ("coload-cuda-graph", "pytorch-graph"): ("cuda-graph vs PyTorch CUDA graph", 0.98),
}


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    solo = [r for r in rows if not r.get("label")]
    by = {(r.get("model", "resnet18"), r["workload"], r["impl"]): r for r in solo}
    models = []
    for r in solo:
        m = r.get("model", "resnet18")
        if m not in models:
            models.append(m)

    print("| model | workload | implementation | samples/s | p50 ms | p99 ms | batches |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for m in models:
        for w in ("train", "infer"):
            for impl in IMPLS:
                r = by.get((m, w, impl))
                if r is None:
                    continue
                if r.get("failed"):
                    print(f"| {m} | {w} | {impl} | FAILED | | | |")
                    continue
                print(
                    f"| {m} | {w} | {impl} | {r['samples_per_s']:.1f} | {r['p50_ms']:.3f} "
                    f"| {r['p99_ms']:.3f} | {r['batches']} |"
                )

    print()
    print("| model | workload | ratio | throughput | p50 (theirs / ours) | goal | met |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- |")
    for m in models:
        for w in ("train", "infer"):
            for (ours, theirs), (name, goal) in GOALS.items():
                a, b = by.get((m, w, ours)), by.get((m, w, theirs))
                if not a or not b or a.get("failed") or b.get("failed"):
                    continue
                ratio = a["samples_per_s"] / b["samples_per_s"]
                p50 = b["p50_ms"] / a["p50_ms"]
                met = "yes" if ratio >= goal else "no"
                print(f"| {m} | {w} | {name} | {ratio:.3f} | {p50:.3f} | >= {goal:.2f} | {met} |")

    ts7 = [r for r in rows if r.get("label", "").startswith("ts7-")]
    if ts7:
        rates = [r["samples_per_s"] for r in ts7]
        print()
        print(
            f"PyTorch eager, 7 time-sliced trainers: per-worker {min(rates):.1f}-{max(rates):.1f} "
            f"samples/s, aggregate {sum(rates):.1f} (coload's cohort: runs/coload-ts7-train.txt)"
        )


if __name__ == "__main__":
    main()
