#!/usr/bin/env python3
"""Regenerates tests/formats/golden/kv_golden.json: packed bytes of the int, FP8 and iq4_nl formats
computed by a Python implementation written from the formats' definitions, not from kvplan's C++.

Definitions followed (kvplan's C++ lives in src/formats/kv_format_math.h and src/formats/float_convert.h;
this file does not translate it, it recomputes each rule its own way):
  * int8/int4/int2 (src/formats/kv_blocks.h, ARCHITECTURE.md section 3.1): per group of n values
    [f16 scale][f16 zero][codes], scale = (max - min) / (2^b - 1) and zero = min, each clamped to
    +-65504 and rounded to the nearest f16 (ties to even); codes are computed against those f16
    values: code = clamp(round((x - zero) / scale), 0, 2^b - 1), round = nearest, ties to even,
    0 when scale is 0; code i sits at bits [i*b, (i+1)*b) of the little-endian code bytes.
    x - zero and the division are f32 operations (as ggml's formulas are); exact rational
    arithmetic would pick the other code for about 1 in 7000 inputs within an ulp of a half step.
  * fp8_e4m3 / fp8_e5m2 (OCP 8-bit floating point spec, saturating conversion): the nearest
    representable value of x / scale (f32 division), ties to the even code; magnitudes above the
    largest finite value, infinities included, become that value (448 / 57344); NaN becomes
    sign | 0x7f. Chosen by enumerating all 256 codes and comparing exact rationals.
  * iq4_nl: llama.cpp's KV-cache quantizer quantize_row_iq4_nl_ref (ggml/src/ggml-quants.c),
    i.e. quantize_row_iq4_nl_impl with ntry = -1 and no importance weights: w = x^2; max = the
    first value of largest |x|; a block with amax < 1e-15 is d = 0 and all indices 0; otherwise
    indices are the codebook entries nearest to x * (1 / (max / -127)) (a midpoint goes to the
    larger entry), and d = sum(w*q*x) / sum(w*q*q) accumulated in f32 in value order; no scale
    search and no re-quantization with the final d.
f16 conversion uses Python's struct 'e' (IEEE binary16, round half to even), checked against
numpy's.

Inputs come from a 32-bit LCG (state = state * 1664525 + 1013904223 mod 2^32) turned into floats by
exact integer scaling, so tests/formats/kv_golden_test.cpp regenerates them bit for bit; the JSON
also stores every input's f32 bits. Run only to refresh the golden file:
    python3 -m venv .venv-golden && .venv-golden/bin/pip install numpy
    .venv-golden/bin/python tests/formats/golden/make_golden.py > tests/formats/golden/kv_golden.json
"""
import json
import math
import struct
import sys
from fractions import Fraction

import numpy as np

F32 = np.float32
LCG_A = 1664525
LCG_C = 1013904223


class Lcg:
    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def next(self):
        self.state = (self.state * LCG_A + LCG_C) & 0xFFFFFFFF
        return self.state


def exact_f32(value):
    """An integer times a power of two that float32 holds exactly (asserted)."""
    v = F32(value)
    assert Fraction(float(v)) == Fraction(value), value
    return v


