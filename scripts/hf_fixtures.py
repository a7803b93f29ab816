#!/usr/bin/env python3
"""Builds tiny random-initialized HF transformers models of each family the harness runs and
records their logits, as the independent reference for tests/model/hf_families_test.cpp.

Run through scripts/make-hf-fixtures.sh (it pins torch/transformers in a cached venv):

    scripts/make-hf-fixtures.sh            # rewrites tests/fixtures/hf/<family>/

Each family directory holds what a real checkpoint holds (config.json, model.safetensors,
tokenizer.json, as transformers' save_pretrained writes them) plus reference.json (the text, its
token ids under the HF tokenizer, the versions used) and reference-logits.safetensors (logits
[tokens, vocab], f32, from the model's eager attention on the CPU).

The weights are drawn wider than transformers' initializer (which would leave every logit near
zero and any forward within 1e-4 of any other): unit-scale activations, attention scores of order
one, norm weights away from their neutral value, so a wrong convention moves the logits by far
more than the tests' tolerance.
"""
import argparse
import json
import math
import pathlib
import shutil
import tempfile

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 300
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
FFN = 96
LAYERS = 2
WINDOW = 8  # sliding window, well inside the reference text so the masks matter

# Training text for the byte-level BPE vocabulary (written for this script).
CORPUS = [
    "The harness runs a model on calibration text and measures how each layer reacts when its "
    "keys and values are stored in fewer bits.",
    "A plan lists one key format and one value format per layer, and the runtime packs the "
    "cache into exactly those bytes.",
    "Sliding-window layers keep only their most recent tokens; global layers keep every token "
    "of the conversation.",
    "Once upon a time a small robot counted the tokens in a long story, one page at a time, "
    "and wrote the numbers down.",
]
TEXT = (
    "Once upon a time the runtime packed the keys of every layer into fewer bits, and the story "
    "went on for many pages while the cache kept its tokens."
)
TOKENS = 40


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<pad>", "<s>", "</s>"],
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return tok


def common(**extra):
    base = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    base.update(extra)
    return base


# family -> (config class, model class, config fields, whether norm weights are stored as w for 1 + w)
FAMILIES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
              common(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), False),
    "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM,
                common(sliding_window=WINDOW), False),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM,
              common(tie_word_embeddings=True), False),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM,
              common(head_dim=HEAD_DIM, tie_word_embeddings=True), False),
    "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM,
             common(sliding_window=WINDOW), False),
    "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM,
               common(head_dim=HEAD_DIM, sliding_window=WINDOW, query_pre_attn_scalar=24,
                      attn_logit_softcapping=4.0, final_logit_softcapping=8.0,
                      hidden_activation="gelu_pytorch_tanh"), True),
    "gemma3": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM,
               common(head_dim=HEAD_DIM, sliding_window=WINDOW, query_pre_attn_scalar=24,
                      layer_types=["sliding_attention", "full_attention"],
                      rope_parameters={
                          "full_attention": {"rope_type": "linear", "factor": 8.0,
                                             "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                      }), True),
}


def randomize(model: torch.nn.Module, norm_offset: bool, generator: torch.Generator) -> None:
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1 and name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
            elif p.dim() == 1:  # RMS norm weights
                centre = 0.0 if norm_offset else 1.0
                p.copy_(centre + torch.randn(p.shape, generator=generator) * 0.3)
            elif "embed_tokens" in name:  # also the output matrix of the tied models
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))
            else:  # [out, in]: unit-scale outputs for unit-scale inputs
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))


def make_family(name: str, out_dir: pathlib.Path, tokenizer: Tokenizer, seed: int) -> None:
    config_class, model_class, fields, norm_offset = FAMILIES[name]
    config = config_class(**fields)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_class(config).to(torch.float32).eval()
    randomize(model, norm_offset, torch.Generator().manual_seed(seed))
    if config.tie_word_embeddings:
        model.tie_weights()

    ids = tokenizer.encode(TEXT).ids[:TOKENS]
    assert len(ids) == TOKENS, f"reference text gives {len(ids)} tokens"
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].to(torch.float32).contiguous()

    if out_dir.exists():
        shutil.rmtree(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        out_dir.mkdir(parents=True)
        for f in ("config.json", "model.safetensors"):
            shutil.copy(pathlib.Path(tmp) / f, out_dir / f)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    save_file({"logits": logits}, str(out_dir / "reference-logits.safetensors"))
    reference = {
        "family": name,
        "text": TEXT,
        "token_ids": ids,
        "logits_max_abs": float(logits.abs().max()),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "attention": "eager",
        "seed": seed,
    }
    (out_dir / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print(f"{name}: {len(ids)} tokens, |logits| max {reference['logits_max_abs']:.3f}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("tests/fixtures/hf"))
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    args = parser.parse_args()
    transformers.utils.logging.disable_progress_bar()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    tokenizer = build_tokenizer()
    for i, name in enumerate(sorted(FAMILIES)):
        if args.family and name not in args.family:
            continue
        make_family(name, args.out / name, tokenizer, seed=1000 + i)


if __name__ == "__main__":
    main()
