"""kvplan: per-layer mixed-precision KV-cache plans, from Python.

The objects are kvplan's C++ ones (nanobind): a plan is validated exactly as the CLI validates it,
formats pack to the bytes the runtime stores, and tune/profile/search run the same pipeline with
the CLI's flags as keyword arguments (``max_bytes_per_token=6480`` is ``--max-bytes-per-token
6480``). Errors are ``kvplan.InputError`` (a ``ValueError``; the CLI's exit code 2) for bad input
and ``kvplan.Error`` otherwise, with the CLI's one-line message.

    import kvplan
    plan = kvplan.Plan.load("plan.json")
    plan.bytes_per_token, [layer.pair for layer in plan.layers]
    kvplan.estimate(plan, contexts=[8192]).contexts[0].bytes
    packed = kvplan.pack("q4_0", rows)            # float32 [..., 64] -> uint8 [..., 36]
    tuned = kvplan.tune("model.gguf", max_bytes_per_token=6480, threads=2)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Optional, Union

# An installed wheel carries configs/ (calibration texts, model presets) beside the module; the
# C++ side finds it through KVPLAN_CONFIG_DIR. A build tree uses the checkout's, compiled in.
_configs = Path(__file__).with_name("configs")
if _configs.is_dir():
    os.environ.setdefault("KVPLAN_CONFIG_DIR", str(_configs))

from ._kvplan import (  # noqa: E402
    ContextBytes,
    Error,
    Format,
    InputError,
    LayerCache,
    MemoryEstimate,
    Plan,
    PlanLayer,
    Profile,
    QuantSettings,
    Runtime,
    Tokenizer,
    TunedPlan,
    __version__,
    _profile,
    _search,
    _tune,
    estimate,
    formats,
    pack,
    unpack,
)

__all__ = [
    "ContextBytes", "Error", "Format", "InputError", "LayerCache", "MemoryEstimate", "Plan",
    "PlanLayer", "Profile", "QuantSettings", "Runtime", "Tokenizer", "TunedPlan", "__version__", "estimate", "formats",
    "pack", "profile", "search", "tune", "unpack",
]

PathLike = Union[str, os.PathLike]


def _cli_flags(options: dict[str, Any]) -> list[str]:
    """Keyword arguments as the CLI's flags: ``max_bytes_per_token=6480`` -> ``--max-bytes-per-token
    6480``; ``True`` is a bare flag, ``False``/``None`` leave it out, a list is comma-joined."""
    args: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def profile(model: PathLike, **options: Any) -> Profile:
    """``kvplan profile``: each layer's sensitivity to every candidate format. `options` are the
    profile flags (prompts, formats, candidates, mode, group_size, max_tokens, threads, ...)."""
    return _profile(model, _cli_flags(options))


def search(profile: Profile, model: PathLike, *, calibration: Optional[PathLike] = None,
           **options: Any) -> TunedPlan:
    """``kvplan search``: the plan under a budget from a profile, validated on the model. `options`
    are the search flags (max_bytes_per_token, max_bits, engine, seed, selection, report, ...)."""
    return _search(profile, model, _cli_flags(options), calibration)


def tune(model: PathLike, *, profile_out: Optional[PathLike] = None, **options: Any) -> TunedPlan:
    """``kvplan tune``: profile + search + validate. `options` are the flags of both; the profile is
    written to `profile_out` as soon as it exists when given."""
    return _tune(model, _cli_flags(options), profile_out)