def generate(spec):
    """The row a generator spec describes; every value is exactly representable (no rounding)."""
    rng = Lcg(spec["seed"])
    n = spec["n"]
    kind = spec["kind"]
    out = []
    for i in range(n):
        if kind == "uniform":  # (top `bits` bits + offset) * 2^exp
            u = rng.next() >> (32 - spec["bits"])
            out.append(exact_f32(Fraction(u + spec["offset"]) * Fraction(2) ** spec["exp"]))
        elif kind == "wide":  # signed 24-bit mantissa, exponent uniform in [emin, emax]
            m = (rng.next() >> 8) - (1 << 23)
            e = spec["emin"] + (rng.next() >> 16) % (spec["emax"] - spec["emin"] + 1)
            out.append(exact_f32(Fraction(m) * Fraction(2) ** (e - 23)))
        elif kind == "grid":  # (2j - count) * 2^(exp-1), j in [0, count]; each 32 holds both ends
            j = (rng.next() >> 8) % (spec["count"] + 1)
            if i % 32 == 0:
                j = 0
            elif i % 32 == 1:
                j = spec["count"]
            out.append(exact_f32(Fraction(2 * j - spec["count"]) * Fraction(2) ** (spec["exp"] - 1)))
        elif kind == "fp8ties":  # +-odd 6-bit integer * 2^e: many exact FP8 rounding ties
            m = 2 * ((rng.next() >> 8) % 32) + 1
            r = rng.next()
            e = spec["emin"] + (r >> 16) % (spec["emax"] - spec["emin"] + 1)
            sign = -1 if (r >> 8) & 1 else 1
            out.append(exact_f32(Fraction(sign * m) * Fraction(2) ** e))
        elif kind == "neartie":  # per 32: min, max = min + L*s, then values a step fraction of
            # .5 from a code, or one f32 ulp either side: lo = -a/16, s = b/1024 (both f16-exact)
            if i % 32 == 0:
                lo_units = -((rng.next() >> 8) % 512) * 128  # in units of 2^-11
                s_units = 2 * (1024 + (rng.next() >> 8) % 1024)
            r = rng.next()
            levels = spec["levels"]
            if i % 32 == 0:
                units = lo_units
            elif i % 32 == 1:
                units = lo_units + levels * s_units
            else:
                units = lo_units + (2 * ((r >> 8) % levels) + 1) * s_units // 2
            out.append(nudge(exact_f32(Fraction(units, 1 << 11)), i % 32 > 1 and (r >> 20) % 3))
        elif kind == "iq4mid":  # codebook entries and midpoints / 4, +-1 ulp; x[32k] = -127/4
            r = rng.next()
            k = 1 + (r >> 8) % 30  # even: entry k/2, odd: midpoint of entries (k-1)/2, (k+1)/2
            twice = 2 * IQ4_NL[k // 2] if k % 2 == 0 else IQ4_NL[k // 2] + IQ4_NL[k // 2 + 1]
            if i % 32 == 0:
                twice, k = -254, 0
            out.append(nudge(exact_f32(Fraction(twice, 8)), i % 32 > 0 and (r >> 20) % 3))
        else:
            raise ValueError(kind)
    for i in range(spec.get("zero_prefix", 0)):
        out[i] = F32(0.0)
    return np.array(out, dtype=F32)


def nudge(v, how):
    """v (how 0 or False), the next float32 down (1) or up (2)."""
    if not how:
        return v
    return np.nextafter(v, F32(-np.inf if how == 1 else np.inf), dtype=F32)


# ---- f16 ------------------------------------------------------------------------------------------
def f16_bits(v):
    v = float(v)
    if math.isnan(v):
        return 0x7E00 | (0x8000 if math.copysign(1.0, v) < 0 else 0)
    try:
        h = struct.unpack("<H", struct.pack("<e", v))[0]
    except OverflowError:  # rounds past 65504: infinity
        h = 0x7C00 | (0x8000 if v < 0 else 0)
    if not math.isinf(v):
        assert h == int(np.array([v], dtype=F32).astype(np.float16).view(np.uint16)[0]), v
    return h


def f16_value(h):
    return F32(struct.unpack("<e", struct.pack("<H", h))[0])


# ---- int8 / int4 / int2 ---------------------------------------------------------------------------
def int_group(x, bits):
    max_code = (1 << bits) - 1
    lo, hi = F32(np.min(x)), F32(np.max(x))
    scale_f32 = F32(F32(hi - lo) / F32(max_code))
    clamp = lambda v: F32(min(max(v, F32(-65504.0)), F32(65504.0)))
    scale_h, zero_h = f16_bits(clamp(scale_f32)), f16_bits(clamp(lo))
    scale, zero = f16_value(scale_h), f16_value(zero_h)
    codes = []
    for v in x:
        if scale > 0:
            t = F32(F32(v - zero) / scale)
            c = int(np.rint(t))  # ties to even
            codes.append(min(max(c, 0), max_code))
        else:
            codes.append(0)
    stream = 0
    for i, c in enumerate(codes):
        stream |= c << (i * bits)
    n_bytes = (len(x) * bits + 7) // 8
    return struct.pack("<HH", scale_h, zero_h) + stream.to_bytes(n_bytes, "little")


def int_row(x, bits, group):
    group = min(group, len(x))
    return b"".join(int_group(x[s:s + group], bits) for s in range(0, len(x), group))


# ---- FP8 ------------------------------------------------------------------------------------------
def fp8_table(exp_bits, man_bits, bias, max_code):
    """Exact positive value of every finite code up to max_code."""
    table = []
    for code in range(max_code + 1):
        e, m = code >> man_bits, code & ((1 << man_bits) - 1)
        if e == 0:
            v = Fraction(m, 1 << man_bits) * Fraction(2) ** (1 - bias)
        else:
            v = (1 + Fraction(m, 1 << man_bits)) * Fraction(2) ** (e - bias)
        table.append(v)
    return table


FP8 = {
    "fp8_e4m3": fp8_table(4, 3, 7, 0x7E),  # 0x7f is NaN, no infinities: max 448
    "fp8_e5m2": fp8_table(5, 2, 15, 0x7B),  # 0x7c is inf, 0x7d-0x7f NaN: max 57344
}


def fp8_code(v, table):
    v = float(v)
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    if math.isnan(v):
        return sign | 0x7F
    a = abs(v)
    if math.isinf(a) or Fraction(a) >= table[-1]:
        return sign | (len(table) - 1)
    a = Fraction(a)
    best = min(range(len(table)), key=lambda c: (abs(table[c] - a), c & 1))
    return sign | best


def fp8_row(x, name, scale):
    return bytes(fp8_code(F32(v / scale), FP8[name]) for v in x)


# ---- iq4_nl ---------------------------------------------------------------------------------------
IQ4_NL = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def iq4_index(al):
    # The entry nearest to al; exactly at a midpoint the larger entry wins. 2*al and the sums of
    # neighbours are exact, so this compares exact values.
    two = 2.0 * float(al)
    idx = 0
    for k in range(1, 16):
        if two >= IQ4_NL[k - 1] + IQ4_NL[k]:
            idx = k
    return idx


def iq4_nl_block(x):
    amax, mx = F32(0.0), F32(0.0)
    for v in x:
        if abs(v) > amax:
            amax, mx = F32(abs(v)), v
    if amax < F32(1e-15):
        return bytes(18)
    d0 = F32(mx / F32(-127.0))
    inv = F32(F32(1.0) / d0)
    idx, sumqx, sumq2 = [], F32(0.0), F32(0.0)
    for v in x:
        k = iq4_index(F32(inv * v))
        idx.append(k)
        q, w = F32(IQ4_NL[k]), F32(v * v)
        sumqx = F32(sumqx + F32(F32(w * q) * v))
        sumq2 = F32(sumq2 + F32(F32(w * q) * q))
    d = F32(sumqx / sumq2) if sumq2 > 0 else F32(0.0)
    qs = bytes(idx[j] | (idx[j + 16] << 4) for j in range(16))
    return struct.pack("<H", f16_bits(d)) + qs


def iq4_nl_row(x):
    return b"".join(iq4_nl_block(x[s:s + 32]) for s in range(0, len(x), 32))


# ---- cases ----------------------------------------------------------------------------------------
INT_FORMATS = {"int8": 8, "int4": 4, "int2": 2}
FIXED_GROUP = {f"{name}_g{g}": (bits, g) for name, bits in INT_FORMATS.items() for g in (64, 128)}
FP8_SCALES = [F32(1.0), F32(2.0**-7), F32(0.0123)]  # 1, a power of two, an inexact divisor

CASES = [
    {"name": "uniform", "kind": "uniform", "seed": 1, "n": 128, "bits": 24, "offset": -(1 << 23),
     "exp": -23},
    {"name": "wide", "kind": "wide", "seed": 2, "n": 128, "emin": -8, "emax": 6},
    {"name": "positive", "kind": "uniform", "seed": 3, "n": 128, "bits": 22, "offset": 1 << 20,
     "exp": -21},
    {"name": "zero-block", "kind": "uniform", "seed": 4, "n": 64, "bits": 24, "offset": -(1 << 23),
     "exp": -20, "zero_prefix": 32},
    {"name": "halves", "kind": "grid", "seed": 5, "n": 128, "count": 30, "exp": -1},
    {"name": "quarters", "kind": "grid", "seed": 6, "n": 128, "count": 510, "exp": -2},
    {"name": "tiny", "kind": "uniform", "seed": 7, "n": 64, "bits": 24, "offset": -(1 << 23),
     "exp": -40},
    {"name": "huge", "kind": "uniform", "seed": 8, "n": 64, "bits": 24, "offset": -(1 << 23),
     "exp": -6},
    {"name": "ragged", "kind": "uniform", "seed": 9, "n": 100, "bits": 24, "offset": -(1 << 23),
     "exp": -22},
    {"name": "fp8-ties", "kind": "fp8ties", "seed": 10, "n": 128, "emin": -18, "emax": 10},
    {"name": "near-ties-int8", "kind": "neartie", "seed": 11, "n": 128, "levels": 255},
    {"name": "near-ties-int4", "kind": "neartie", "seed": 12, "n": 128, "levels": 15},
    {"name": "near-ties-int2", "kind": "neartie", "seed": 13, "n": 128, "levels": 3},
    {"name": "iq4-midpoints", "kind": "iq4mid", "seed": 14, "n": 128},
]

# Special values for FP8, stored literally: zeros, infinities, NaN, values at and past the largest
# finite magnitudes, the smallest subnormals and the ties next to them, an f32 subnormal.
FP8_SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 448.0, -464.0, 480.0, 57344.0, -61440.0,
                65536.0, 2.0**-9, 2.0**-10, 3 * 2.0**-10, -(2.0**-10), 2.0**-16, 2.0**-17,
                3 * 2.0**-17, 1e-45, 240.0, 0.0625, -1.5, 17.0, 19.0, 1e30, -1e30, 2.0**-7,
                0.33333334, 7.5, 232.0, 0.001953125, 0.0029296875]


