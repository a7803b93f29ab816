#!/usr/bin/env python3
"""A kvplan plan in HF transformers: load the plan, give generate() a kvplan.hf.PlanCache, and see
what the cache holds against what kvplan estimates.

    python examples/python/plan_in_transformers.py --model SmolLM2-135M-Instruct.Q4_1.gguf \
        --plan data/reference/smollm2-135m/plan-6480.json --prompt "Once upon a time"
    python examples/python/plan_in_transformers.py --model tests/fixtures/hf/gemma3 --kv int4/int4

--model is a .gguf file (transformers dequantizes it) or an HF model directory; --kv puts one K/V
pair on every layer instead of a plan. Needs `pip install .[hf]` (torch, transformers, accelerate,
gguf for .gguf files).
"""
import argparse
import os

import torch
from transformers import AutoModelForCausalLM

import kvplan
import kvplan.hf


def load_model(path):
    if path.endswith(".gguf"):
        return AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                                    gguf_file=os.path.basename(path),
                                                    dtype=torch.float32)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--plan", help="plan.json")
    group.add_argument("--kv", help="one K/V pair on every layer, e.g. q4_0/q4_0")
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args()

    plan = kvplan.Plan.load(args.plan) if args.plan else kvplan.Plan.for_model(args.model, args.kv)
    tokenizer = kvplan.Tokenizer.load(args.model)
    model = load_model(args.model)
    # Llama GGUFs keep llama.cpp's interleaved RoPE order in K; pack keys in that order so the bytes
    # are the ones kvplan's harness measured the plan on.
    interleaved = args.model.endswith(".gguf") and model.config.model_type in ("llama", "mistral")
    cache = kvplan.hf.PlanCache(plan, model.config, keys_interleaved=interleaved)

    ids = torch.tensor([tokenizer.encode(args.prompt)])
    out = model.generate(ids, cache=cache, do_sample=False,
                         max_new_tokens=args.max_new_tokens)
    tokens = out.shape[1]
    print(tokenizer.decode(out[0, ids.shape[1]:].tolist()))
    estimate = kvplan.estimate(plan, contexts=[tokens]).contexts[0]
    print(f"{plan!r}: {tokens} tokens held in {cache.nbytes:,} bytes "
          f"(kvplan.estimate: {estimate.bytes:,} in whole pages; bf16: {estimate.bf16_bytes:,})")


if __name__ == "__main__":
    main()
