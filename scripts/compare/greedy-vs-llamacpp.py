#!/usr/bin/env python3
"""Greedy generation of kvplan and llama.cpp (llama-simple) side by side on one GGUF: per prompt,
whether the first N generated tokens agree, and where they do not, kvplan's logits at the first
divergence for its own choice and for llama.cpp's, so a divergence at a near-tie shows as one.

llama-simple prints text pieces, not ids; kvplan's `generate --trace-out` gives its tokens and each
step's top 5. The divergence is the first step whose kvplan token text stops being a prefix of
llama.cpp's remaining output; llama.cpp's token there is the top-5 entry whose text continues that
output (the longest such), or "not in kvplan's top 5".

Called by scripts/compare/greedy-vs-llamacpp.sh (which builds llama-simple); by hand:
    scripts/compare/greedy-vs-llamacpp.py --kvplan build/kvplan --llama-simple <bin>/llama-simple \\
        --model gemma-3-270m-q4_k_m.gguf --tokens 20 "Once upon a time"
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def llama_text(binary: str, model: str, prompt: str, tokens: int) -> str:
    out = subprocess.run([binary, "-m", model, "-n", str(tokens), prompt], check=True,
                         capture_output=True, text=True, errors="replace").stdout
    # llama-simple echoes the prompt (with a visible BOS piece) and then the generated text.
    at = out.find(prompt)
    if at < 0:
        sys.exit(f"greedy-vs-llamacpp: llama-simple's output does not echo the prompt: {out[:200]!r}")
    return out[at + len(prompt):].rstrip("\n")


def kvplan_trace(binary: str, model: str, prompt: str, tokens: int, threads: int) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        subprocess.run([binary, "-q", "generate", "--model", model, "--prompt", prompt,
                        "--max-tokens", str(tokens), "--threads", str(threads),
                        "--trace-out", str(trace)], check=True, capture_output=True)
        return json.loads(trace.read_text())["steps"]


def compare(steps: list, llama: str) -> dict:
    rest = llama
    for i, step in enumerate(steps):
        top = step["top"]
        mine = top[0]
        if step["stop"] and not rest:  # both stopped here (llama-simple prints no end token)
            return {"agree": i, "step": None}
        if rest.startswith(mine["text"]) and (mine["text"] or not rest):
            rest = rest[len(mine["text"]):]
            continue
        theirs = max((t for t in top[1:] if t["text"] and rest.startswith(t["text"])),
                     key=lambda t: len(t["text"]), default=None)
        return {"agree": i, "step": i, "kvplan": mine, "llama": theirs}
    return {"agree": len(steps), "step": None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kvplan", required=True)
    p.add_argument("--llama-simple", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("prompts", nargs="+")
    a = p.parse_args()
    name = Path(a.model).name
    for prompt in a.prompts:
        llama = llama_text(a.llama_simple, a.model, prompt, a.tokens)
        steps = kvplan_trace(a.kvplan, a.model, prompt, a.tokens, a.threads)
        r = compare(steps, llama)
        if r["step"] is None:
            print(f"{name} | {prompt!r} | identical over {r['agree']} tokens"
                  + (" (both stopped)" if r["agree"] < a.tokens else ""))
            continue
        mine = r["kvplan"]
        theirs = r["llama"]
        if theirs is None:
            detail = "llama.cpp's token is not in kvplan's top 5"
        else:
            gap = mine["logit"] - theirs["logit"]
            detail = (f"kvplan {mine['text']!r} {mine['logit']:.4f} vs llama.cpp "
                      f"{theirs['text']!r} {theirs['logit']:.4f} (kvplan's logits, gap {gap:.4f})")
        print(f"{name} | {prompt!r} | first {r['agree']} tokens identical, then {detail}")


if __name__ == "__main__":
    main()
