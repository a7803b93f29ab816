"""kvplan.hf.PlanCache in transformers' own forward and generate(): exact formats give
transformers' exact logits (sliding windows included), quantized ones give the bytes kvplan packs
and the memory kvplan estimates, and a plan for another model is refused."""
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, DynamicCache

import kvplan
import kvplan.hf


def load(fixtures, family):
    model = AutoModelForCausalLM.from_pretrained(fixtures / family, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    return model


def decode_logits(model, ids, cache, steps):
    """Prefill `ids`, then feed `steps` greedy tokens one at a time; every step's last logits."""
    out = []
    with torch.no_grad():
        logits = model(ids, cache=cache, use_cache=True).logits[0, -1]
        out.append(logits)
        for _ in range(steps):
            token = logits.argmax().view(1, 1)
            logits = model(token, cache=cache, use_cache=True).logits[0, -1]
            out.append(logits)
    return torch.stack(out)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_exact_plan_gives_transformers_logits(hf_fixtures, family):
    # gemma3's fixture has a sliding window of 8 on layer 0: 70 tokens take the C++ cache past
    # two 32-token pages, which it frees, while attention still sees the whole window.
    model = load(hf_fixtures, family)
    plan = kvplan.Plan.for_model(hf_fixtures / family, "f32/f32")
    ids = torch.arange(3, 43).view(1, -1) % model.config.vocab_size
    cache = kvplan.hf.PlanCache(plan, model.config)
    ours = decode_logits(model, ids, cache, steps=30)
    theirs = decode_logits(model, ids, DynamicCache(config=model.config), steps=30)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    if family == "gemma3":
        assert cache.layers[0].rows[0].first_held_token > 0  # pages behind the window freed
        assert cache.layers[1].rows[0].first_held_token == 0


def test_cache_holds_the_packed_bytes(hf_fixtures):
    model = load(hf_fixtures, "llama")
    plan = kvplan.Plan.for_model(hf_fixtures / "llama", "int8/int4")
    cache = kvplan.hf.PlanCache(plan, model.config)
    ids = torch.arange(5, 69).view(1, -1)  # 64 tokens: two whole pages
    with torch.no_grad():
        model(ids, cache=cache, use_cache=True)
    layer = cache.layers[0]
    assert layer.get_seq_length() == 64
    # What attention reads is unpack(pack(rows)): the held keys are on the int8 grid already.
    keys = torch.from_numpy(layer.rows[0].keys())  # [heads, tokens, head_dim]
    again = kvplan.unpack("int8", kvplan.pack("int8", keys.numpy()), 16)
    np.testing.assert_array_equal(again, keys.numpy())  # already on the int8 grid
    # Memory: exactly the plan's pages, as kvplan.estimate counts them.
    assert cache.nbytes == kvplan.estimate(plan, contexts=[64]).contexts[0].bytes
    # Quantized, so not the exact logits, but close.
    with torch.no_grad():
        exact = model(ids).logits
        quant = model(ids, cache=kvplan.hf.PlanCache(plan, model.config)).logits
    assert not torch.equal(exact, quant)
    assert (exact.softmax(-1) - quant.softmax(-1)).abs().max() < 0.05


def test_kivi_residual_window_stays_exact(hf_fixtures):
    model = load(hf_fixtures, "llama")
    plan = kvplan.Plan.for_model(hf_fixtures / "llama", "int2_kivi/int2", mode="kivi",
                                 group_size=16, residual_length=32)
    cache = kvplan.hf.PlanCache(plan, model.config)
    with torch.no_grad():
        model(torch.arange(1, 41).view(1, -1), cache=cache, use_cache=True)
    row = cache.layers[0].rows[0]
    assert (row.n_tokens, row.n_committed) == (40, 32)  # 8 newest tokens in the exact window
    generated = model.generate(torch.arange(1, 41).view(1, -1),
                               cache=kvplan.hf.PlanCache(plan, model.config),
                               do_sample=False, max_new_tokens=8)
    assert generated.shape == (1, 48)


def test_plan_for_another_model_is_refused(hf_fixtures, reference_plan):
    model = load(hf_fixtures, "llama")
    with pytest.raises(kvplan.InputError, match="Smollm2.* has 30 layers but llama-fixture has 2"):
        kvplan.hf.PlanCache(kvplan.Plan.load(reference_plan), model.config, source="llama-fixture")
    gemma = load(hf_fixtures, "gemma3")
    llama_plan = kvplan.Plan.for_model(hf_fixtures / "llama", "int8/int8")
    with pytest.raises(kvplan.InputError, match="sliding window 8"):
        kvplan.hf.PlanCache(llama_plan, gemma.config)


def test_generate_with_the_plan(hf_fixtures):
    model = load(hf_fixtures, "gemma3")
    ids = torch.arange(7, 27).view(1, -1)
    exact_plan = kvplan.Plan.for_model(hf_fixtures / "gemma3", "f32/f32")
    ours = model.generate(ids, cache=kvplan.hf.PlanCache(exact_plan, model.config),
                          do_sample=False, max_new_tokens=24)
    theirs = model.generate(ids, do_sample=False, max_new_tokens=24)
    assert torch.equal(ours, theirs)
