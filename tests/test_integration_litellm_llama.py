"""`chatcli.integrations.litellm` for real: the real litellm from PyPI (`openai/<model>` with
`api_base`) driving the real C++ llama-server with the tiny random model and a 1,024-token
window. The overflows are llama-server's own errors, raised by litellm as its own exceptions;
the answers really stop at max_tokens (the model never emits an end token)."""

from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: no download at import

import litellm

from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.events import Event, LevelApplied, OverflowDetected, PreflightRecovery
from chatcli.integrations.litellm import acompletion, completion
from tests.test_integration_litellm import LITELLM_WARNINGS
from tests.test_proxy_llama import N_CTX

pytest_plugins = ("tests.servers",)
pytestmark = [pytest.mark.llama_server, *LITELLM_WARNINGS]

MODEL = "openai/chatcli-tiny"
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def api_base(llama_1024: str) -> str:
    return llama_1024 + "/v1"


def args(api_base: str, history: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """`completion`'s arguments: litellm's OpenAI-compatible route to the server."""
    return {
        "model": MODEL,
        "messages": history,
        "api_base": api_base,
        "api_key": "k",
        "max_tokens": MAX_TOKENS,
        **more,
    }


def long_chat(turns: int = 30) -> list[dict[str, Any]]:
    """About 3,000 tokens of the model's own training text (three windows), with a tool
    call and its result in the middle, ending with a question."""
    words = TRAINING_TEXT.split()
    out: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."}]
    for i in range(turns):
        text = " ".join(words[(i * 60) % max(1, len(words) - 60) :][:60])
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {text}"})
    call = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    out[20:20] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "grep: " + " ".join(words[:200])},
    ]
    out.append({"role": "user", "content": "What is the last thing I asked?"})
    return out


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The arguments of every call litellm was asked to make (litellm itself still runs)."""
    made: list[dict[str, Any]] = []
    real, areal = litellm.completion, litellm.acompletion

    def spy(**kwargs: Any) -> Any:
        made.append(copy.deepcopy(kwargs))
        return real(**kwargs)

    async def aspy(**kwargs: Any) -> Any:
        made.append(copy.deepcopy(kwargs))
        return await areal(**kwargs)

    monkeypatch.setattr(litellm, "completion", spy)
    monkeypatch.setattr(litellm, "acompletion", aspy)
    return made


def assert_tool_pairs_valid(messages: list[dict[str, Any]]) -> None:
    """Every tool result answers a call of the assistant message before it, and every call
    has its result."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, messages
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, messages
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls


def check_recovered(
    response: Any, history: list[dict[str, Any]], before: list[dict[str, Any]], calls: Any
) -> None:
    sent = [call["messages"] for call in calls]
    assert isinstance(response, litellm.ModelResponse)
    assert response.choices[0].message.content
    assert history == before  # the caller's conversation, untouched
    assert len(sent) >= 2  # the rejected call, then the recovered ones
    assert len(sent[0]) == len(history)  # the first call was the whole conversation
    for messages in sent:
        assert_tool_pairs_valid(messages)
    assert len(sent[1]) < len(history)
    assert sent[1][-1] == history[-1]  # the latest request survives


