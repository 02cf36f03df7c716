"""The proxy for real: the official `openai` and `anthropic` SDKs pointed at `chatcli proxy`'s
app, in front of the real C++ llama-server running the tiny random model with a 1,024-token
window. Nothing is faked between the SDK and the server: the overflows are llama-server's own
errors, the answers really stop at max_tokens (the model never emits an end token)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.proxy.app import ProxyOptions
from chatcli.wire.forwarding import Upstream
from tests.proxy_harness import running_proxy, upstream_at

# The fixtures (tiny_model) and helpers of tests/servers.py; not imported by name at the top:
# a plugin must not be imported before pytest loads it.
pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

N_CTX = 1024  # the window of tests/servers.py's `llama_1024`
MODEL_NAME = "chatcli-tiny"  # the alias the server is started with
MAX_TOKENS = 16


def llama_upstream(
    llama_url: str, *, context_window: int | None = N_CTX, max_tokens: int | None = MAX_TOKENS
) -> Upstream:
    """The llama-server at `llama_url` as `chatcli proxy --provider openai-compatible` opens
    it, under the server's alias and with no settings file: the one construction the llama
    proxy tests share (they differ only in the window and max_tokens the proxy is told)."""
    return upstream_at(
        "openai-compatible",
        llama_url + "/v1",
        model=MODEL_NAME,
        context_window=context_window,
        max_tokens=max_tokens,
        environ={"CHATCLI_HOME": "/nonexistent"},
    )


@pytest.fixture(scope="module")
def proxy(llama_1024: str) -> Iterator[str]:
    """The proxy in front of `llama_1024`, started to escalate past a client's max_tokens
    (`--escalate-past-client-limit`): the clients here set small limits to provoke the
    escalations they test (tests/test_proxy_claude_code.py: the limit as a ceiling)."""
    options = ProxyOptions(escalate_past_client_limit=True)
    with running_proxy(llama_upstream(llama_1024), options=options) as url:
        yield url


@pytest.fixture
def oa(proxy: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0, timeout=120) as c:
        yield c


@pytest.fixture
def an(proxy: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0, timeout=120) as c:
        yield c


def long_chat(turns: int = 30, *, conversation: str = "") -> list[dict[str, Any]]:
    """About 3,000 tokens of the model's own training text: three windows. `conversation`
    starts its first message, so that each test's is a conversation of its own: the proxy
    starts a conversation it cut before from that cut (a sticky view), without recovering."""
    words = TRAINING_TEXT.split()
    out = []
    for i in range(turns):
        text = " ".join(words[(i * 60) % max(1, len(words) - 60) :][:60])
        said = f"{conversation} {i}: {text}" if conversation else f"{i}: {text}"
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": said})
    out[-1] = {"role": "user", "content": "What is the last thing I asked?"}
    return out


def counter(proxy: str, name: str) -> float:
    for line in httpx.get(proxy + "/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def recoveries(proxy: str) -> float:
    text = httpx.get(proxy + "/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("chatcli_proxy_recoveries_total{")
    )


def test_an_overflowing_conversation_is_answered_through_the_openai_sdk(
    proxy: str, oa: openai.OpenAI
) -> None:
    before = recoveries(proxy)
    messages = long_chat(conversation="openai")
    reply = oa.chat.completions.create(model="any", messages=messages)
    assert reply.choices[0].message.content
    assert reply.usage is not None and 0 < reply.usage.prompt_tokens < N_CTX * 3
    assert recoveries(proxy) > before  # it did not fit: a level was applied
    assert messages == long_chat(conversation="openai")  # the client's history is untouched


def test_an_overflowing_conversation_streams_through_the_anthropic_sdk(
    proxy: str, an: anthropic.Anthropic
) -> None:
    before = recoveries(proxy)
    messages = long_chat(conversation="anthropic")
    with an.messages.stream(model="any", max_tokens=MAX_TOKENS, messages=messages) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].type == "text" and final.content[0].text == text
    assert final.stop_reason in ("max_tokens", "end_turn")
    assert recoveries(proxy) > before


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_first_overflow_is_recovered_with_no_rejected_call(
    llama_1024: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # A proxy just started (nothing learned), told the server's window: the server's own
    # tokenizer counts the conversation (three windows) before it is sent, and the one call
    # made is the recovered view's, answered.
    with (
        caplog.at_level(logging.INFO, logger="chatcli"),
        running_proxy(llama_upstream(llama_1024)) as url,
        openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=120) as oa,
    ):
        messages = long_chat(conversation=f"first overflow {stream}")
        if stream:
            with oa.chat.completions.with_streaming_response.create(
                model="any", messages=messages, max_tokens=MAX_TOKENS, stream=True
            ) as raw:
                text = "".join(raw.iter_text())
        else:
            raw = oa.chat.completions.with_raw_response.create(
                model="any", messages=messages, max_tokens=MAX_TOKENS
            )
            text = raw.parse().choices[0].message.content or ""
    assert text
    assert "x-chatcli-recovery-calls" not in raw.headers
    assert "recovery:" not in text  # the comment a streamed answer's extra calls would add
    events = [type(r.chatcli_event).__name__ for r in caplog.records if hasattr(r, "chatcli_event")]
    assert events[0] == "PreflightRecovery" and "OverflowDetected" not in events


def test_openai_streaming_delivers_one_answer_with_its_continuations(
    proxy: str, oa: openai.OpenAI
) -> None:
    escalations = counter(proxy, "chatcli_proxy_escalations_total")
    stream = oa.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": "Tell me a long story."}],
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    roles = [c for c in chunks if c.choices and c.choices[0].delta.role]
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(roles) == 1 and len(finishes) == 1  # one answer, however many calls it took
    assert counter(proxy, "chatcli_proxy_escalations_total") == escalations + 2
    assert finishes == ["length"]  # escalations used up: the partial answer, flagged
    assert (
        chunks[-1].usage is not None
        and chunks[-1].usage.completion_tokens >= len(text.split()) // 4
    )


def test_an_unrecoverable_conversation_is_each_dialects_overflow_error(
    oa: openai.OpenAI, an: anthropic.Anthropic
) -> None:
    system = " ".join([TRAINING_TEXT] * 20)  # system prompts are always kept: no level helps
    user = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as openai_error:
        oa.chat.completions.create(
            model="any", messages=[{"role": "system", "content": system}, *user]
        )
    assert openai_error.value.code == "context_length_exceeded"
    with pytest.raises(anthropic.BadRequestError) as anthropic_error:
        an.messages.create(model="any", max_tokens=MAX_TOKENS, system=system, messages=user)
    body = anthropic_error.value.body
    assert isinstance(body, dict) and body["error"]["message"].startswith("prompt is too long")
    streamed = an.messages.stream(model="any", max_tokens=MAX_TOKENS, system=system, messages=user)
    with pytest.raises(anthropic.BadRequestError), streamed as s:  # an error status, no stream
        s.get_final_message()


# --- a stream continued, an overflow the server states ---------------------------------------


def test_a_streamed_answer_cut_at_max_tokens_is_continued_as_one_answer(proxy: str) -> None:
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": "Tell me a story."}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    answer = httpx.post(proxy + "/v1/chat/completions", json=body, timeout=120)
    chunks = [
        json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: {")
    ]
    # It stops at max_tokens (the tiny model never ends), so the library escalates and its
    # continuation is written after the first call's text: one answer, one role, one stop.
    deltas = [c["choices"][0] for c in chunks if c["choices"]]
    assert [d["delta"].get("role") for d in deltas].count("assistant") == 1
    assert [d["finish_reason"] for d in deltas if d["finish_reason"]] == ["length"]
    assert answer.text.rstrip().endswith("data: [DONE]")


def test_an_overflow_the_server_states_is_recovered_in_a_stream(
    llama_1024: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Told a window 32 times the server's, the proxy asks the server for the whole request
    # (no pre-flight cut): the server's own overflow is recovered by the levels.
    up = llama_upstream(llama_1024, context_window=N_CTX * 32, max_tokens=None)
    with (
        caplog.at_level(logging.INFO, logger="chatcli"),
        running_proxy(up) as url,
        openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=120) as oa,
    ):
        stream = oa.chat.completions.create(
            model="any", messages=long_chat(), max_tokens=MAX_TOKENS, stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    events = [type(r.chatcli_event).__name__ for r in caplog.records if hasattr(r, "chatcli_event")]
    assert text and events[0] == "OverflowDetected" and "LevelApplied" in events
