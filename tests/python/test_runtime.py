"""kvplan.Runtime from Python: a plan's chunks stored on the device and host tiers, spilled to
disk, looked up by token prefix and loaded back byte for byte; bad calls raise the CLI's errors."""
import numpy as np
import pytest

import kvplan


@pytest.fixture
def plan(reference_plan):
    return kvplan.Plan.load(reference_plan)


def payloads(rt, n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, rt.chunk_bytes, dtype=np.uint8) for _ in range(n)]


def test_host_tier_round_trip(plan):
    rt = kvplan.Runtime(plan, chunk_tokens=256, device_bytes=4 << 20, host_bytes=16 << 20)
    # SmolLM2's plan: 6,468 B/token x 256 tokens, every layer's pages back to back.
    assert rt.chunk_bytes == kvplan.estimate(plan, contexts=[256]).contexts[0].bytes
    tokens = list(range(1000, 1600))  # two whole chunks and a tail
    chunks = payloads(rt, 2)
    for i, p in enumerate(chunks):
        rt.store(tokens, i, p)
    for key in rt.keys(tokens):
        assert rt.evict(key, "device")
    assert rt.lookup(tokens) == (2, 512, ["host", "host"])
    back = rt.load(tokens)
    assert len(back) == 2 and all(np.array_equal(a, b) for a, b in zip(back, chunks))
    stats = rt.stats
    assert stats["hits_host"] == 2 and stats["bytes_host_to_device"] == 2 * rt.chunk_bytes
    # Another prefix misses from its first chunk on.
    assert rt.lookup([7] + tokens[1:]) == (0, 0, ["miss", "miss"])


def test_stored_chunk_bytes_sizes_the_host_tier(plan):
    slot = kvplan.Runtime.stored_chunk_bytes(plan, chunk_tokens=256)
    rt = kvplan.Runtime(plan, chunk_tokens=256, device_bytes=2 << 20, host_bytes=3 * slot)
    assert slot > rt.chunk_bytes  # headers and checksums beside the pages
    assert rt.host_chunks == 3
    assert kvplan.Runtime(plan, chunk_tokens=256, device_bytes=2 << 20,
                          host_bytes=3 * slot - 1).host_chunks == 2


def test_disk_tier_round_trip(plan, tmp_path):
    rt = kvplan.Runtime(plan, chunk_tokens=256, device_bytes=2 << 20, host_bytes=2 << 20,
                        disk_dir=tmp_path)
    assert rt.host_chunks == 1
    tokens = list(range(3000, 3768))  # three chunks: two spill from the one-chunk host tier
    chunks = payloads(rt, 3, seed=1)
    for i, p in enumerate(chunks):
        rt.store(tokens, i, p)
    for key in rt.keys(tokens):
        rt.evict(key, "device")
    prefix, _, tiers = rt.lookup(tokens)
    assert prefix == 3 and tiers.count("disk") == 2
    back = rt.load(tokens)
    assert all(np.array_equal(a, b) for a, b in zip(back, chunks))
    assert rt.stats["bytes_from_disk"] > 0


def test_bad_calls(plan, tmp_path):
    rt = kvplan.Runtime(plan, chunk_tokens=256, device_bytes=4 << 20, host_bytes=8 << 20)
    with pytest.raises(kvplan.InputError, match="chunk of this plan is"):
        rt.store(list(range(256)), 0, np.zeros(10, dtype=np.uint8))
    with pytest.raises(kvplan.InputError, match="1 whole chunks"):
        rt.store(list(range(300)), 1, np.zeros(rt.chunk_bytes, dtype=np.uint8))
    with pytest.raises(kvplan.InputError, match="tier 'gpu'"):
        rt.evict(0, "gpu")
    with pytest.raises(kvplan.InputError, match="chunk_tokens|block"):
        kvplan.Runtime(plan, chunk_tokens=100)
    with pytest.raises(kvplan.InputError, match="fingerprint"):
        kvplan.Runtime(plan, model_fingerprint="0123456789abcdef")
