#!/usr/bin/env python3
"""kvplan runtime from Python through ctypes: store a chunk of KV pages, look it up, load it back.

    python3 kvplan_runtime_example.py --lib build/lib/libkvplan_runtime.so --plan plan.json \
        --model-geometry 62,8,128
    KVPLAN_RUNTIME_LIB=build/lib/libkvplan_runtime.so python3 kvplan_runtime_example.py --plan P \
        --model-fingerprint 1a2b3c4d5e6f7081

The runtime refuses a plan made for another model, so the served model is named by its KV
geometry (layers, KV heads, head_dim) or its fingerprint (`kvplan inspect` prints it), or the
check is waived with --skip-model-check. Only the C API of include/kvplan/kvplan_runtime.h is used.
Exits 0 when every byte came back.
"""
import argparse
import ctypes as C
import os
import random
import sys

OK, TIER_NAMES = 0, {0: "miss", 1: "device", 2: "host", 3: "disk"}


def load_library(path):
    lib = C.CDLL(path)
    P, u64, i32, u32 = C.c_void_p, C.c_uint64, C.c_int32, C.c_uint32
    sig = {
        "kvplan_last_error_message": (C.c_char_p, []),
        "kvplan_options_create": (i32, [C.POINTER(P)]),
        "kvplan_options_destroy": (None, [P]),
        "kvplan_options_set_chunk_tokens": (i32, [P, u64]),
        "kvplan_options_set_device_capacity_bytes": (i32, [P, u64]),
        "kvplan_options_set_host_capacity_bytes": (i32, [P, u64]),
        "kvplan_options_set_model_geometry": (i32, [P, i32, i32, i32]),
        "kvplan_options_set_model_fingerprint": (i32, [P, C.c_char_p]),
        "kvplan_options_set_skip_model_check": (i32, [P, i32]),
        "kvplan_options_set_require_gpu": (i32, [P, i32]),
        "kvplan_runtime_abi_version": (u32, []),
        "kvplan_runtime_backend_name": (C.c_char_p, [P]),
        "kvplan_runtime_create": (i32, [C.c_char_p, P, C.POINTER(P)]),
        "kvplan_runtime_destroy": (None, [P]),
        "kvplan_runtime_chunk_bytes": (u64, [P]),
        "kvplan_runtime_transfer_group_count": (u32, [P]),
        "kvplan_runtime_acquire_chunk": (i32, [P, C.POINTER(u32), u64, u64, C.POINTER(P)]),
        "kvplan_device_chunk_write": (i32, [P, P, u64, P, u64]),
        "kvplan_device_chunk_read": (i32, [P, P, u64, P, u64]),
        "kvplan_device_chunk_release": (i32, [P, P]),
        "kvplan_runtime_store": (i32, [P, P, P, C.POINTER(P)]),
        "kvplan_runtime_lookup": (i32, [P, C.POINTER(u32), u64, C.POINTER(i32), u64,
                                        C.POINTER(u64)]),
        "kvplan_runtime_load": (i32, [P, C.POINTER(u32), u64, u64, C.POINTER(P)]),
        "kvplan_runtime_evict": (i32, [P, u64, i32]),
        "kvplan_runtime_chunk_keys": (i32, [P, C.POINTER(u32), u64, C.POINTER(u64), u64,
                                            C.POINTER(u64)]),
        "kvplan_transfer_wait": (i32, [P]),
        "kvplan_transfer_chunk_count": (u64, [P]),
        "kvplan_transfer_take_chunk": (i32, [P, u64, C.POINTER(P)]),
        "kvplan_transfer_destroy": (None, [P]),
        "kvplan_runtime_refusals": (u64, [P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def check(lib, status, what):
    if status != OK:
        raise RuntimeError(f"{what}: status {status}: "
                           f"{lib.kvplan_last_error_message().decode()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.environ.get("KVPLAN_RUNTIME_LIB"),
                    help="path to libkvplan_runtime.so (or set KVPLAN_RUNTIME_LIB)")
    ap.add_argument("--plan", required=True, help="a kvplan plan.json")
    ap.add_argument("--model-geometry", metavar="LAYERS,KV_HEADS,HEAD_DIM",
                    help="the served model's KV geometry, checked against the plan")
    ap.add_argument("--model-fingerprint", metavar="HEX",
                    help="the served model's fingerprint, checked against the plan's")
    ap.add_argument("--skip-model-check", action="store_true",
                    help="use the plan without checking it against the served model")
    ap.add_argument("--require-gpu", action="store_true",
                    help="fail unless device memory is on a GPU (default: host stands in)")
    ap.add_argument("--chunks", type=int, default=3)
    args = ap.parse_args()
    if not args.lib:
        ap.error("--lib or KVPLAN_RUNTIME_LIB is required")
    geometry = None
    if args.model_geometry:
        try:
            geometry = [int(x) for x in args.model_geometry.split(",")]
        except ValueError:
            geometry = []
        if len(geometry) != 3:
            ap.error(f"--model-geometry: expected LAYERS,KV_HEADS,HEAD_DIM, "
                     f"got '{args.model_geometry}'")
    lib = load_library(args.lib)
    if lib.kvplan_runtime_abi_version() < 2:
        sys.exit(f"{args.lib}: C API version {lib.kvplan_runtime_abi_version()}, need 2")

    opt = C.c_void_p()
    check(lib, lib.kvplan_options_create(C.byref(opt)), "options")
    if geometry:
        check(lib, lib.kvplan_options_set_model_geometry(opt, *geometry), "model geometry")
    if args.model_fingerprint:
        check(lib, lib.kvplan_options_set_model_fingerprint(opt, args.model_fingerprint.encode()),
              "model fingerprint")
    check(lib, lib.kvplan_options_set_skip_model_check(opt, int(args.skip_model_check)),
          "skip model check")
    check(lib, lib.kvplan_options_set_require_gpu(opt, int(args.require_gpu)), "require GPU")
    chunk_tokens = 256
    check(lib, lib.kvplan_options_set_chunk_tokens(opt, chunk_tokens), "chunk tokens")
    rt = C.c_void_p()
    # Capacities in chunks are set after the plan tells us the chunk size: create once to ask.
    check(lib, lib.kvplan_options_set_device_capacity_bytes(opt, 256 << 20), "device")
    check(lib, lib.kvplan_options_set_host_capacity_bytes(opt, 256 << 20), "host")
    check(lib, lib.kvplan_runtime_create(args.plan.encode(), opt, C.byref(rt)), "create")
    chunk_bytes = lib.kvplan_runtime_chunk_bytes(rt)
    lib.kvplan_runtime_destroy(rt)
    check(lib, lib.kvplan_options_set_device_capacity_bytes(opt, args.chunks * chunk_bytes),
          "device")
    check(lib, lib.kvplan_options_set_host_capacity_bytes(opt, 4 * args.chunks * chunk_bytes),
          "host")
    check(lib, lib.kvplan_runtime_create(args.plan.encode(), opt, C.byref(rt)), "create")
    lib.kvplan_options_destroy(opt)
    print(f"plan {args.plan}: chunk of {chunk_tokens} tokens = {chunk_bytes} bytes in "
          f"{lib.kvplan_runtime_transfer_group_count(rt)} transfer groups; device memory: "
          f"{lib.kvplan_runtime_backend_name(rt).decode()}")

    rng = random.Random(1)
    n_tokens = args.chunks * chunk_tokens + 17
    tokens = (C.c_uint32 * n_tokens)(*[rng.randrange(50000) for _ in range(n_tokens)])
    payloads = []
    # Store: produce each chunk's pages on the "device" and copy them to the pinned host tier.
    for i in range(args.chunks):
        chunk = C.c_void_p()
        check(lib, lib.kvplan_runtime_acquire_chunk(rt, tokens, n_tokens, i, C.byref(chunk)),
              "acquire")
        data = bytes(rng.randrange(256) for _ in range(min(chunk_bytes, 4096)))
        data = (data * (chunk_bytes // len(data) + 1))[:chunk_bytes]
        payloads.append(data)
        buf = C.create_string_buffer(data, chunk_bytes)
        check(lib, lib.kvplan_device_chunk_write(rt, chunk, 0, buf, chunk_bytes), "write")
        t = C.c_void_p()
        check(lib, lib.kvplan_runtime_store(rt, chunk, None, C.byref(t)), "store")
        check(lib, lib.kvplan_transfer_wait(t), "store wait")
        lib.kvplan_transfer_destroy(t)
        check(lib, lib.kvplan_device_chunk_release(rt, chunk), "release")

    # Drop the device copies so the load really comes from the host tier.
    keys = (C.c_uint64 * args.chunks)()
    n_keys = C.c_uint64()
    check(lib, lib.kvplan_runtime_chunk_keys(rt, tokens, n_tokens, keys, args.chunks,
                                             C.byref(n_keys)), "keys")
    for key in keys:
        check(lib, lib.kvplan_runtime_evict(rt, key, 1), "evict device copy")  # 1 = device
    tiers = (C.c_int32 * args.chunks)()
    prefix = C.c_uint64()
    check(lib, lib.kvplan_runtime_lookup(rt, tokens, n_tokens, tiers, args.chunks,
                                         C.byref(prefix)), "lookup")
    print(f"lookup: prefix {prefix.value} chunks, tiers "
          f"{[TIER_NAMES[t] for t in tiers]}, {n_tokens - prefix.value * chunk_tokens} "
          f"tokens to recompute")
    assert prefix.value == args.chunks and all(t == 2 for t in tiers), "expected host hits"

    t = C.c_void_p()
    check(lib, lib.kvplan_runtime_load(rt, tokens, n_tokens, args.chunks, C.byref(t)), "load")
    check(lib, lib.kvplan_transfer_wait(t), "load wait")
    n_loaded = lib.kvplan_transfer_chunk_count(t)
    mismatches = 0
    for i in range(n_loaded):
        chunk = C.c_void_p()
        check(lib, lib.kvplan_transfer_take_chunk(t, i, C.byref(chunk)), "take")
        out = C.create_string_buffer(chunk_bytes)
        check(lib, lib.kvplan_device_chunk_read(rt, chunk, 0, out, chunk_bytes), "read")
        if out.raw != payloads[i]:
            mismatches += sum(a != b for a, b in zip(out.raw, payloads[i]))
        check(lib, lib.kvplan_device_chunk_release(rt, chunk), "release")
    lib.kvplan_transfer_destroy(t)
    print(f"load: {n_loaded} chunks, {mismatches} byte mismatches, "
          f"{lib.kvplan_runtime_refusals(rt)} refusals")
    lib.kvplan_runtime_destroy(rt)
    return 0 if n_loaded == args.chunks and mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
