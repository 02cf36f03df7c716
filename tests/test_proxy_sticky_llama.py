"""A sticky cut through the proxy, for real: the official `openai` SDK pointed at the proxy,
in front of the real C++ llama-server with the tiny model and a 1,024-token window (which the
proxy is not told: it learns it from llama-server's own overflow). After the overflow, the
next turn forwards the cut view then the new messages, and llama-server reports the cut
prefix as cached: its KV cache was reused instead of recomputed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.config import RecoveryConfig
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.sessions import SESSION_HEADER, SessionRecorder
from chatcli.store import SessionStore
from tests.proxy_harness import running_proxy
from tests.test_proxy_llama import N_CTX, llama_upstream, long_chat

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def proxy(llama_1024: str, store_path: Path) -> Iterator[str]:
    up = llama_upstream(llama_1024, context_window=None)  # the proxy learns the window
    recorder = SessionRecorder(SessionStore(store_path), upstream="llama test")
    # No escalation: one call answers each request, so its usage is that call's.
    options = ProxyOptions(sessions=recorder, recovery=RecoveryConfig(max_token_escalations=0))
    with running_proxy(up, options=options) as url:
        yield url


def ask(proxy: str, messages: list[dict[str, Any]]) -> str:
    headers = {SESSION_HEADER: "llama-sticky"}
    with openai.OpenAI(
        base_url=proxy + "/v1", api_key="k", max_retries=0, timeout=120, default_headers=headers
    ) as oa:
        reply = oa.chat.completions.create(model="any", messages=messages)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


def test_the_turn_after_an_overflow_keeps_the_cut_prefix_in_llama_servers_cache(
    proxy: str, store_path: Path
) -> None:
    history = long_chat()
    answer = ask(proxy, history)
    # Eighty words: a fresh cut of the grown history would drop its oldest kept turns
    # (the cut aims at 75% of the window); the kept cut plus it still fits the window (the
    # carried block may fill what the level keeps: 120 words, then 100, no longer did once
    # the recogniser carried more of this text as facts).
    question = " ".join(TRAINING_TEXT.split()[:80])
    later = [
        *history,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": question},
    ]
    ask(proxy, later)
    with SessionStore(store_path) as store:
        first, second = store.requests("llama-sticky")
        cut = store.view("llama-sticky", first.id)
        sent = store.view("llama-sticky", second.id)
        kinds = [e.kind for e in store.events("llama-sticky") if e.request_id == first.id]
    # Cut before it was sent: llama-server's own tokenizer counted it (no rejected call).
    assert kinds[0] == "PreflightRecovery" and "LevelApplied" in kinds
    assert "OverflowDetected" not in kinds
    assert len(cut) < len(history)
    assert sent[: len(cut)] == cut  # the cut, then the turn after it
    assert [m.text for m in sent[len(cut) :]] == [answer, question]
    # llama-server reused its KV cache for the cut prefix: nearly all of the first prompt.
    assert first.usage.prompt_tokens < N_CTX
    assert second.usage.cache_read_tokens >= first.usage.prompt_tokens * 0.9, (first, second)