def test_an_overflowing_conversation_is_answered(
    api_base: str, calls: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    history = long_chat()
    before = copy.deepcopy(history)
    events: list[Event] = []
    with caplog.at_level(logging.INFO, logger="chatcli"):
        response = completion(**args(api_base, history, on_event=events.append))
    check_recovered(response, history, before, calls)
    overflow = next(e for e in events if isinstance(e, OverflowDetected))
    assert overflow.limit == N_CTX  # llama-server's own numbers, through litellm's exception
    assert any(isinstance(e, LevelApplied) for e in events)
    assert "context overflow" in caplog.text
    # Cut at max_tokens, continued: one answer, the usage of every call that answered.
    assert response.usage.completion_tokens > MAX_TOKENS


async def test_an_overflowing_conversation_is_answered_async(
    api_base: str, calls: list[dict[str, Any]]
) -> None:
    history = long_chat()
    before = copy.deepcopy(history)
    events: list[Event] = []
    response = await acompletion(**args(api_base, history, on_event=events.append))
    check_recovered(response, history, before, calls)
    assert any(isinstance(e, OverflowDetected) for e in events)


def test_a_known_window_is_fitted_before_sending(
    api_base: str, calls: list[dict[str, Any]]
) -> None:
    history = long_chat()
    events: list[Event] = []
    response = completion(**args(api_base, history, context_window=N_CTX, on_event=events.append))
    assert response.choices[0].message.content
    assert any(isinstance(e, PreflightRecovery) for e in events)
    # Fitted before the first call. (The tiny model's tokens are denser than chatcli's
    # estimate, so llama-server may still reject that view; it is then recovered further.)
    assert all(len(call["messages"]) < len(history) for call in calls)


def test_a_stream_recovers_and_continues_as_one_answer(api_base: str) -> None:
    history = long_chat()
    before = copy.deepcopy(history)
    with completion(
        **args(api_base, history, stream=True, stream_options={"include_usage": True})
    ) as stream:
        chunks = list(stream)
    assert history == before
    assert all(isinstance(c, litellm.ModelResponseStream) for c in chunks)
    assert len(chunks) > 3 * MAX_TOKENS // 2  # token by token, not one piece per call
    built = litellm.stream_chunk_builder(chunks)
    assert stream.reply is not None
    assert built.choices[0].message.content == stream.reply.message.text
    assert built.usage.completion_tokens == stream.reply.usage.output_tokens
    assert any(isinstance(e, OverflowDetected) for e in stream.events)


async def test_an_async_stream_is_iterated_with_async_for_only(api_base: str) -> None:
    """A plain `for` over the async stream is an error, not an empty stream (it was one)."""
    stream = await acompletion(**args(api_base, [{"role": "user", "content": "Hi"}], stream=True))
    async with stream:
        with pytest.raises(TypeError):
            iter(stream)
        chunks = [chunk async for chunk in stream]
    assert chunks
    assert stream.reply is not None


async def test_an_async_stream_recovers(api_base: str) -> None:
    history = long_chat()
    stream = await acompletion(**args(api_base, history, stream=True))
    async with stream:
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert stream.reply is not None
    assert text == stream.reply.message.text
    assert any(isinstance(e, LevelApplied) for e in stream.events)


def test_a_call_that_fits_is_sent_as_the_caller_wrote_it(
    api_base: str, calls: list[dict[str, Any]]
) -> None:
    """No recovery needed: litellm gets the caller's messages verbatim (a name, content
    blocks), and every other argument as given."""
    history = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "name": "ana", "content": [{"type": "text", "text": "Hello there"}]},
    ]
    response = completion(**args(api_base, history, temperature=0.0, seed=7, user="u-1"))
    assert response.choices[0].finish_reason == "length"  # cut at 16, then continued
    first = calls[0]
    assert first["messages"] == history
    assert (first["temperature"], first["seed"], first["user"]) == (0.0, 7, "u-1")
    assert first["max_tokens"] == MAX_TOKENS
    assert "context_window" not in first and "on_event" not in first


# A blocking caller's whole use: a call (cut at max_tokens, so continued: several litellm
# calls), then a stream left after its first chunk. Then the thread's loop is unset, so a loop
# left open is collected: with ResourceWarning an error, whatever leaked reaches the hook.
SYNC_CALLER = """
import asyncio, gc, json, sys, warnings
warnings.simplefilter("error", ResourceWarning)
leaks = []
sys.unraisablehook = lambda unraisable: leaks.append(repr(unraisable.exc_value))
from chatcli.integrations.litellm import completion
args = json.loads(sys.argv[1])
assert completion(**args).choices[0].message.content
with completion(**args, stream=True) as stream:
    next(stream)
del stream
asyncio.set_event_loop(None)
gc.collect()
print(json.dumps(leaks))
"""


def test_a_sync_caller_is_left_no_open_event_loop(api_base: str) -> None:
    """litellm's sync `completion` makes the main thread an event loop and leaves it open;
    the integration closes it. Run in a fresh interpreter: whether `get_event_loop` makes a
    loop depends on what the thread did before (pytest's main thread has run others' loops)."""
    call = args(api_base, [{"role": "user", "content": "Hello"}])
    run = subprocess.run(
        [sys.executable, "-c", SYNC_CALLER, json.dumps(call)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert json.loads(run.stdout.splitlines()[-1]) == [], run.stderr
