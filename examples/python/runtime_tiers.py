#!/usr/bin/env python3
"""The kvplan runtime from the Python package: store a plan's chunks, drop their device copies,
find the cached prefix on the host tier (and on disk, with --disk), load it back byte for byte.

    python examples/python/runtime_tiers.py --plan data/reference/smollm2-135m/plan-6480.json
    python examples/python/runtime_tiers.py --plan plan.json --chunks 4 --disk /tmp/kvplan-disk

A chunk is chunk_tokens tokens of every layer's packed K and V pages back to back, the plan's real
bytes (here random bytes of that size: the runtime moves bytes, it does not read them). Exits 0
when every byte came back. examples/python/kvplan_runtime_example.py does the same through the C
API with ctypes, for engines that embed libkvplan_runtime.so without the package.
"""
import argparse
import random

import numpy as np

import kvplan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", required=True)
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--chunk-tokens", type=int, default=256)
    ap.add_argument("--disk", help="a directory for the disk tier (the host tier then holds one "
                                   "chunk, the rest spill)")
    args = ap.parse_args()

    plan = kvplan.Plan.load(args.plan)
    chunk_bytes = kvplan.estimate(plan, contexts=[args.chunk_tokens]).contexts[0].bytes
    host_chunks = 1 if args.disk else args.chunks
    # A host slot also holds the stored object's headers and checksums.
    slot_bytes = kvplan.Runtime.stored_chunk_bytes(plan, chunk_tokens=args.chunk_tokens)
    rt = kvplan.Runtime(plan, chunk_tokens=args.chunk_tokens,
                        device_bytes=args.chunks * chunk_bytes,
                        host_bytes=host_chunks * slot_bytes, disk_dir=args.disk)
    print(f"{plan!r}: chunk of {rt.chunk_tokens} tokens = {rt.chunk_bytes:,} bytes; device "
          f"memory: {rt.backend}; {rt.device_chunks} device / {rt.host_chunks} host chunks")

    rng = random.Random(1)
    tokens = [rng.randrange(50000) for _ in range(args.chunks * args.chunk_tokens + 17)]
    data = np.random.default_rng(1)
    chunks = [data.integers(0, 256, rt.chunk_bytes, dtype=np.uint8) for _ in range(args.chunks)]
    for index, payload in enumerate(chunks):
        rt.store(tokens, index, payload)
    for key in rt.keys(tokens):  # so that the load really comes from host or disk
        rt.evict(key, "device")
    prefix, prefix_tokens, tiers = rt.lookup(tokens)
    print(f"lookup: {prefix} chunks cached ({tiers}), {len(tokens) - prefix_tokens} tokens to "
          f"recompute")
    loaded = rt.load(tokens)
    same = all(np.array_equal(a, b) for a, b in zip(loaded, chunks)) and len(loaded) == len(chunks)
    print(f"load: {len(loaded)} chunks, every byte back: {same}; stats {rt.stats}")
    raise SystemExit(0 if same and prefix == args.chunks else 1)


if __name__ == "__main__":
    main()
