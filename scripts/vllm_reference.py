#!/usr/bin/env python3
"""Reference data for kvplan's vLLM formats (TurboQuant, int4/int8_per_token_head), from vLLM's own
code (run by scripts/vllm-reference.sh, which fetches the vLLM wheel and a torch + triton venv).

It imports three files of the vLLM wheel unchanged:
- model_executor/layers/quantization/turboquant/centroids.py: get_centroids(d, bits), the
  Lloyd-Max codebooks vLLM solves at run time. They become src/formats/turboquant_codebooks.h.
- v1/attention/ops/triton_turboquant_store.py: the Triton store kernels, run on the CPU by
  Triton's interpreter (TRITON_INTERPRET=1). Their slot bytes for fixed rows become
  tests/formats/data/turboquant_golden.json (FP8 key bytes: torch's float8_e4m3fn cast, see main).
- v1/attention/ops/int4_per_token_head.py: _get_rht_signs (the randomized Hadamard transform's
  signs, drawn from torch's generator with a fixed seed) become src/formats/vllm_rht_signs.h, and
  reshape_and_cache_int4 (its CPU rotation, then the Triton write kernel run by the interpreter)
  gives tests/formats/data/int4_per_token_head_golden.json.
- v1/attention/ops/triton_reshape_and_cache_flash.py: _reshape_cache_per_token_head with int8
  caches (int8_per_token_head), run by the interpreter, gives
  tests/formats/data/int8_per_token_head_golden.json.
Only imports are stubbed: vllm.triton_utils (Triton itself), the TurboQuant decode module's
_use_fp8_e4b15 (0: E4M3FN keys, as on Hopper and later GPUs), vllm.platforms (a CUDA-less
platform), vllm.utils.math_utils.largest_power_of_2_divisor (n & -n, as vLLM's) and the attention
helpers the int4 read path imports (never run here), and quant_utils / kv_cache_interface (FP8
limits and the KVQuantMode enum the per-token-head store imports; only its int8 path runs here). The rotation PiT and the
midpoints are built as vLLM's backend builds them (turboquant_attn.py: Sylvester Hadamard / sqrt(d),
midpoints (c[:-1] + c[1:]) / 2 of the f32 centroids).

  python3 scripts/vllm_reference.py VLLM_ROOT VLLM_VERSION
"""
import importlib.util
import json
import math
import os
import struct
import sys
import types

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ROOT, VERSION = sys.argv[1], sys.argv[2]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMS = [8, 16, 32, 64, 128, 256, 512]
PRESETS = {  # vLLM's TQ_PRESETS (turboquant/config.py): key bits (8 = FP8 keys), value bits
    "turboquant_k8v4": (8, 4, "tq_fp8", "tq_int4"),
    "turboquant_4bit_nc": (4, 4, "tq_mse4", "tq_int4"),
    "turboquant_k3v4_nc": (3, 4, "tq_mse3", "tq_int4"),
    "turboquant_3bit_nc": (3, 3, "tq_mse3", "tq_int3"),
}


def stub_imports():
    for name in ["vllm", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.ops", "vllm.utils"]:
        sys.modules[name] = types.ModuleType(name)
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(
        is_rocm=lambda: False, is_xpu=lambda: False, is_cuda=lambda: False,
        is_cuda_alike=lambda: False, fp8_dtype=lambda: torch.float8_e4m3fn,
        has_device_capability=lambda *a: False)
    sys.modules[platforms.__name__] = platforms
    math_utils = types.ModuleType("vllm.utils.math_utils")
    math_utils.largest_power_of_2_divisor = lambda n: n & (-n)
    sys.modules[math_utils.__name__] = math_utils
    helpers = types.ModuleType("vllm.v1.attention.ops.triton_attention_helpers")
    for name in ["apply_alibi_to_score", "apply_softcap", "cdiv_fn", "compute_kv_seq_mask",
                 "compute_tile_loop_bounds", "init_softmax_M", "load_qq_bias_tile",
                 "resolve_seq_and_query_len", "softmax_step", "store_segm_reduce_scalars"]:
        setattr(helpers, name, None)
    sys.modules[helpers.__name__] = helpers
    unified = types.ModuleType("vllm.v1.attention.ops.triton_unified_attention")
    unified.reduce_segments = None
    sys.modules[unified.__name__] = unified
    utils = types.ModuleType("vllm.triton_utils")
    utils.tl, utils.triton = tl, triton
    sys.modules[utils.__name__] = utils
    decode = types.ModuleType("vllm.v1.attention.ops.triton_turboquant_decode")
    decode._use_fp8_e4b15 = lambda device=0: 0
    sys.modules[decode.__name__] = decode
    quant_utils = types.ModuleType("vllm.model_executor.layers.quantization.utils.quant_utils")
    quant_utils.FP8_DTYPE = torch.float8_e4m3fn
    quant_utils.get_fp8_min_max = lambda: (-448.0, 448.0)
    sys.modules[quant_utils.__name__] = quant_utils
    interface = types.ModuleType("vllm.v1.kv_cache_interface")
    interface.KVQuantMode = types.SimpleNamespace(INT4_PER_TOKEN_HEAD=4, INT8_PER_TOKEN_HEAD=2)
    interface.is_quantized_kv_cache = lambda dtype: dtype not in ("auto", "float16", "bfloat16")
    sys.modules[interface.__name__] = interface


def load(name, relative):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, relative))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def f32_bits(values):
    return [int(b) for b in np.asarray(values, dtype=np.float32).view(np.uint32)]


