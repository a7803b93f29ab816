"""kvplan.hf: a transformers Cache that runs a kvplan plan.

``PlanCache(plan, model.config)`` is a layered ``transformers.Cache`` (transformers 5.x) whose layer
``l`` keeps its keys and values packed in the plan's formats for layer ``l`` — the real bytes, held
by kvplan's C++ cache (``kvplan.LayerCache``: the harness's pages, KIVI's residual window and
sliding windows included) — and hands attention the dequantized tensors, exactly what kvplan's own
attention reads. A prefill chunk attends over its own keys and values after quantization, as
llama.cpp and vLLM do (and as ``kvplan eval`` measures).

    import kvplan, kvplan.hf
    plan = kvplan.Plan.load("plan.json")
    cache = kvplan.hf.PlanCache(plan, model.config)
    out = model.generate(**inputs, cache=cache, max_new_tokens=32)
    cache.nbytes   # bytes the packed cache holds (= kvplan.estimate for the same tokens)

transformers and torch are needed for this module only; ``import kvplan`` does not need them.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from transformers.cache_utils import Cache, CacheLayerMixin

from . import InputError, LayerCache, Plan

__all__ = ["PlanCache", "PlanCacheLayer", "evaluate_kl", "model_geometry"]


def model_geometry(config: Any) -> list[tuple[int, int, int]]:
    """Per decoder layer (n_kv_heads, head_dim, sliding_window; 0 = full attention) of a
    transformers config, as kvplan's plans describe a model."""
    text = config.get_text_config(decoder=True)
    n_heads = text.num_attention_heads
    n_kv = getattr(text, "num_key_value_heads", None) or n_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // n_heads
    layer_types = getattr(text, "layer_types", None) or ["full_attention"] * text.num_hidden_layers
    window = getattr(text, "sliding_window", None) or 0
    return [(n_kv, head_dim, window if kind == "sliding_attention" else 0) for kind in layer_types]


def _interleave_halves(x: torch.Tensor) -> torch.Tensor:
    """[..., d] in transformers' RoPE order (x0..x_{d/2-1}, x_{d/2}..x_{d-1}) -> llama.cpp's
    interleaved pairs (x0, x_{d/2}, x1, x_{d/2+1}, ...)."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], 2, d // 2).transpose(-1, -2).reshape(x.shape)


def _split_halves(x: torch.Tensor) -> torch.Tensor:
    """The inverse of _interleave_halves."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], d // 2, 2).transpose(-1, -2).reshape(x.shape)


class PlanCacheLayer(CacheLayerMixin):
    """One decoder layer's KV in the plan's packed formats: one ``kvplan.LayerCache`` per batch row.
    ``keys``/``values`` are the tensors the last ``update`` returned (views for attention, not
    storage: the packed bytes are the storage)."""

    is_compileable = False
    is_croppable = False

    def __init__(self, plan: Plan, layer: int, sliding_window: int = 0,
                 keys_interleaved: bool = False):
        super().__init__()
        self.plan, self.layer = plan, layer
        self.keys_interleaved = keys_interleaved
        self.sliding_window = sliding_window
        self.is_sliding = sliding_window > 0
        self.rows: list[LayerCache] = []
        self.cumulative_length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device, self.dtype = key_states.device, key_states.dtype
        self.rows = [LayerCache(self.plan, self.layer) for _ in range(key_states.shape[0])]
        self.is_initialized = True

    def _first_visible(self, past: int) -> int:
        # A query at position `past` sees keys (past - window, past]: what the C++ cache still holds.
        return max(past - self.sliding_window + 1, 0) if self.is_sliding else 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        batch, heads, tokens, head_dim = key_states.shape
        if batch != len(self.rows):
            raise InputError(f"PlanCache layer {self.layer}: batch of {batch} rows, the cache holds "
                             f"{len(self.rows)}")
        first = self._first_visible(self.cumulative_length)
        if self.keys_interleaved:
            key_states = _interleave_halves(key_states)
        keys, values = [], []
        for b, row in enumerate(self.rows):
            # [heads, tokens, head_dim] -> [tokens, heads * head_dim] f32 rows, as kvplan appends.
            k = key_states[b].detach().transpose(0, 1).reshape(tokens, heads * head_dim)
            v = value_states[b].detach().transpose(0, 1).reshape(tokens, heads * head_dim)
            row.append(k.to(torch.float32).contiguous().cpu().numpy(),
                       v.to(torch.float32).contiguous().cpu().numpy())
            keys.append(torch.from_numpy(row.keys(first)))
            values.append(torch.from_numpy(row.values(first)))
        if self.keys_interleaved:
            keys = [_split_halves(k) for k in keys]
        self.cumulative_length += tokens
        self.keys = torch.stack(keys).to(device=self.device, dtype=self.dtype)
        self.values = torch.stack(values).to(device=self.device, dtype=self.dtype)
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        offset = self._first_visible(self.cumulative_length)
        return self.cumulative_length + query_length - offset, offset

    def get_seq_length(self) -> int:
        return self.cumulative_length

    def get_max_length(self) -> int:
        return self.sliding_window if self.is_sliding else -1

    def reset(self) -> None:
        for row in self.rows:
            row.clear()
        self.cumulative_length = 0
        self.keys = self.values = None

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("PlanCache keeps packed bytes per batch row; beam search is not "
                                  "supported")

    @property
    def nbytes(self) -> int:
        return sum(row.bytes_held for row in self.rows)


