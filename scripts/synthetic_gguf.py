#!/usr/bin/env python3
"""Writes a GGUF shaped like Llama-3.1-8B (32 layers, hidden 4096, 32 query / 8 KV heads,
FFN 14336, vocabulary 128256, RoPE base 500000 with llama3 frequency factors) whose matrices are
random Q4_K super-blocks (the output matrix Q6_K, as in llama.cpp's Q4_K_M) and whose norms are
ones: a model of the real size and layout for measuring memory and speed, with no tokenizer and no
meaning. Deterministic for a seed. Streams one tensor at a time (gguf-py's GGUFWriter), so writing
it needs little memory.

  python3 scripts/synthetic_gguf.py OUT.gguf [--layers 32] [--seed 1]
"""
import argparse
import math

import numpy as np
import gguf

HIDDEN, FFN, HEADS, KV_HEADS, VOCAB = 4096, 14336, 32, 8, 128256
HEAD_DIM = HIDDEN // HEADS
ROPE_BASE = 500000.0
QK_K = 256
Q4_K_BYTES, Q6_K_BYTES = 144, 210


def llama3_rope_factors(factor=8.0, low=1.0, high=4.0, original_context=8192):
    """Llama 3.1's per-frequency RoPE divisors (its published rope_scaling formula)."""
    out = []
    for i in range(HEAD_DIM // 2):
        wavelength = 2 * math.pi * ROPE_BASE ** (2 * i / HEAD_DIM)
        if wavelength < original_context / high:
            out.append(1.0)
        elif wavelength > original_context / low:
            out.append(factor)
        else:
            smooth = (original_context / wavelength - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def f16_bytes(value, n):
    return np.full(n, value, dtype=np.float16).view(np.uint8).reshape(n, 2)


def q4_k(rng, rows, cols):
    """Random Q4_K rows: codes and 6-bit sub-scales at random, the f16 scale d = 2e-4 and the
    scale of the mins dmin = 7.5 d, so that values average about zero with a spread of ~0.03."""
    blocks = rows * cols // QK_K
    b = rng.integers(0, 256, size=(blocks, Q4_K_BYTES), dtype=np.uint8)
    b[:, 0:2] = f16_bytes(2e-4, blocks)
    b[:, 2:4] = f16_bytes(1.5e-3, blocks)
    return b.reshape(rows, cols // QK_K * Q4_K_BYTES)


def q6_k(rng, rows, cols):
    blocks = rows * cols // QK_K
    b = rng.integers(0, 256, size=(blocks, Q6_K_BYTES), dtype=np.uint8)
    b[:, 208:210] = f16_bytes(2e-5, blocks)
    return b.reshape(rows, cols // QK_K * Q6_K_BYTES)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("synthetic Llama-3.1-8B shape (random Q4_K weights)")
    w.add_block_count(a.layers)
    w.add_context_length(131072)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)

    # (name, numpy shape [rows, cols], kind); written in this order.
    tensors = [("token_embd.weight", (VOCAB, HIDDEN), "q4_k"),
               ("rope_freqs.weight", (HEAD_DIM // 2,), "f32"),
               ("output_norm.weight", (HIDDEN,), "ones")]
    for l in range(a.layers):
        b = f"blk.{l}."
        tensors += [(b + "attn_norm.weight", (HIDDEN,), "ones"),
                    (b + "attn_q.weight", (HIDDEN, HIDDEN), "q4_k"),
                    (b + "attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "q4_k"),
                    (b + "attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "q4_k"),
                    (b + "attn_output.weight", (HIDDEN, HIDDEN), "q4_k"),
                    (b + "ffn_norm.weight", (HIDDEN,), "ones"),
                    (b + "ffn_gate.weight", (FFN, HIDDEN), "q4_k"),
                    (b + "ffn_up.weight", (FFN, HIDDEN), "q4_k"),
                    (b + "ffn_down.weight", (HIDDEN, FFN), "q4_k")]
    tensors.append(("output.weight", (VOCAB, HIDDEN), "q6_k"))

    kinds = {"q4_k": (gguf.GGMLQuantizationType.Q4_K, Q4_K_BYTES),
             "q6_k": (gguf.GGMLQuantizationType.Q6_K, Q6_K_BYTES)}
    for name, shape, kind in tensors:
        if kind in kinds:
            qtype, block_bytes = kinds[kind]
            rows, cols = shape
            byte_shape = (rows, cols // QK_K * block_bytes)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), rows * byte_shape[1], qtype)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * shape[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    for name, shape, kind in tensors:
        if kind == "q4_k":
            data = q4_k(rng, *shape)
        elif kind == "q6_k":
            data = q6_k(rng, *shape)
        elif kind == "f32":
            data = llama3_rope_factors()
        else:
            data = np.ones(shape, dtype=np.float32)
        w.write_tensor_data(data)
    w.close()


if __name__ == "__main__":
    main()
