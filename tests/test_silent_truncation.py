"""Silent truncation on OpenAI-compatible servers, judged on the usage real servers report.

tests/data/ollama-usage.json holds answers in the shape Ollama (and LM Studio) send, with the
prompt counts each version reports: 0 for a cached prompt (before ollama#5371), only the
uncached part (0.30), the whole prompt plus `cached_tokens` (after ollama#16428), and a prompt
cut to the window. Each is served by a local server to the real adapter, which must raise an
overflow for a cut prompt and nothing for a cached one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatcli.errors import (
    SILENT_TRUNCATION,
    ContextRecoveryError,
    ErrorKind,
    ProviderError,
    silent_truncation,
)
from chatcli.messages import Message, ToolCall, Usage
from chatcli.providers.base import Request
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client
from tests.replay import Scripted, replay_server
from tests.test_openai_adapter import MODES, ask

DATA = Path(__file__).parent / "data" / "ollama-usage.json"
BODIES = {r["id"]: r["body"] for r in json.loads(DATA.read_text(encoding="utf-8"))}


def conversation(tokens: int) -> Request:
    """A long conversation that the default estimator puts at about `tokens` tokens."""
    turn = "lorem ipsum " * 300  # ~900 tokens
    messages = []
    for i in range(tokens // 1_800):
        messages += [Message.user(f"{i} {turn}"), Message.assistant(f"{i} {turn}")]
    return Request(messages=(*messages, Message.user("and now?")))


def paste(tokens: int) -> Request:
    """A one-shot request: a system prompt and a pasted log of about `tokens` tokens."""
    log = "GET /index.html 200 0.003s\n" * (tokens * 4 // 27)
    return Request(messages=(Message.system("Be brief."), Message.user(f"Summarise:\n{log}")))


async def answer(
    body: dict[str, Any], sent: int, window: int | None, mode: str, *, shape: Any = None
) -> Any:
    """What the adapter makes of `body`, served for a conversation of ~`sent` tokens
    (`shape`: the request's builder, default `conversation`)."""
    with replay_server() as server:
        server.add(Scripted(body=body))
        provider = OpenAICompatible(server.url + "/v1", "m", environ={}, context_window=window)
        try:
            return await ask(provider, (shape or conversation)(sent), mode)
        finally:
            provider.close()
            await provider.aclose()


# (record, tokens sent, window): a cached conversation that fits is never a truncation.
CACHED = [
    pytest.param("ou-1", 20_000, 32_768, id="ollama-2024-cached-prompt-reported-as-0"),
    pytest.param("ou-2", 20_000, 32_768, id="ollama-0.30-uncached-part-only"),
    pytest.param("ou-2", 20_000, None, id="ollama-0.30-uncached-part-only-window-unknown"),
    pytest.param("ou-3", 20_000, 32_768, id="ollama-cached-tokens-reported"),
    pytest.param("ou-3", 20_000, None, id="ollama-cached-tokens-reported-window-unknown"),
    pytest.param("ou-4", 17_000, 32_768, id="lm-studio-full-count-on-a-cache-hit"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("record", "sent", "window"), CACHED)
async def test_a_cached_prompt_is_not_a_truncation(
    mode: str, record: str, sent: int, window: int | None
) -> None:
    response = await answer(BODIES[record], sent, window, mode)
    assert response.usage.prompt_tokens == BODIES[record]["usage"]["prompt_tokens"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_reported_cached_prefix_counts_as_prompt(mode: str) -> None:
    response = await answer(BODIES["ou-3"], 20_000, 32_768, mode)
    assert response.usage.cache_read_tokens == 20_438
    assert response.usage.prompt_tokens == 20_480


# (record, tokens sent, window): what was sent cannot fit, and the server says it read less.
CUT = [
    pytest.param("ou-5", 74_706, 2_048, id="ollama-cut-to-num_ctx"),
    pytest.param("ou-2", 20_000, 8_192, id="ollama-0.30-low-count-for-a-prompt-over-the-window"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("record", "sent", "window"), CUT)
async def test_a_cut_prompt_is_an_overflow(mode: str, record: str, sent: int, window: int) -> None:
    with pytest.raises(ProviderError, match="detected from usage") as caught:
        await answer(BODIES[record], sent, window, mode)
    info = caught.value.info
    assert (info.kind, info.reason, info.limit) == (
        ErrorKind.CONTEXT_OVERFLOW,
        SILENT_TRUNCATION,
        window,
    )
    assert info.prompt_tokens is not None and info.prompt_tokens > window


@pytest.mark.parametrize("mode", MODES)
async def test_a_prompt_cut_to_num_ctx_is_an_overflow_with_the_window_unknown(mode: str) -> None:
    # Ollama's log: "truncating input prompt limit=2048 prompt=74706"; the window is not
    # declared, and the count left is a window cap: it states the window.
    with pytest.raises(ProviderError, match="window cap") as caught:
        await answer(BODIES["ou-5"], 74_706, None, mode, shape=paste)
    info = caught.value.info
    assert (info.kind, info.reason, info.limit) == (
        ErrorKind.CONTEXT_OVERFLOW,
        SILENT_TRUNCATION,
        2_048,
    )


def test_a_dropped_turn_with_the_window_unknown_fails_after_one_call() -> None:
    # llama-cpp-python's guessed chat format drops tool results (tests/test_e2e_llama_cpp_python
    # shows it on the real server): no level sends the result in a form it keeps, so the
    # Client says so after the one call instead of answering without it.
    call = ToolCall(id="call_1", name="read_log", arguments={"turn": 1})
    exchange = (
        Message.system("Be brief."),
        Message.user("Read the log and say what it shows."),
        Message.assistant(tool_calls=(call,)),
        Message.tool(call.id, "GET /index.html 200 0.003s\n" * 100),
    )
    body = {**BODIES["ou-4"], "usage": {"prompt_tokens": 40, "completion_tokens": 12}}
    with replay_server() as server:
        server.add(Scripted(body=body))
        provider = OpenAICompatible(server.url + "/v1", "m", environ={})
        try:
            with pytest.raises(ContextRecoveryError, match="silently truncated") as caught:
                Client(provider).send(exchange, max_tokens=100)
        finally:
            provider.close()
        assert len(server.requests) == 1
    assert caught.value.info.limit is None
    assert "--context-window" in str(caught.value) and "chat template" in str(caught.value)


@pytest.mark.parametrize(
    ("reported", "new_turn", "before", "truncated"),
    [
        (83, 604, 42, True),  # llama-cpp-python dropped the tool result, read what came before
        (2_048, 9_000, 30_000, True),  # cut to a 2,048-token num_ctx
        (1, 604, 20_000, False),  # the same prompt again, all of it cached (Ollama 0.30)
        (42, 20, 20_000, False),  # ou-2: the uncached new turn of a cached conversation
        (700, 1_000, 20_000, False),  # the new turn arrived; the prefix was cached
        (83, 604, 0, False),  # a first request read in part: no prefix to vouch, no cap
        (83, 400, 42, False),  # a short new turn is never judged by ratio
    ],
)
def test_the_rule_with_the_window_unknown(
    reported: int, new_turn: int, before: int, truncated: bool
) -> None:
    usage = Usage(input_tokens=reported)
    estimate = before + new_turn
    why = silent_truncation(usage, estimate, None, new_turn=new_turn, before=before)
    assert (why is not None) is truncated
    # A known window is judged by the window, never by the turn.
    assert silent_truncation(usage, estimate, 100_000, new_turn=new_turn, before=before) is None


@pytest.mark.parametrize(
    ("reported", "cached", "estimate", "window", "truncated"),
    [
        (14, 0, 20, None, False),  # a short prompt is never judged by ratio
        (900, 0, 1_000, 2_048, False),  # a different tokenizer, not a cut
        (400, 0, 1_000, 2_048, False),  # few arrived, but all of it fits: a cached prefix
        (400, 0, 3_000, 2_048, True),  # few arrived, and it could not fit
        (400, 0, 3_000, None, False),  # window unknown: a low count alone proves nothing
        (2_048, 0, 2_000, 2_048, True),  # the prompt filled the whole configured window
        (60, 2_000, 3_000, 2_048, True),  # cached prefix counted: fills the window
        (0, 0, 100_000, 2_048, False),  # no usage reported: nothing to judge
    ],
)
def test_the_rule(
    reported: int, cached: int, estimate: int, window: int | None, truncated: bool
) -> None:
    usage = Usage(input_tokens=reported, cache_read_tokens=cached)
    assert (silent_truncation(usage, estimate, window) is not None) is truncated
