"""kvplan.tune / profile / search from Python: the CLI's pipeline with the CLI's flags, so the same
inputs give the same plan as `kvplan tune`, and bad flags fail as the CLI's do."""
import json
import subprocess

import pytest

import kvplan

# Short windows of the default selection and report texts keep the test quick (tests/cli's tune).
FLAGS = dict(num_prompts=8, max_tokens=64, population=16, generations=40, ctx=128, max_bits=8,
             threads=2)


def cli_args(flags):
    return [a for k, v in flags.items() for a in ("--" + k.replace("_", "-"), str(v))]


def layers(plan_json):
    return [(l["key"], l["value"]) for l in plan_json["layers"]]


def test_tune_gives_the_cli_plan(tmp_path, kvplan_binary, stories):
    tuned = kvplan.tune(stories, profile_out=tmp_path / "profile.json", **FLAGS)
    assert isinstance(tuned.plan, kvplan.Plan) and tuned.profile.complete
    assert (tmp_path / "profile.json").is_file()
    assert tuned.plan.bytes_per_token <= 320 + 1e-9  # 8 effective bits of 320 values per token
    subprocess.run([str(kvplan_binary), "-q", "tune", "--model", str(stories), "-o",
                    str(tmp_path / "cli.json"), *cli_args(FLAGS)], check=True, capture_output=True)
    cli = json.loads((tmp_path / "cli.json").read_text())
    ours = json.loads(tuned.plan.to_json())
    assert layers(ours) == layers(cli)
    assert ours["quality"]["mean_kl"] == cli["quality"]["mean_kl"]
    assert tuned.plan.quality.mean_kl == cli["quality"]["mean_kl"]
    assert tuned.plan.quality.best_uniform.mean_kl > 0
    headroom = tuned.plan.quality.headroom
    assert headroom.ratio == cli["quality"]["allocation_headroom"]["ratio"]
    assert 0 < headroom.best_plan_predicted <= headroom.best_uniform_predicted

    # search() on the saved profile: the same plan again.
    searched = kvplan.search(kvplan.Profile.load(tmp_path / "profile.json"), stories,
                             **{k: v for k, v in FLAGS.items()
                                if k not in ("num_prompts", "max_tokens", "threads")})
    assert layers(json.loads(searched.plan.to_json())) == layers(cli)


def test_profile_runs_the_asked_candidates(stories):
    profile = kvplan.profile(stories, num_prompts=2, max_tokens=32, formats=["int4", "int8"],
                             threads=2)
    assert profile.complete and profile.n_layers == 5
    # Each format on keys alone and on values alone (the other side exact), plus the pair anchors.
    assert {"int4/f32", "f32/int4", "int8/f32", "f32/int8"} <= set(profile.candidates)
    assert all(set(c.replace("/", " ").split()) <= {"int4", "int8", "f32", "KV4", "KV8"}
               for c in profile.candidates)


def test_bad_flags_fail_like_the_cli(stories):
    with pytest.raises(kvplan.InputError, match="--no-such-flag"):
        kvplan.tune(stories, no_such_flag=3)
    with pytest.raises(kvplan.InputError, match="--group-size"):
        kvplan.profile(stories, group_size=0)
    with pytest.raises(kvplan.InputError, match="int5"):
        kvplan.profile(stories, formats=["int5"])
    with pytest.raises(kvplan.InputError, match="absent.gguf"):
        kvplan.tune(stories.parent / "absent.gguf", max_bits=8)