def write_codebooks(centroids):
    def table(bits):
        rows = []
        for d in DIMS:
            vals = ", ".join(float(v).hex() + "f" for v in centroids[(d, bits)])
            rows.append(f"    /* d = {d} */ {{{vals}}}")
        return ",  \\\n".join(rows)

    text = f"""// Generated by scripts/vllm-reference.sh from vLLM {VERSION}'s own
// model_executor/layers/quantization/turboquant/centroids.py (get_centroids): do not edit.
// The Lloyd-Max codebooks vLLM's TurboQuant keys use, 2^bits centroids for N(0, 1/d) as f32,
// for every head_dim d = 8 ... 512 (powers of two). tests/formats/turboquant_test.cpp re-solves
// them with a solver of its own and checks every bit.
#pragma once

// clang-format off
#define KVPLAN_TQ_CENTROIDS_3 {{  \\
{table(3)}}}
#define KVPLAN_TQ_CENTROIDS_4 {{  \\
{table(4)}}}
// clang-format on
"""
    with open(os.path.join(REPO, "src/formats/turboquant_codebooks.h"), "w") as f:
        f.write(text)


def write_rht_signs(int4):
    rows = []
    for d in DIMS:
        signs = int4._get_rht_signs(d, 0, torch.device("cpu")).tolist()
        bits = sum(1 << i for i, v in enumerate(signs) if v < 0)
        words = ", ".join(f"0x{(bits >> (32 * w)) & 0xFFFFFFFF:08x}u" for w in range((d + 31) // 32))
        rows.append(f"    /* d = {d} */ {{{words}}}")
    body = ",  \\\n".join(rows)
    text = f"""// Generated by scripts/vllm-reference.sh from vLLM {VERSION}'s own
// v1/attention/ops/int4_per_token_head.py (_get_rht_signs(d, 0)): do not edit.
// The signs of the randomized Hadamard transform vLLM's int4_per_token_head applies before
// quantizing, drawn from torch's CPU generator with a fixed seed: bit i of a row (32 per word,
// lowest first) set means sign -1 on element i, for d = 8 ... 512 (powers of two).
#pragma once

// clang-format off
#define KVPLAN_VLLM_RHT_SIGNS {{  \\
{body}}}
// clang-format on
"""
    with open(os.path.join(REPO, "src/formats/vllm_rht_signs.h"), "w") as f:
        f.write(text)


def per_token_head_golden(fmt, code_bytes, cache_dtype, store, rng, source):
    """Golden rows of a per-(token, head) format: `store` writes one token's K and V into a
    one-block paged cache of `cache_dtype` (code_bytes(d) per row) and f32 scale caches, as vLLM's
    store does; a row is its codes, then its f32 scale."""
    cases = []
    for d in DIMS:
        for name, k, v in rows(d, rng):
            key_cache = torch.zeros(1, 16, 1, code_bytes(d), dtype=cache_dtype)
            value_cache = torch.zeros(1, 16, 1, code_bytes(d), dtype=cache_dtype)
            k_scale = torch.zeros(1, 16, 1, dtype=torch.float32)
            v_scale = torch.zeros(1, 16, 1, dtype=torch.float32)
            store(torch.from_numpy(k).reshape(1, 1, d), torch.from_numpy(v).reshape(1, 1, d),
                  key_cache, value_cache, k_scale, v_scale)
            key_row = key_cache[0, 0, 0].numpy().tobytes() + k_scale[0, 0].numpy().tobytes()
            value_row = value_cache[0, 0, 0].numpy().tobytes() + v_scale[0, 0].numpy().tobytes()
            cases.append({"head_dim": d, "rows": name, "key_f32_bits": f32_bits(k),
                          "value_f32_bits": f32_bits(v), "key_row": key_row.hex(),
                          "value_row": value_row.hex()})
    path = os.path.join(REPO, f"tests/formats/data/{fmt}_golden.json")
    with open(path, "w") as f:
        json.dump({"source": f"vLLM {VERSION} (pip wheel): {source}; regenerate with "
                             "scripts/vllm-reference.sh",
                   "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} {fmt} rows to {path}")


def int4_golden(int4, rng):
    def store(k, v, key_cache, value_cache, k_scale, v_scale):
        int4.reshape_and_cache_int4(k, v, key_cache, value_cache,
                                    torch.tensor([0], dtype=torch.int32),
                                    k_scale_cache=k_scale, v_scale_cache=v_scale)
    per_token_head_golden(
        "int4_per_token_head", lambda d: d // 2, torch.uint8, store, rng,
        "v1/attention/ops/int4_per_token_head.py reshape_and_cache_int4 (f32 rows: its CPU "
        "rotation; the Triton write kernel run by Triton's interpreter)")


def int8_golden(flash, rng):
    def store(k, v, key_cache, value_cache, k_scale, v_scale):
        flash.triton_reshape_and_cache_flash_per_token_head_quant(
            k, v, key_cache, value_cache, k_scale, v_scale, torch.tensor([0], dtype=torch.int64),
            kv_quant_mode=2)
    per_token_head_golden(
        "int8_per_token_head", lambda d: d, torch.int8, store, rng,
        "v1/attention/ops/triton_reshape_and_cache_flash.py _reshape_cache_per_token_head with "
        "int8 caches, run by Triton's interpreter")


def hadamard(d):
    h = torch.tensor([[1.0]])
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(d)


def rows(d, rng):
    zeros = np.zeros(d)
    ramp = np.linspace(-1.0, 1.0, d)
    out = [
        ("normal", rng.standard_normal(d), rng.standard_normal(d)),
        ("keys x20, values x0.05", rng.standard_normal(d) * 20.0, rng.standard_normal(d) * 0.05),
        ("outliers", rng.laplace(size=d) * 3.0, rng.laplace(size=d)),
        ("large keys (FP8 saturates)", rng.standard_normal(d) * 300.0, rng.standard_normal(d)),
        ("zero key, constant value", zeros, zeros + 0.75),
        ("ramp", ramp, ramp[::-1] * 2.0),
    ]
    return [(name, k.astype(np.float32), v.astype(np.float32)) for name, k, v in out]


def main():
    stub_imports()
    centroids_mod = load("tq_centroids", "vllm/model_executor/layers/quantization/turboquant/centroids.py")
    store = load("tq_store", "vllm/v1/attention/ops/triton_turboquant_store.py")

    centroids = {}
    for d in DIMS:
        for bits in (3, 4):
            centroids[(d, bits)] = centroids_mod.get_centroids(d, bits).tolist()
    write_codebooks(centroids)

    rng = np.random.default_rng(20261202)
    cases = []
    for d in DIMS:
        pit = hadamard(d)
        for name, k, v in rows(d, rng):
            case = {"head_dim": d, "rows": name, "key_f32_bits": f32_bits(k),
                    "value_f32_bits": f32_bits(v), "slots": {}}
            for preset, (kb, vb, kfmt, vfmt) in PRESETS.items():
                key_fp8 = kb == 8
                mse_bits = vb if key_fp8 else kb  # config.py: FP8 keys fall back to value bits
                c = centroids_mod.get_centroids(d, mse_bits)
                mid = (c[:-1] + c[1:]) / 2
                kps = d if key_fp8 else math.ceil(d * kb / 8) + 2
                slot = kps + math.ceil(d * vb / 8) + 4
                slot += slot % 2
                cache = torch.zeros(1, 16, 1, slot, dtype=torch.uint8)
                store.triton_turboquant_store(
                    torch.from_numpy(k).reshape(1, 1, d), torch.from_numpy(v).reshape(1, 1, d),
                    cache, torch.tensor([0], dtype=torch.int32), pit, mid, mse_bits, kps, vb,
                    key_fp8=key_fp8)
                slot_bytes = bytes(cache[0, 0, 0].tolist())
                if key_fp8:
                    # Triton's interpreter misrounds E4M3 (values rounding up into the next binade
                    # get the lower binade's exponent; beyond 448 it returns other finite values
                    # or NaN), so FP8 key bytes come from torch's float8_e4m3fn cast instead; the
                    # GPU's satfinite saturation (beyond +-448) is checked by hand in the C++ test.
                    if np.abs(k).max() > 448:
                        continue
                    fp8 = torch.from_numpy(k).to(torch.float8_e4m3fn).view(torch.uint8)
                    slot_bytes = bytes(fp8.tolist()) + slot_bytes[d:]
                case["slots"][preset] = {"key_format": kfmt, "value_format": vfmt,
                                         "slot": slot_bytes.hex()}
            cases.append(case)
    golden = {
        "source": f"vLLM {VERSION} (pip wheel): turboquant/centroids.py and "
                  "v1/attention/ops/triton_turboquant_store.py run by Triton's interpreter; "
                  "regenerate with scripts/vllm-reference.sh",
        "cases": cases,
    }
    path = os.path.join(REPO, "tests/formats/data/turboquant_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    slots = sum(len(c["slots"]) for c in cases)
    print(f"wrote src/formats/turboquant_codebooks.h and {slots} slots to {path}")

    int4 = load("int4_per_token_head", "vllm/v1/attention/ops/int4_per_token_head.py")
    write_rht_signs(int4)
    int4_golden(int4, np.random.default_rng(20261203))
    flash = load("reshape_and_cache_flash", "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py")
    int8_golden(flash, np.random.default_rng(20261204))


if __name__ == "__main__":
    main()
