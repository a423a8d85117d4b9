#!/usr/bin/env python3
"""The workspace's import picture: circles between modules, and crates that import upward.

coload's crates are layered (docs/design.md, "Crates and what each may import"): a crate may
depend only on crates of lower layers, as LAYERS below says. Inside a crate, the modules' `use`
edges must form no circle: a circle between files usually means a type lives in the wrong module
(../shared/docs/style.md). A parent's re-exports of its children (`pub use child::X` in lib.rs
or mod.rs) are the module's facade, not edges, and test modules are left out.

    scripts/check-imports.py           # check; exit 1 naming every circle and upward import
    scripts/check-imports.py --stats   # also print lines of code per crate and binary
"""
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Layer of every member: a member imports only members of lower layers.
LAYERS = {
    "coload-cohort-schema": 0,
    "coload-measure": 1,
    "coload-timing": 1,
    "coload-spec": 2,
    "coload-device": 2,
    "coload-analysis": 2,
    "coload-barrier": 2,
    "coload-workload": 2,
    "coload-report": 3,
    # The worker links libtorch through workload; the binaries sit above it.
    "coload-worker": 3,
    "coload-launch": 4,
    "coload-study": 5,
    "coload-cluster": 6,
    "bench-worker": 7,
    "bench-summarize": 7,
    "bench-cohort": 7,
}


# What the artifact crate may depend on.
SCHEMA_DEPS = {"serde", "serde_json", "thiserror"}


def members():
    ws = tomllib.loads((ROOT / "Cargo.toml").read_text())
    for m in ws["workspace"]["members"]:
        manifest = tomllib.loads((ROOT / m / "Cargo.toml").read_text())
        yield m, manifest


def strip_tests(text):
    # Unit tests sit at the bottom of their file (house style); comments and doc links are
    # not imports.
    m = re.search(r"^#\[cfg\(test\)\]\s*\nmod tests\b", text, re.M)
    text = text[: m.start()] if m else text
    return re.sub(r"//[^\n]*", "", text)


def modules(src):
    """Module path (tuple) -> file, for every .rs file of a crate's src/ (bins' main.rs too)."""
    out = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "mod":
            parts = parts[:-1]
        if parts in (["lib"], ["main"]):
            parts = []
        if parts and parts[0] == "bin":
            continue  # Separate binaries of a library crate have their own roots.
        out[tuple(parts)] = f
    return out


def resolve(mods, here, path):
    """The longest module prefix of `path` (segments after crate::/super::/self::)."""
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None


USE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def edges(mods):
    out = {m: set() for m in mods}
    for mod, f in mods.items():
        text = strip_tests(f.read_text())
        is_parent = f.name in ("mod.rs", "lib.rs", "main.rs")
        # The module a `super::` in this file means, and `self::`.
        this = mod
        for kind, rest in USE.findall(text):
            segs = [s for s in rest.split("::") if s]
            if kind == "crate":
                base = []
            elif kind == "self":
                base = list(this) if is_parent else list(this)
            else:  # super
                base = list(this[:-1]) if not is_parent else list(this[:-1])
            target = resolve(mods, mod, base + segs)
            if target is None or target == mod:
                continue
            # A parent's use of its own descendants is its facade (re-exports, `mod` wiring).
            if target[: len(mod)] == mod:
                continue
            if target == ():
                continue
            out[mod].add(target)
    return out


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return comps


def loc(path):
    return sum(len(f.read_text().splitlines()) for f in path.rglob("*.rs"))


def main():
    problems = []
    stats = []
    for m, manifest in members():
        name = manifest["package"]["name"]
        layer = LAYERS.get(name)
        if layer is None:
            problems.append(f"{name}: not in scripts/check-imports.py's LAYERS; give it a layer")
            continue
        if name == "coload-cohort-schema":
            # The artifact crate is serde only: no clap, no behaviour crates.
            extra = set(manifest.get("dependencies", {})) - SCHEMA_DEPS
            if extra or manifest.get("features"):
                problems.append(
                    f"coload-cohort-schema depends on {sorted(extra)} or has features "
                    f"{sorted(manifest.get('features', {}))}: it holds artifact types only "
                    f"(serde, serde_json, thiserror)"
                )
        for dep in manifest.get("dependencies", {}):
            if dep in LAYERS and LAYERS[dep] >= layer:
                problems.append(
                    f"{name} (layer {layer}) imports {dep} (layer {LAYERS[dep]}): upward or "
                    "sideways; move the shared code down, or the crate up"
                )
        src = ROOT / m / "src"
        mods = modules(src)
        for comp in cycles(edges(mods)):
            names = ", ".join("::".join(c) or "(root)" for c in comp)
            problems.append(f"{name}: modules import each other in a circle: {names}")
        stats.append((name, loc(src)))
    if "--stats" in sys.argv:
        for name, n in stats:
            print(f"{name:24} {n:6} lines in src/")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"import check: {len(stats)} crates, no circles, nothing imports upward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
