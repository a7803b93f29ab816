#!/usr/bin/env python3
"""What each engine's plan is and how to give it to the engine, beside the table `kvplan report
--engine-plans` draws: the layers of each plan searched with `kvplan search --engine E`, its export,
and kvplan's own plan mapped to each engine (`kvplan export --measure`).

    scripts/compare/engine-table.py ENGINE[@REFUSED.txt]=PLAN.json[:EXPORT.txt[:MAPPED.json]] ... \
        > engines.md

MAPPED.json is `kvplan export --measure --json` of kvplan's own plan to that engine. With
@REFUSED.txt the engine has no plan within the budget (the file holds the search's reason) and
PLAN.json is its best plan at the least bytes it can take.

Each plan's quality is read as plan.json records it (report text, never used to choose). Only the
standard library: plan.json is JSON and the table is Markdown.
"""
import json
import sys


def runs(layers):
    """'q8_0/q8_0 x2, iq4_nl/iq4_nl x28': each run of layers alike."""
    out = []
    for layer in layers:
        pair = f"{layer['key']}/{layer['value']}"
        if out and out[-1][0] == pair:
            out[-1][1] += 1
        else:
            out.append([pair, 1])
    return ", ".join(f"{p} x{n}" if n > 1 else p for p, n in out)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: engine-table.py ENGINE=PLAN.json[:EXPORT.txt[:MAPPED.json]] ...")
    rows, exports, mapped = [], [], []
    for arg in sys.argv[1:]:
        engine, files = arg.split("=", 1)
        engine, _, refused_path = engine.partition("@")
        plan_path, _, rest = files.partition(":")
        export_path, _, mapped_path = rest.partition(":")
        with open(plan_path, encoding="utf-8") as f:
            plan = json.load(f)
        layers = runs(plan["layers"])
        if refused_path:
            with open(refused_path, encoding="utf-8") as f:
                reason = f.read().strip()
            q = plan["quality"]
            layers = (f"no plan within the budget ({reason}). Its best plan at the least bytes it "
                      f"can take, {plan['summary']['bytes_per_token']:.0f} B/token: {layers}; "
                      f"mean KL {q['mean_kl']:.4f}, top-1 {100 * q['top1_agreement']:.2f} % on "
                      f"the report text")
        rows.append((engine, layers))
        if export_path:
            with open(export_path, encoding="utf-8") as f:
                exports.append((engine, f.read().rstrip("\n")))
        if mapped_path:
            try:
                with open(mapped_path, encoding="utf-8") as f:
                    m = json.load(f)
                mapped.append((engine, m["exact"], len(m["losses"]), m["measured"]))
            except (OSError, ValueError, KeyError):
                mapped.append((engine, None, None, None))
    print("Layers of each engine's plan (runs of layers alike, layer 0 first):\n")
    for e, layers in rows:
        print(f"- **{e}**: {layers}")
    if mapped:
        print("\nkvplan's own plan mapped to each engine (`kvplan export --to ENGINE "
              "--measure`): the nearest configuration the engine runs, measured on the same "
              "report text.\n")
        print("| engine | exact | losses | B/token | mean KL | engine - kvplan plan [95 % CI] |")
        print("|---|---|---:|---:|---:|---|")
        for e, exact, n_losses, m in mapped:
            if m is None:
                print(f"| {e} | refused (stores none of the plan's formats) | | | | |")
                continue
            print(f"| {e} | {'yes' if exact else 'no'} | {n_losses} | "
                  f"{m['engine_bytes_per_token']:.0f} | {m['engine_mean_kl']:.4f} | "
                  f"{m['engine_minus_plan']:+.4f} [{m['engine_minus_plan_low']:+.4f}, "
                  f"{m['engine_minus_plan_high']:+.4f}] |")
    if exports:
        print("\nWhat to give each engine (`kvplan export --to ENGINE`):\n")
        for e, text in exports:
            print(f"**{e}**\n\n```\n{text}\n```\n")


if __name__ == "__main__":
    main()