class PlanCache(Cache):
    """A transformers Cache whose layers hold K and V in a kvplan plan's packed formats.

    Refuses (``kvplan.InputError``) a plan for another model geometry, naming both, and a model
    whose sliding windows differ from the plan's.

    ``keys_interleaved``: pack each key row with its RoPE pairs interleaved, the channel order of
    llama.cpp's GGUF files for Llama-family models (their converter permutes Q and K; transformers
    undoes it when it loads such a GGUF). Block codecs group channels, so the same plan gives the
    same bytes as kvplan's harness on that GGUF only in that order; attention still gets transformers'
    order back. Channel-wise (KIVI) keys and all values are unaffected."""

    def __init__(self, plan: Plan, config: Any, source: Optional[str] = None,
                 keys_interleaved: bool = False):
        geometry = model_geometry(config)
        name = getattr(config, "name_or_path", "") or getattr(config, "model_type", "model")
        plan.check_model(name, geometry, source or name)
        for index, ((_, _, window), (_, _, plan_window)) in enumerate(zip(geometry, plan.geometry)):
            if window != plan_window:
                raise InputError(f"{source or name}: layer {index} has sliding window {window}, the "
                                 f"plan for {plan.model_name} says {plan_window}")
        self.plan = plan
        super().__init__(layers=[PlanCacheLayer(plan, l, window, keys_interleaved)
                                 for l, (_, _, window) in enumerate(geometry)])

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds: every layer's packed pages and its f32 staging rows (the chunk not
        yet due, KIVI's residual window)."""
        return sum(layer.nbytes for layer in self.layers)


def evaluate_kl(model: Any, tokens: Sequence[int], plan: Plan, *, ctx: int = 512,
                max_chunks: int = 0, bos_id: Optional[int] = None,
                keys_interleaved: bool = False) -> dict:
    """A plan in transformers under llama-perplexity's protocol, as ``kvplan eval`` measures it:
    `tokens` (BOS first) cut into chunks of `ctx`, each chunk's first token replaced by BOS and run
    from an empty cache, the second half scored. Returns mean KL(exact KV || the plan's cache) in
    nats, top-1 agreement, PPL with both, and the positions scored."""
    if ctx < 4:
        raise InputError(f"ctx {ctx}: expected at least 4 tokens")
    n_chunks = len(tokens) // ctx
    if max_chunks:
        n_chunks = min(n_chunks, max_chunks)
    if n_chunks == 0:
        raise InputError(f"{len(tokens)} tokens: fewer than one chunk of ctx {ctx}")
    bos = tokens[0] if bos_id is None else bos_id
    kl_sum = nll = nll_exact = 0.0
    same = n = 0
    half = ctx // 2
    for c in range(n_chunks):
        chunk = [bos] + list(tokens[c * ctx + 1:(c + 1) * ctx])
        ids = torch.tensor([chunk], device=model.device)
        targets = torch.tensor(chunk[half + 1:], device=model.device)
        with torch.no_grad():
            exact = model(ids, use_cache=False).logits[0, half:-1].double()
            cache = PlanCache(plan, model.config, keys_interleaved=keys_interleaved)
            quant = model(ids, cache=cache, use_cache=True).logits[0, half:-1].double()
        p_log, q_log = F.log_softmax(exact, dim=-1), F.log_softmax(quant, dim=-1)
        kl_sum += float((p_log.exp() * (p_log - q_log)).sum())
        nll -= float(q_log.gather(1, targets[:, None]).sum())
        nll_exact -= float(p_log.gather(1, targets[:, None]).sum())
        same += int((exact.argmax(-1) == quant.argmax(-1)).sum())
        n += exact.shape[0]
    return {"chunks": n_chunks, "scored": n, "mean_kl": kl_sum / n, "top1_agreement": same / n,
            "ppl": math.exp(nll / n), "ppl_exact": math.exp(nll_exact / n)}
