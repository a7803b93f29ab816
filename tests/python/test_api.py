"""kvplan's Python API against the CLI it wraps: the same registry, the same validation and
messages, the same estimates, the same bytes, the same plans."""
import json
import subprocess

import numpy as np
import pytest

import kvplan


def run_cli(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def test_formats_are_the_cli_registry(kvplan_binary):
    listed = json.loads(run_cli(kvplan_binary, "formats", "--json", "--head-dim", "64"))["formats"]
    formats = kvplan.formats()
    assert [f.name for f in formats] == [row["name"] for row in listed]
    for f, row in zip(formats, listed):
        assert f.id == row["id"] and f.nominal_bits == row["nominal_bits"]
        assert f.searched_by_default == row["searched_by_default"]
        assert f.engines == row["engines"]
        if "bytes_per_row" in row and not f.name.endswith("_kivi"):
            assert f.row_bytes(64) == row["bytes_per_row"]
    assert kvplan.Format.parse("fp8") == kvplan.Format.parse("fp8_e4m3")


def test_pack_unpack_round_trip_and_shapes():
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((5, 3, 64)).astype(np.float32)
    packed = kvplan.pack("q8_0", rows)
    assert packed.dtype == np.uint8 and packed.shape == (5, 3, 68)  # 2 blocks of 2 + 32 bytes
    back = kvplan.unpack("q8_0", packed, 64)
    assert back.shape == rows.shape
    # q8_0: per block of 32, d = absmax / 127 stored as f16: |error| <= d / 2 + 127 |d - f16(d)|
    # <= d (1/2 + 127 * 2^-11).
    blocks = np.abs(rows.reshape(5, 3, 2, 32)).max(axis=-1, keepdims=True) / 127
    err = np.abs(back - rows).reshape(5, 3, 2, 32)
    assert (err <= blocks * (0.5 + 127 / 2048)).all()
    assert err.max() > 0
    # f32 keeps every bit; float64 input is converted on the way in.
    exact = kvplan.unpack("f32", kvplan.pack("f32", rows.astype(np.float64)), 64)
    assert np.array_equal(exact, rows)
    # The same row packs to the same bytes whatever the batch around it.
    assert np.array_equal(kvplan.pack("tq_mse3", rows)[2, 1], kvplan.pack("tq_mse3", rows[2, 1]))


def test_pack_bad_input_is_input_error():
    rows = np.zeros((2, 48), dtype=np.float32)
    with pytest.raises(kvplan.InputError, match="q4_0"):
        kvplan.pack("q4_0", rows)  # 48 values: not whole blocks of 32
    with pytest.raises(ValueError, match="unknown format 'int5'"):
        kvplan.pack("int5", rows)
    with pytest.raises(kvplan.InputError, match="last axis has 10"):
        kvplan.unpack("q8_0", np.zeros((2, 10), dtype=np.uint8), 64)
    with pytest.raises(kvplan.InputError, match="group_size"):
        kvplan.pack("int4", rows, group_size=0)
    with pytest.raises(kvplan.InputError, match="scalar"):
        kvplan.pack("f16", np.float32(1.0))


def test_plan_load_matches_the_file(reference_plan):
    plan = kvplan.Plan.load(reference_plan)
    data = json.loads(reference_plan.read_text())
    assert plan.n_layers == len(data["layers"]) == 30
    assert [(l.key, l.value) for l in plan.layers] == [(l["key"], l["value"]) for l in data["layers"]]
    assert plan.quantization.group_size == data["quantization"]["group_size"]
    assert plan.bytes_per_token == pytest.approx(data["summary"]["bytes_per_token"])
    assert plan.geometry[0] == (3, 64, 0)
    again = kvplan.Plan.loads(plan.to_json())
    assert again.fingerprint == plan.fingerprint
    # The search's results, typed.
    q = plan.quality
    assert q.validated and q.mean_kl == data["quality"]["mean_kl"]
    assert q.best_uniform.kv == data["quality"]["best_uniform"]["kv"]
    assert q.best_uniform.ratio == pytest.approx(data["quality"]["best_uniform"]["ratio"])
    measured = [(b.kv, b.mean_kl) for b in plan.baselines if b.mean_kl is not None]
    assert measured == [(b["kv"], b["mean_kl"]) for b in data["baselines"] if "mean_kl" in b]
    assert len(measured) > 0


def test_plan_bad_inputs_name_file_and_field(tmp_path, reference_plan):
    with pytest.raises(kvplan.InputError) as missing:
        kvplan.Plan.load(tmp_path / "absent.json")
    assert missing.value.code == "not found" and "absent.json" in str(missing.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    with pytest.raises(kvplan.InputError, match="broken.json"):
        kvplan.Plan.load(broken)
    data = json.loads(reference_plan.read_text())
    data["layers"][3]["key"] = "int5"
    bad_format = tmp_path / "bad_format.json"
    bad_format.write_text(json.dumps(data))
    with pytest.raises(kvplan.InputError, match="bad_format.json.*int5"):
        kvplan.Plan.load(bad_format)
    data = json.loads(reference_plan.read_text())
    data["schema"] = "kvplan.plan/v9"
    bad_schema = tmp_path / "bad_schema.json"
    bad_schema.write_text(json.dumps(data))
    with pytest.raises(kvplan.InputError, match="schema"):
        kvplan.Plan.load(bad_schema)
    # One line, like the CLI's.
    assert "\n" not in str(missing.value)


def test_plan_refuses_another_model(reference_plan):
    plan = kvplan.Plan.load(reference_plan)
    plan.check_model("SmolLM2", [(3, 64, 0)] * 30, "smollm2")
    with pytest.raises(kvplan.InputError, match="other.gguf"):
        plan.check_model("other", [(8, 128, 0)] * 32, "other.gguf")


def test_plan_save_writes_what_loads(tmp_path, reference_plan):
    plan = kvplan.Plan.uniform(kvplan.Plan.load(reference_plan), "q4_0/q4_0")
    assert {l.pair for l in plan.layers} == {"q4_0/q4_0"}
    plan.save(tmp_path / "uniform.json")
    assert kvplan.Plan.load(tmp_path / "uniform.json").fingerprint == plan.fingerprint
    with pytest.raises(kvplan.InputError, match="int5"):
        kvplan.Plan.uniform(plan, "int5/int5")


def test_estimate_is_the_cli_estimate(kvplan_binary, smollm2, reference_plan):
    plan = kvplan.Plan.load(reference_plan)
    cli = json.loads(run_cli(kvplan_binary, "estimate", "--model", smollm2, "--plan",
                             reference_plan, "--context", "8192,1000", "--sequences", "3",
                             "--json"))["estimates"][0]
    est = kvplan.estimate(plan, contexts=[8192, 1000], sequences=3)
    assert est.bytes_per_token == cli["bytes_per_token"]
    assert est.equivalent_bits == pytest.approx(cli["equivalent_bits"])
    assert [(c.context, c.bytes, c.bf16_bytes) for c in est.contexts] == [
        (c["context"], c["bytes"], c["bf16_bytes"]) for c in cli["contexts"]]
    fits = kvplan.estimate(plan, contexts=[], available_bytes=64 << 20).max_context_per_sequence
    assert 0 < fits < (64 << 20) / plan.bytes_per_token + 64
    with pytest.raises(kvplan.InputError, match="sequences"):
        kvplan.estimate(plan, contexts=[10], sequences=0)


def test_tokenizer_is_the_harness_tokenizer(stories):
    tok = kvplan.Tokenizer.load(stories)
    ids = tok.encode("Once upon a time")
    assert ids[0] == tok.bos_id and len(ids) > 2
    assert tok.decode(ids[1:]).strip() == "Once upon a time"
    with pytest.raises(kvplan.InputError):
        kvplan.Tokenizer.load(stories.parent / "absent.gguf")
