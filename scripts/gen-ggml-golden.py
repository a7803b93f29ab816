#!/usr/bin/env python3
"""Regenerates tests/formats/data/ggml_golden.json: reference bytes of ggml's block formats.

The expected bytes come from gguf-py (`pip install gguf numpy`), ggml's own Python reference
implementation of its quantizers — an implementation independent of kvplan's C++ code. Inputs are
fixed pseudo-random rows (several distributions and edge cases), stored in the JSON as f32 bit
patterns so the C++ test feeds exactly the same floats. Run only to refresh the golden file.
"""
import json
import sys

import numpy as np
import gguf.quants as q
from gguf import GGMLQuantizationType as T


def rows():
    rng = np.random.default_rng(20261129)
    out = [
        rng.standard_normal(64),
        rng.standard_normal(128) * 3.0,
        rng.uniform(0.1, 2.0, 64),               # all positive: min != 0 matters for q4_1/q5_1
        -rng.uniform(0.1, 2.0, 64),              # all negative
        rng.standard_normal(64) * 1e-3,
        rng.standard_normal(32) * 40.0,
        np.concatenate([np.zeros(32), rng.standard_normal(32)]),  # an all-zero block
        np.round(rng.standard_normal(64) * 4) / 4,                # values on a grid: rounding ties
        rng.laplace(size=96) * 2.0,                                # heavy tails, outliers
    ]
    return [r.astype(np.float32) for r in out]


def main():
    formats = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1,
               "mxfp4": T.MXFP4}
    cases = []
    for row in rows():
        case = {"input_f32_bits": [int(v) for v in row.view(np.uint32)], "expected": {}}
        for name, t in formats.items():
            case["expected"][name] = bytes(q.quantize(row.reshape(1, -1), t).flatten()).hex()
        cases.append(case)
    json.dump({"source": "gguf-py quants.quantize", "cases": cases}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
