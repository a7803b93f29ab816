#!/usr/bin/env python3
"""kvplan's harness against an independent engine: HF transformers running a plan through
kvplan.hf.PlanCache, on the same GGUF (transformers dequantizes it), the same tokens and
llama-perplexity's protocol (chunks of --ctx tokens, BOS first, the second half scored).

For each KV configuration (a plan.json, or a K/V pair on every layer): transformers' mean
KL(exact || configuration) beside `kvplan eval`'s on the same text, and their ratio; then the bytes
the PlanCache holds after a chunk against `kvplan.estimate` for as many tokens, and greedy text from
model.generate() with the plan's cache. Run it in the venv that has torch and transformers
(scripts/compare/hf-cross-check.sh sets it up).

    python scripts/compare/hf-cross-check.py --kvplan build/kvplan --model SmolLM2.gguf \
        --text tinystories-valid-sample.txt --plan plan-6480.json --kv q4_0/q4_0 --kv int4_kivi/int4
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
from transformers import AutoModelForCausalLM

import kvplan
import kvplan.hf


def mean_kl_kvplan(binary, model, text, ctx, chunks, config, threads):
    flag = ["--plan", config] if config.endswith(".json") else ["--kv", config]
    out = subprocess.run([binary, "eval", "--model", model, "--text", text, "--ctx", str(ctx),
                          "--chunks", str(chunks), "--threads", str(threads), "--json"] + flag,
                         check=True, capture_output=True, text=True).stdout
    result = json.loads(out)["result"]
    return result["mean_kl"], result["scored_tokens"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvplan", required=True, help="the kvplan binary")
    ap.add_argument("--model", required=True, help="a .gguf file")
    ap.add_argument("--text", required=True)
    ap.add_argument("--plan", action="append", default=[], help="plan.json (repeatable)")
    ap.add_argument("--kv", action="append", default=[], help="K/V pair on every layer (repeatable)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=0, help="at most this many chunks (0 = all)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--generate", type=int, default=32, help="greedy tokens from generate()")
    ap.add_argument("--attn", default="sdpa,eager",
                    help="transformers attention implementations to run, comma-separated: their "
                         "spread is the metric's own sensitivity to rounding order")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    if not args.plan:
        ap.error("give at least one --plan (the uniform --kv pairs are applied to its model)")
    torch.set_num_threads(args.threads)

    tokenizer = kvplan.Tokenizer.load(args.model)
    tokens = tokenizer.encode(open(args.text, encoding="utf-8").read(), add_bos=True)
    n_chunks = len(tokens) // args.ctx
    if args.chunks:
        n_chunks = min(n_chunks, args.chunks)
    first_chunk = [tokenizer.bos_id] + tokens[1:args.ctx]

    start = time.time()
    models = {}
    for attn in args.attn.split(","):
        models[attn] = AutoModelForCausalLM.from_pretrained(
            os.path.dirname(os.path.abspath(args.model)), gguf_file=os.path.basename(args.model),
            dtype=torch.float32, attn_implementation=attn)
        models[attn].eval()
    model = next(iter(models.values()))
    print(f"transformers loaded {os.path.basename(args.model)} in {time.time() - start:.1f} s; "
          f"{n_chunks} chunks of {args.ctx} tokens", file=sys.stderr)

    # llama.cpp's converter interleaves Llama's RoPE pairs in Q and K (kvplan's harness keeps that
    # order); transformers' GGUF loader undoes it, so the cache packs keys in the GGUF's order.
    interleaved = model.config.model_type in ("llama", "mistral")
    base = kvplan.Plan.load(args.plan[0])
    configs = [(os.path.basename(p), kvplan.Plan.load(p), p) for p in args.plan]
    configs += [(pair, kvplan.Plan.uniform(base, pair), pair) for pair in args.kv]
    rows = []
    for name, plan, spec in configs:
        t0 = time.time()
        per_attn = {attn: kvplan.hf.evaluate_kl(m, tokens, plan, ctx=args.ctx, max_chunks=n_chunks,
                                                bos_id=tokenizer.bos_id,
                                                keys_interleaved=interleaved)
                    for attn, m in models.items()}
        t_hf = time.time() - t0
        kls = [r["mean_kl"] for r in per_attn.values()]
        hf_kl, n = kls[0], per_attn[next(iter(per_attn))]["scored"]
        kv_kl, n_kv = mean_kl_kvplan(args.kvplan, args.model, args.text, args.ctx, n_chunks, spec,
                                     args.threads)
        # Bytes held after one chunk of ctx tokens vs the estimate for as many tokens.
        cache = kvplan.hf.PlanCache(plan, model.config, keys_interleaved=interleaved)
        with torch.no_grad():
            model(torch.tensor([first_chunk]), cache=cache, use_cache=True)
        estimate = kvplan.estimate(plan, contexts=[args.ctx]).contexts[0].bytes
        row = {"config": name, "bytes_per_token": plan.bytes_per_token, "transformers_kl": hf_kl,
               "transformers_kl_by_attn": {a: r["mean_kl"] for a, r in per_attn.items()},
               "kvplan_kl": kv_kl, "ratio": hf_kl / kv_kl if kv_kl else math.nan,
               "attn_spread": max(kls) / min(kls) - 1,
               "kvplan_inside_spread": min(kls) <= kv_kl <= max(kls),
               "scored": n, "kvplan_scored": n_kv, "cache_bytes": cache.nbytes,
               "estimate_bytes": estimate, "seconds": t_hf}
        rows.append(row)
        print(f"{name}: transformers {row['transformers_kl_by_attn']}  kvplan {kv_kl:.6f}  "
              f"ratio {row['ratio']:.4f}  "
              f"cache {cache.nbytes} B vs estimate {estimate} B", file=sys.stderr)

    prompt = tokens[:32]
    with torch.no_grad():
        cache = kvplan.hf.PlanCache(configs[0][1], model.config, keys_interleaved=interleaved)
        out = model.generate(torch.tensor([prompt]), cache=cache, do_sample=False,
                             max_new_tokens=args.generate)
        exact = model.generate(torch.tensor([prompt]), do_sample=False,
                               max_new_tokens=args.generate)
    greedy = {"prompt": tokenizer.decode(prompt[1:]),
              "plan": tokenizer.decode(out[0, len(prompt):].tolist()),
              "exact": tokenizer.decode(exact[0, len(prompt):].tolist())}

    attns = list(models)
    print("\n| KV | B/token | " + " | ".join(f"KL transformers ({a})" for a in attns) +
          " | KL kvplan eval | ratio | transformers' own spread | cache bytes | estimate |")
    print("|---|---:|" + "---:|" * (len(attns) + 5))
    for r in rows:
        kls = " | ".join(f"{r['transformers_kl_by_attn'][a]:.6f}" for a in attns)
        print(f"| {r['config']} | {r['bytes_per_token']:.0f} | {kls} | {r['kvplan_kl']:.6f} | "
              f"{r['ratio']:.4f} | {100 * r['attn_spread']:.1f} % | {r['cache_bytes']:,} | "
              f"{r['estimate_bytes']:,} |")
    print(f"\ngreedy, {args.generate} tokens after {greedy['prompt']!r}:")
    print(f"  plan : {greedy['plan']!r}\n  exact: {greedy['exact']!r}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"ctx": args.ctx, "chunks": n_chunks, "rows": rows, "greedy": greedy}, f,
                      indent=2)


if __name__ == "__main__":
    main()
