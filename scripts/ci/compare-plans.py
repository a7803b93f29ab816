#!/usr/bin/env python3
"""Compares a regenerated plan.json with the committed one
(scripts/ci/regenerate-references.sh --check).

  scripts/ci/compare-plans.py COMMITTED.json REGENERATED.json [--kl-tolerance 0.001]

The plans agree when the model, the quantization settings and every layer's key and value formats
are identical, and every measured mean KL (the plan's, each uniform baseline's and both at each long
context) differs by at most the relative tolerance (default 0.1 %, plus 1e-9 absolute for values
near zero). `created` and other run-dependent fields are ignored. Exit 0 when they agree, 1 with
one line per difference otherwise, and a line naming both builds when they differ
(provenance.build).
"""
import argparse
import json
import sys


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-9


def build_of(plan):
    """The binary that made a plan (provenance.build), as one phrase."""
    b = plan.get("provenance", {}).get("build")
    if not b:
        return "not recorded"
    return (f"-march={b.get('isa')} ({b.get('vector_extensions')}), {b.get('compiler')}, "
            f"Eigen {b.get('eigen')}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("committed")
    p.add_argument("regenerated")
    p.add_argument("--kl-tolerance", type=float, default=1e-3)
    a = p.parse_args()
    old = json.load(open(a.committed))
    new = json.load(open(a.regenerated))
    tol = a.kl_tolerance
    problems = []
    for field in ("schema", "model", "quantization"):
        if old.get(field) != new.get(field):
            problems.append(f"{field}: {old.get(field)} -> {new.get(field)}")
    old_layers = [(l["index"], l["key"], l["value"]) for l in old["layers"]]
    new_layers = [(l["index"], l["key"], l["value"]) for l in new["layers"]]
    if len(old_layers) != len(new_layers):
        problems.append(f"layers: {len(old_layers)} -> {len(new_layers)}")
    for o, n in zip(old_layers, new_layers):
        if o != n:
            problems.append(f"layer {o[0]}: K {o[1]} V {o[2]} -> K {n[1]} V {n[2]}")
    ok, nk = old["quality"].get("mean_kl"), new["quality"].get("mean_kl")
    if ok is None or nk is None or not close(ok, nk, tol):
        problems.append(f"quality.mean_kl: {ok} -> {nk} (tolerance {tol:g} relative)")
    old_base = {b["kv"]: b["mean_kl"] for b in old.get("baselines", [])}
    new_base = {b["kv"]: b["mean_kl"] for b in new.get("baselines", [])}
    if sorted(old_base) != sorted(new_base):
        problems.append(f"baselines: {sorted(old_base)} -> {sorted(new_base)}")
    for kv in sorted(set(old_base) & set(new_base)):
        if not close(old_base[kv], new_base[kv], tol):
            problems.append(f"baseline {kv} mean_kl: {old_base[kv]} -> {new_base[kv]}")
    def long_rows(plan):
        lc = plan["quality"].get("long_context", {})
        return {r["ctx"]: (r["plan_mean_kl"], r["baseline_mean_kl"]) for r in lc.get("rows", [])}
    old_long, new_long = long_rows(old), long_rows(new)
    if sorted(old_long) != sorted(new_long):
        problems.append(f"long_context contexts: {sorted(old_long)} -> {sorted(new_long)}")
    for ctx in sorted(set(old_long) & set(new_long)):
        for which, o, n in zip(("plan", "baseline"), old_long[ctx], new_long[ctx]):
            if not close(o, n, tol):
                problems.append(f"long_context ctx {ctx} {which}_mean_kl: {o} -> {n}")
    for line in problems:
        print(f"{a.regenerated}: {line}")
    old_build, new_build = build_of(old), build_of(new)
    if problems and old_build != new_build:
        print(f"{a.regenerated}: the builds differ (committed: {old_build}; regenerated: "
              f"{new_build}); results are bit-identical only under the same build "
              "(docs/determinism.md)")
    if not problems:
        print(f"{a.regenerated}: same layers as {a.committed}, mean KL {ok} -> {nk}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
