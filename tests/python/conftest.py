"""Paths the Python tests share: the kvplan binary, the checkout, the test models (ctest passes them
in the environment, tests/python/CMakeLists.txt)."""
import os
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("KVPLAN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def _env_dir(name: str, default: Path) -> Path:
    # $NAME, else what ctest passes as NAME_DEFAULT (tests/python/CMakeLists.txt), else `default`.
    return Path(os.environ.get(name) or os.environ.get(name + "_DEFAULT") or default)


def _models_dir() -> Path:
    return _env_dir("KVPLAN_TEST_MODELS", SOURCE.parent / "shared" / "models")


def _model(name: str, *dirs: Path) -> Path:
    for d in dirs:
        if (d / name).is_file():
            return d / name
    if os.environ.get("KVPLAN_REQUIRE_MODELS") == "1":
        pytest.fail(f"{name} not found in {', '.join(map(str, dirs))} and KVPLAN_REQUIRE_MODELS=1")
    pytest.skip(f"{name} not found in {', '.join(map(str, dirs))}")


@pytest.fixture(scope="session")
def kvplan_binary() -> Path:
    return Path(os.environ.get("KVPLAN_BINARY", SOURCE / "build" / "kvplan"))


@pytest.fixture(scope="session")
def stories() -> Path:
    return _model("stories260K.gguf", _models_dir())


@pytest.fixture(scope="session")
def smollm2() -> Path:
    cache = Path(os.environ.get("KVPLAN_CACHE", Path.home() / ".cache" / "kvplan"))
    return _model("SmolLM2-135M-Instruct.Q4_1.gguf", _models_dir(), cache)


@pytest.fixture(scope="session")
def sample_text() -> Path:
    data = _env_dir("KVPLAN_TEST_DATA", SOURCE.parent / "shared" / "data")
    path = data / "tinystories-valid-sample.txt"
    if not path.is_file():
        pytest.fail(f"{path} not found")
    return path


@pytest.fixture(scope="session")
def reference_plan() -> Path:
    return SOURCE / "data" / "reference" / "smollm2-135m" / "plan-6480.json"


@pytest.fixture(scope="session")
def hf_fixtures() -> Path:
    return SOURCE / "tests" / "fixtures" / "hf"
