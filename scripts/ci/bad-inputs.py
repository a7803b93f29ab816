#!/usr/bin/env python3
"""Runs the kvplan binary on crafted bad inputs and prints docs/bad-inputs.md's table: input kind,
what is wrong, the exact error line kvplan prints, and its exit code. With --check it also fails
(exit 1) unless every case exits with 2 and prints exactly one line on stderr (ARCHITECTURE §7).

  scripts/ci/bad-inputs.py --kvplan build/kvplan > /tmp/table.md     # regenerate the table
  scripts/ci/bad-inputs.py --kvplan build/kvplan --check              # the ctest

The inputs are written to a temporary directory from scratch (a tiny valid model in GGUF and in
safetensors form, then one defect at a time), so the table does not depend on downloaded models.
Paths in messages are shown relative to that directory.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- GGUF -------------------------------------------------------------------------------------
def gguf_str(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, payload):
    return gguf_str(key) + struct.pack("<I", vtype) + payload


def gguf(metadata, tensors, version=3, n_tensors=None, n_kv=None, magic=b"GGUF"):
    """metadata: list of raw key/value byte strings; tensors: (name, dims, type, offset, raw)."""
    out = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                              len(metadata) if n_kv is None else n_kv)
    out += b"".join(metadata)
    blob = b""
    for name, dims, ggml_type, offset, raw in tensors:
        out += gguf_str(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ggml_type, offset)
        blob += raw + b"\0" * (-len(raw) % 32)
    return out + b"\0" * (-len(out) % 32) + blob


def tiny_llama_metadata():
    u32 = lambda v: struct.pack("<I", v)
    return [gguf_kv("general.architecture", 8, gguf_str("llama")),
            gguf_kv("llama.block_count", 4, u32(1)),
            gguf_kv("llama.embedding_length", 4, u32(8)),
            gguf_kv("llama.attention.head_count", 4, u32(2))]


def norm_tensor(offset=0, ggml_type=0, dims=(8,)):
    return ("output_norm.weight", list(dims), ggml_type, offset, struct.pack("<8f", *([1.0] * 8)))


def gguf_cases():
    md = tiny_llama_metadata()
    yield "not GGUF (bad magic)", gguf(md, [norm_tensor()], magic=b"GGML")
    yield "unsupported version 4", gguf(md, [norm_tensor()], version=4)
    good = gguf(md, [norm_tensor()])
    yield "truncated to 20 bytes", good[:20]
    yield "truncated inside the metadata", good[:60]
    yield "metadata count 2^60", gguf(md, [norm_tensor()], n_kv=1 << 60)
    yield "tensor count 2^60", gguf(md, [norm_tensor()], n_tensors=1 << 60)
    huge_key = struct.pack("<Q", 1 << 62) + b"general.architecture"
    yield "string length 2^62", gguf([huge_key + struct.pack("<I", 8)] + md[1:], [norm_tensor()])
    yield "array of 2^40 strings", gguf(md + [gguf_kv("tokenizer.ggml.tokens", 9,
                                                      struct.pack("<IQ", 8, 1 << 40))], [])
    yield "unknown metadata value type 99", gguf(md + [gguf_kv("x", 99, b"")], [])
    yield "unknown tensor type 99", gguf(md, [norm_tensor(ggml_type=99)])
    yield "tensor data past the end", gguf(md, [norm_tensor(offset=4096)])
    yield "tensor with 5 dimensions", gguf(md, [norm_tensor(dims=(8, 1, 1, 1, 1))])
    u32 = lambda v: struct.pack("<I", v)
    yield "block_count 10^9", gguf([md[0], gguf_kv("llama.block_count", 4, u32(10**9))] + md[2:],
                                   [norm_tensor()])
    yield "head_count missing", gguf(md[:3], [norm_tensor()])


# ---- safetensors + config.json ------------------------------------------------------------------
def safetensors(header, blob=b"", length=None):
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(text) if length is None else length) + text + blob


CONFIG = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 8,
          "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16,
          "vocab_size": 4, "tie_word_embeddings": True}


def tiny_llama_safetensors():
    shapes = {"model.embed_tokens.weight": [4, 8], "model.norm.weight": [8],
              "model.layers.0.input_layernorm.weight": [8],
              "model.layers.0.self_attn.q_proj.weight": [8, 8],
              "model.layers.0.self_attn.k_proj.weight": [4, 8],
              "model.layers.0.self_attn.v_proj.weight": [4, 8],
              "model.layers.0.self_attn.o_proj.weight": [8, 8],
              "model.layers.0.post_attention_layernorm.weight": [8],
              "model.layers.0.mlp.gate_proj.weight": [16, 8],
              "model.layers.0.mlp.up_proj.weight": [16, 8],
              "model.layers.0.mlp.down_proj.weight": [8, 16]}
    header, blob = {}, b""
    for name, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        raw = struct.pack(f"<{n}f", *[0.01 * (i % 7) for i in range(n)])
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    return safetensors(header, blob)


def safetensors_cases():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    t = lambda **kw: {"w": dict({"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, **kw)}
    yield "shorter than the 8-byte length", b"\x10\x00"
    yield "header length past the end", safetensors(t(), f32, length=1 << 40)
    yield "header is not JSON", safetensors(b"{not json", f32)
    yield "header nested 100 levels", safetensors(b"[" * 100 + b"]" * 100, f32)
    yield "unknown dtype I7", safetensors(t(dtype="I7"), f32)
    yield "data_offsets past the data", safetensors(t(data_offsets=[0, 32]), f32)
    yield "data_offsets disagree with shape", safetensors(t(shape=[3]), f32)
    yield "two tensors overlap", safetensors(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F16", "shape": [4], "data_offsets": [8, 16]}}, f32)


def harness_cases():
    """A valid tiny model the harness must still refuse: (what, config overrides, environment)."""
    yield "a RoPE variant the harness lacks (YaRN)", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, {}
    yield "an architecture it does not run", {"model_type": "gpt_neox"}, {}
    yield "weights larger than the memory available", {}, {"KVPLAN_MEMORY_LIMIT": "1000"}


def config_cases():
    yield "not JSON", b"{\"model_type\": "
    missing = dict(CONFIG)
    del missing["num_attention_heads"]
    yield "num_attention_heads missing", json.dumps(missing)
    yield "hidden_size is a string", json.dumps(dict(CONFIG, hidden_size="8"))
    yield "num_hidden_layers 2^30", json.dumps(dict(CONFIG, num_hidden_layers=1 << 30))
    yield "rope_theta is an object", json.dumps(dict(CONFIG, rope_theta={}))
    yield "heads not a multiple of KV heads", json.dumps(dict(CONFIG, num_key_value_heads=3))
    yield "MLA (kv_lora_rank)", json.dumps(dict(CONFIG, kv_lora_rank=512))
    yield "number past DBL_MAX", b'{"model_type": "llama", "num_hidden_layers": 1e999}'


TOKENIZER = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<eos>": 3},
                       "merges": ["a b"]},
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}}


def tokenizer_cases():
    yield "not JSON", b'{"model": '
    yield "model.type WordPiece", json.dumps({**TOKENIZER, "model": {**TOKENIZER["model"], "type": "WordPiece"}})
    yield "token id 2^40", json.dumps({**TOKENIZER, "model": {**TOKENIZER["model"], "vocab": {"a": 1 << 40}}})
    yield "merge of an unknown token", json.dumps({**TOKENIZER, "model": {**TOKENIZER["model"], "merges": ["a z"]}})
    yield "regex that does not compile", json.dumps({**TOKENIZER, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"},
        {"type": "ByteLevel"}]}})
    yield "nested 10^5 levels", b"[" * 100000


# ---- plan.json / profile.json -------------------------------------------------------------------
def plan_cases():
    with open(os.path.join(ROOT, "configs", "plans", "minimax-m2.5-slot134.json")) as f:
        plan = json.load(f)
    yield "not JSON", b"{"
    yield "schema kvplan.plan/v9", json.dumps(dict(plan, schema="kvplan.plan/v9"))
    bad = json.loads(json.dumps(plan))
    bad["layers"][0]["key"] = "q3_k"
    yield "unknown format q3_k", json.dumps(bad)
    yield "num_layers disagrees with layers[]", json.dumps(dict(plan, layers=plan["layers"][:-1]))
    bad = json.loads(json.dumps(plan))
    bad["layers"][1]["key_bytes_per_token"] = 1
    yield "bytes per token disagree with the format", json.dumps(bad)
    bad = json.loads(json.dumps(plan))
    bad["quantization"]["group_size"] = 0
    yield "group_size 0", json.dumps(bad)
    bad = json.loads(json.dumps(plan))
    bad["layers"][0]["group"] = "first"
    yield "layer group is a string", json.dumps(bad)
    bad = json.loads(json.dumps(plan))
    bad["layers"][0]["key"], bad["layers"][0]["value"] = "int4", "int4_kivi"
    yield "a KIVI (per-channel key) format for values", json.dumps(bad)


def profile_cases():
    with open(os.path.join(ROOT, "tests", "fuzz", "corpus", "profile", "smollm2-2layers.json")) as f:
        prof = json.load(f)
    yield "not JSON", b"[1,"
    yield "schema kvplan.profile/v0", json.dumps(dict(prof, schema="kvplan.profile/v0"))
    bad = json.loads(json.dumps(prof))
    bad["model"]["num_layers"] = 1 << 40
    yield "num_layers 2^40", json.dumps(bad)
    bad = json.loads(json.dumps(prof))
    bad["layers"][0]["pairs"][0]["dkl"] = -1
    yield "negative dKL", json.dumps(bad)
    bad = json.loads(json.dumps(prof))
    bad["layers"][0]["pairs"][0]["pair"] = "KV3"
    yield "cell for a pair not among the candidates", json.dumps(bad)


# ---- running ------------------------------------------------------------------------------------
def run(kvplan, args, cwd, env=None):
    p = subprocess.run([kvplan] + args, cwd=cwd, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvplan", required=True)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    kvplan = os.path.abspath(args.kvplan)
    rows, problems = [], []
    with tempfile.TemporaryDirectory(prefix="kvplan-bad-inputs-") as tmp:
        def put(name, data):
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
            return name

        def case(kind, what, argv, env=None):
            code, err = run(kvplan, argv, tmp, env)
            lines = err.rstrip("\n").split("\n") if err.strip() else []
            shown = " / ".join(lines)
            rows.append((kind, what, shown, code))
            if code != 2 or len(lines) != 1:
                problems.append(f"{kind}: {what}: exit {code}, {len(lines)} stderr lines: {shown[:300]}")

        for i, (what, data) in enumerate(gguf_cases()):
            case("GGUF", what, ["inspect", "--model", put(f"g{i}.gguf", data)])
        for i, (what, data) in enumerate(safetensors_cases()):
            d = f"st{i}"
            put(f"{d}/config.json", json.dumps(CONFIG))
            put(f"{d}/model.safetensors", data)
            case("safetensors", what, ["inspect", "--model", d])
        for i, (what, data) in enumerate(config_cases()):
            d = f"cfg{i}"
            put(f"{d}/config.json", data)
            case("config.json", what, ["estimate", "--model", f"{d}/config.json", "--context", "4K"])
        model = tiny_llama_safetensors()
        for i, (what, data) in enumerate(tokenizer_cases()):
            d = f"tok{i}"
            put(f"{d}/config.json", json.dumps(CONFIG))
            put(f"{d}/model.safetensors", model)
            put(f"{d}/tokenizer.json", data)
            case("tokenizer.json", what, ["generate", "--model", d, "--prompt", "ab", "--max-tokens", "1"])
        for i, (what, overrides, env) in enumerate(harness_cases()):
            d = f"harness{i}"
            put(f"{d}/config.json", json.dumps(dict(CONFIG, **overrides)))
            put(f"{d}/model.safetensors", model)
            case("model (harness)", what, ["-q", "eval", "--model", d, "--prompts", put(f"{d}/p.txt", "ab")],
                 env)
        for i, (what, data) in enumerate(plan_cases()):
            case("plan.json", what, ["export", "--plan", put(f"plan{i}.json", data), "--to", "vllm"])
        for i, (what, data) in enumerate(profile_cases()):
            case("profile.json", what, ["search", "--profile", put(f"profile{i}.json", data),
                                        "--model", "missing.gguf", "-o", "out.json"])

    print("| input | bad input | error (stderr, exactly as printed) | exit |")
    print("|---|---|---|---:|")
    for kind, what, err, code in rows:
        err = err.replace("|", "\\|")
        print(f"| {kind} | {what} | `{err}` | {code} |")
    if problems:
        print("\nbad-inputs: cases that did not give exit 2 with one line:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1 if args.check else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
