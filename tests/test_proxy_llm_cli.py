"""Simon Willison's `llm` CLI (PyPI `llm`: the `clients` extra) as a real third-party client
of the proxy, run as a subprocess, in front of the real llama-server with the tiny model and
a 1,024-token window. Its OpenAI-compatible models are declared in an
`extra-openai-models.yaml` in a temporary `LLM_USER_PATH`: one speaks Chat Completions, one
the Responses API (`responses: true`), so both endpoints serve a client that is not ours.
`llm -c` sends the whole logged conversation each turn, so it outgrows the window."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chatcli.chat.tinymodel import TRAINING_TEXT
from tests import test_proxy_llama as base
from tests.test_proxy_llama import counter, recoveries

pytest.importorskip("llm", reason="pip install -e '.[clients]'")

# The proxy of tests/test_proxy_llama.py, in front of tests/servers.py's `llama_1024`.
proxy = base.proxy

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

MODELS = ("via-chat", "via-responses")
LLM = shutil.which("llm", path=str(Path(sys.executable).parent)) or "llm"


@pytest.fixture(scope="module")
def user_path(proxy: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llm-user")
    entries = [
        f"- model_id: {model}\n  model_name: any\n  api_base: {proxy}/v1\n"
        + ("  responses: true\n" if model == "via-responses" else "")
        for model in MODELS
    ]
    (path / "extra-openai-models.yaml").write_text("".join(entries))
    return path


def llm(user_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LLM_USER_PATH": str(user_path)}
    env.pop("OPENAI_API_KEY", None)  # an api_base model sends a dummy key, never this one
    done = subprocess.run(
        [LLM, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def words(turn: int, n: int = 200) -> str:
    """About 350 tokens of the model's training text, numbered (each turn its own prompt)."""
    text = TRAINING_TEXT.split()
    return f"{turn}: " + " ".join(text[(turn * 37 + i) % len(text)] for i in range(n))


@pytest.mark.parametrize("model", MODELS)
def test_a_conversation_that_outgrows_the_window_is_answered(
    proxy: str, user_path: Path, model: str
) -> None:
    before = recoveries(proxy)
    llm(user_path, "-m", model, "-o", "max_tokens", "16", "--no-stream", words(0))
    for turn in range(1, 5):  # about 350 tokens a turn: the window is full by the fourth
        answer = llm(user_path, "-c", "-o", "max_tokens", "16", words(turn))
        assert answer.stdout.strip()
    assert recoveries(proxy) > before  # the proxy cut the logged history to fit
    log = llm(user_path, "logs", "-n", "5", "--json").stdout
    assert log.count('"conversation_id"') == 5  # one conversation, five answered turns


@pytest.mark.parametrize("model", MODELS)
def test_an_escalated_answer_streams_as_one(proxy: str, user_path: Path, model: str) -> None:
    escalations = counter(proxy, "chatcli_proxy_escalations_total")
    answer = llm(user_path, "-m", model, "-o", "max_tokens", "4", "Tell me a long story.")
    assert counter(proxy, "chatcli_proxy_escalations_total") == escalations + 2
    assert len(answer.stdout.split()) > 4  # more than the first call's 4 tokens, one answer


@pytest.mark.parametrize("model", MODELS)
def test_an_unrecoverable_prompt_is_the_overflow_error(user_path: Path, model: str) -> None:
    system = " ".join([TRAINING_TEXT] * 20)  # a system prompt is always kept: no level helps
    failed = llm(user_path, "-m", model, "-s", system, "hi", check=False)
    assert failed.returncode != 0
    # llm prints the status and OpenAI's own overflow wording (not the code).
    assert "Error code: 400 - This model's maximum context length is 1024" in failed.stderr