def expected_for(x, name):
    out = []
    n = len(x)
    for fmt, bits in INT_FORMATS.items():
        for g in (32, 48, 200):  # default, a group leaving a short tail, one clamped to the row
            out.append({"format": fmt, "group_size": g, "hex": int_row(x, bits, g).hex()})
    for fmt, (bits, g) in FIXED_GROUP.items():
        out.append({"format": fmt, "group_size": 32, "hex": int_row(x, bits, g).hex()})
    if n % 32 == 0:
        out.append({"format": "iq4_nl", "group_size": 32, "hex": iq4_nl_row(x).hex()})
    for fmt in FP8:
        for s in FP8_SCALES:
            out.append({"format": fmt, "group_size": 32, "fp8_scale_bits": int(s.view(np.uint32)),
                        "hex": fp8_row(x, fmt, s).hex()})
    return out


def main():
    cases = []
    for spec in CASES:
        x = generate(spec)
        gen = {k: v for k, v in spec.items() if k != "name"}
        cases.append({"name": spec["name"], "generator": gen,
                      "input_f32_bits": [int(v) for v in x.view(np.uint32)],
                      "expected": expected_for(x, spec["name"])})
    specials = np.array(FP8_SPECIALS, dtype=F32)
    cases.append({"name": "fp8-specials", "generator": {"kind": "literal"},
                  "input_f32_bits": [int(v) for v in specials.view(np.uint32)],
                  "expected": [{"format": fmt, "group_size": 32,
                                "fp8_scale_bits": int(s.view(np.uint32)),
                                "hex": fp8_row(specials, fmt, s).hex()}
                               for fmt in FP8 for s in FP8_SCALES[:2]]})
    # One line per input row and per expected row, so a regenerated file diffs line by line.
    w = sys.stdout.write
    w('{"source": "tests/formats/golden/make_golden.py",\n')
    w(f' "lcg": {json.dumps({"a": LCG_A, "c": LCG_C})},\n "cases": [\n')
    for ci, case in enumerate(cases):
        w(f'  {{"name": {json.dumps(case["name"])},\n')
        w(f'   "generator": {json.dumps(case["generator"])},\n')
        w(f'   "input_f32_bits": {json.dumps(case["input_f32_bits"])},\n')
        w('   "expected": [\n')
        for ei, e in enumerate(case["expected"]):
            w(f'    {json.dumps(e)}{"," if ei + 1 < len(case["expected"]) else ""}\n')
        w(f'   ]}}{"," if ci + 1 < len(cases) else ""}\n')
    w(" ]}\n")


if __name__ == "__main__":
    main()
