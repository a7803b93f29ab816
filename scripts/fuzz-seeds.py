#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from real files in this repository (the
committed plans, profile and model presets), the stories260K test model and small hand-made
fixtures in the shapes the tests use. Rerun after a format change; the files are committed.

  scripts/fuzz-seeds.py [--models ../shared/models]
"""
import argparse
import copy
import json
import os
import struct
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.path.join(root, "tests", "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def load(path):
    with open(os.path.join(root, path)) as f:
        return json.load(f)


def compact(j):
    return json.dumps(j, separators=(",", ":"), ensure_ascii=False)


def gguf_header_end(data):
    """Byte offset just past the tensor infos of a GGUF v2/v3 file (where padding to the data
    section begins)."""
    pos = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(t, pos):
        if t == 8:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        if t == 9:
            et, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(count):
                pos = skip_value(et, pos)
            return pos
        return pos + sizes[t]

    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        (t,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(t, pos + 4)
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        (nd,) = struct.unpack_from("<I", data, pos)
        pos += 4 + 8 * nd + 4 + 8
    return pos


def gguf_seeds(models):
    path = os.path.join(models, "stories260K.gguf")
    if not os.path.exists(path):
        print(f"fuzz-seeds: {path} missing; no GGUF seeds", file=sys.stderr)
        return
    data = open(path, "rb").read()
    end = gguf_header_end(data)
    # The header alone (metadata + tensor infos): the tensor data check refuses it, the metadata
    # path (config, tokenizer) reads it whole. The whole 1.2 MB file would slow every run down.
    write("gguf", "stories260K-header.gguf", data[:end])


def gguf_file(metadata, tensors, alignment=32):
    """A GGUF v3 file: metadata [(key, type, value)], tensors [(name, dims, ggml type, raw)]."""
    def s(text):
        b = text.encode()
        return struct.pack("<Q", len(b)) + b
    fmt = {4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}

    def value(t, v):
        if t == 8:
            return s(v)
        if t == 9:
            et, items = v
            return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
        return struct.pack(fmt[t], v)

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, t, v in metadata:
        out += s(key) + struct.pack("<I", t) + value(t, v)
    offset, blob = 0, b""
    for name, dims, ggml_type, raw in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ggml_type, offset)
        pad = -len(raw) % alignment
        blob += raw + b"\0" * pad
        offset += len(raw) + pad
    out += b"\0" * (-len(out) % alignment)
    return out + blob


def tiny_gguf_seed():
    tokens = ["h", "e", "l", "o", "\u0120", "he", "ll", "hell", "hello", "<|endoftext|>"]
    metadata = [
        ("general.architecture", 8, "llama"), ("general.name", 8, "tiny"),
        ("general.alignment", 4, 32),
        ("llama.block_count", 4, 1), ("llama.attention.head_count", 4, 2),
        ("llama.attention.head_count_kv", 4, 1), ("llama.embedding_length", 4, 8),
        ("llama.context_length", 4, 64), ("llama.feed_forward_length", 4, 16),
        ("llama.rope.freq_base", 6, 10000.0), ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
        ("tokenizer.ggml.model", 8, "gpt2"), ("tokenizer.ggml.pre", 8, "default"),
        ("tokenizer.ggml.tokens", 9, (8, tokens)),
        ("tokenizer.ggml.token_type", 9, (5, [1] * 9 + [3])),
        ("tokenizer.ggml.merges", 9, (8, ["h e", "l l", "he ll", "hell o"])),
        ("tokenizer.ggml.eos_token_id", 4, 9), ("tokenizer.ggml.add_bos_token", 7, False)]
    f32 = struct.pack("<8f", *[0.125 * i for i in range(8)])
    q8_0 = struct.pack("<e", 0.5) + bytes(range(32))  # one q8_0 block of 32
    write("gguf", "tiny-gpt2.gguf", gguf_file(metadata, [
        ("output_norm.weight", [8], 0, f32), ("token_embd.weight", [32, 1], 8, q8_0)]))


def safetensors(tensors, metadata=None):
    header, blob = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = compact(header).encode()
    text += b" " * (-len(text) % 8)  # HF pads the header to 8 bytes
    return struct.pack("<Q", len(text)) + text + blob


def safetensors_seeds():
    f32 = struct.pack("<6f", 0.5, -1.25, 2.0, 3.5, -0.75, 1.0)
    f16 = struct.pack("<4e", 0.5, -1.0, 2.0, 65504.0)
    bf16 = bytes.fromhex("3f80bf80400040c0")[::-1]  # four bfloat16 values, little-endian
    write("safetensors", "three-dtypes.safetensors", safetensors([
        ("model.norm.weight", "F32", [6], f32),
        ("model.embed_tokens.weight", "F16", [2, 2], f16),
        ("lm_head.weight", "BF16", [4], bf16)], {"format": "pt"}))
    write("safetensors", "scalar-and-empty.safetensors", safetensors([
        ("scalar", "F32", [], f32[:4]), ("empty", "F16", [0, 3], b"")]))


def config_seeds():
    for name in sorted(os.listdir(os.path.join(root, "configs", "models"))):
        if name.endswith(".json"):
            write("config", name, open(os.path.join(root, "configs", "models", name), "rb").read())
    base = load("configs/models/smollm2-135m.json")
    gemma = dict(base, model_type="gemma3_text", sliding_window=512, sliding_window_pattern=6,
                 head_dim=64, num_key_value_heads=[1] * base["num_hidden_layers"])
    write("config", "variant-sliding-pattern.json", compact(gemma))
    typed = dict(base, sliding_window=128,
                 layer_types=["sliding_attention", "full_attention"] * (base["num_hidden_layers"] // 2))
    write("config", "variant-layer-types.json", compact(typed))
    llama3 = dict(base, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8192})
    write("config", "variant-llama3-rope.json", compact({"model_type": "llava",
                                                         "text_config": llama3}))
    write("config", "variant-mla.json", compact(dict(base, kv_lora_rank=512)))


TOKENIZER = {
    "version": "1.0",
    "added_tokens": [{"id": 18, "content": "<|im_start|>", "special": True},
                     {"id": 19, "content": "<|im_end|>", "special": True},
                     {"id": 20, "content": "<|eos|>", "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}]},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
              "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "r": 6, "d": 7,
                        "he": 8, "ll": 9, "hell": 10, "hello": 11, "\u0120w": 12,
                        "\u0120wor": 13, "or": 14, "\u0120world": 15, "1": 16, "2": 17,
                        "\u0120worl": 21},
              "merges": ["l l", ["h", "e"], "he ll", "hell o", "\u0120 w", "o r", "\u0120w or",
                         "\u0120wor l", "\u0120worl d"]},
}
TOKENIZER_CONFIG = {
    "add_bos_token": False,
    "bos_token": {"content": "<|im_start|>", "lstrip": False},
    "eos_token": "<|eos|>",
    "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
}


def tokenizer_seeds():
    # Input = tokenizer.json, NUL, tokenizer_config.json (see tests/fuzz/fuzz_tokenizer.cpp).
    write("tokenizer", "bpe-with-config", compact(TOKENIZER) + "\0" + compact(TOKENIZER_CONFIG))
    split = copy.deepcopy(TOKENIZER)
    split["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"},
         "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"},
        {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False}]}
    split["model"]["ignore_merges"] = True
    write("tokenizer", "bpe-split-regex", compact(split))


def trimmed_plan(plan, n_layers):
    p = copy.deepcopy(plan)
    m = p["model"]
    m["num_layers"] = n_layers
    if isinstance(m["num_kv_heads"], list):
        m["num_kv_heads"] = m["num_kv_heads"][:n_layers]
    if "sliding_window" in m:
        m["sliding_window"] = m["sliding_window"][:n_layers]
    p["layers"] = p["layers"][:n_layers]
    p["pareto_front"] = p.get("pareto_front", [])[:1]
    p["baselines"] = p.get("baselines", [])[:1]
    return p


def plan_seeds():
    for path in ["configs/plans/minimax-m2.5-slot134.json", "data/reference/smollm2-135m/plan-4bit.json"]:
        plan = load(path)
        write("plan", os.path.basename(path).replace(".json", "-2layers.json"),
              json.dumps(trimmed_plan(plan, 2), indent=1))
    write("plan", "plan-3bit.json", open(os.path.join(root, "data/reference/smollm2-135m/plan-3bit.json"),
                                         "rb").read())


def profile_seeds():
    prof = load("data/reference/smollm2-135m/profile.json")
    keep = prof["candidates"][:3]
    p = copy.deepcopy(prof)
    p["model"]["num_layers"] = 2
    p["model"]["num_kv_heads"] = p["model"]["num_kv_heads"][:2]
    p["candidates"] = keep
    p["layers"] = [{"index": l["index"], "pairs": [c for c in l["pairs"] if c["pair"] in keep]}
                   for l in p["layers"][:2]]
    write("profile", "smollm2-2layers.json", json.dumps(p, indent=1))
    shard = copy.deepcopy(p)
    shard["shard"] = {"index": 1, "count": 2}
    shard["complete"] = False
    for l in shard["layers"]:
        l["pairs"] = [c for i, c in enumerate(l["pairs"])
                      if (l["index"] * len(keep) + keep.index(c["pair"])) % 2 == 1]
    write("profile", "smollm2-2layers-shard1of2.json", json.dumps(shard, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.join(root, "..", "shared", "models"))
    args = ap.parse_args()
    gguf_seeds(args.models)
    tiny_gguf_seed()
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    plan_seeds()
    profile_seeds()
    print(f"fuzz-seeds: wrote {corpus}")


if __name__ == "__main__":
    main()
