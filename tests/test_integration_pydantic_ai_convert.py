"""The one converter between pydantic-ai `ModelMessage`s and chatcli messages
(`chatcli.integrations.pydantic_ai.convert`): lossless round trip, and only what recovery cut
is rebuilt, with tool call/return pairs still valid."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai")

from pydantic_ai import messages as pai

from chatcli.config import RecoveryConfig
from chatcli.history.truncate import apply_recovery_level
from chatcli.integrations.pydantic_ai.convert import (
    to_chatcli,
    to_pydantic_ai,
)
from chatcli.messages import Role

RETRIED = pai.RetryInfo(cause="model_retry")
PROPERTY = settings(max_examples=150, deadline=None)

words = st.text(max_size=30)
big_texts = st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=8), st.integers(1, 3000))
texts = st.one_of(words, words, big_texts)
tool_contents: st.SearchStrategy[Any] = st.one_of(
    texts, st.dictionaries(st.text(max_size=5), words, max_size=3), st.lists(words, max_size=3)
)
user_contents: st.SearchStrategy[Any] = st.one_of(
    texts, st.lists(st.one_of(words, st.just(pai.ImageUrl(url="https://x.test/a.png"))), max_size=3)
)


@st.composite
def responses(draw: st.DrawFn, ids: list[str]) -> pai.ModelResponse:
    parts: list[pai.ModelResponsePart] = []
    for kind in draw(st.lists(st.sampled_from(["text", "thinking", "call"]), max_size=4)):
        if kind == "text":
            parts.append(pai.TextPart(content=draw(texts)))
        elif kind == "thinking":
            parts.append(pai.ThinkingPart(content=draw(words), signature=draw(words)))
        else:
            call_id = f"call_{len(ids)}"
            ids.append(call_id)
            args = draw(
                st.one_of(
                    st.dictionaries(st.text(max_size=5), words, max_size=3), st.just('{"q": 1}')
                )
            )
            parts.append(
                pai.ToolCallPart(
                    tool_name=draw(st.sampled_from(["grep", "read"])),
                    args=args,
                    tool_call_id=call_id,
                )
            )
    finish = draw(st.sampled_from([None, "stop", "tool_call", "length"]))
    return pai.ModelResponse(parts=parts, model_name="m", finish_reason=finish)


def returns(calls: list[pai.ToolCallPart], draw: st.DrawFn) -> list[pai.ModelRequestPart]:
    parts: list[pai.ModelRequestPart] = []
    for call in calls:
        if draw(st.integers(0, 5)) == 0:
            parts.append(
                pai.ToolReturnPart(
                    tool_name=call.tool_name,
                    content=draw(words),
                    tool_call_id=call.tool_call_id,
                    outcome="retried",
                )
            )
        else:
            parts.append(
                pai.ToolReturnPart(
                    tool_name=call.tool_name,
                    content=draw(tool_contents),
                    tool_call_id=call.tool_call_id,
                )
            )
    return parts


@st.composite
def histories(draw: st.DrawFn) -> list[pai.ModelMessage]:
    """Agent-like histories: a prompt, answers with tool calls, their returns, more prompts."""
    ids: list[str] = []
    first: list[pai.ModelRequestPart] = []
    if draw(st.booleans()):
        first.append(pai.SystemPromptPart(content=draw(words)))
    first.append(pai.UserPromptPart(content=draw(user_contents)))
    messages: list[pai.ModelMessage] = [
        pai.ModelRequest(parts=first, instructions=draw(st.none() | words))
    ]
    for _ in range(draw(st.integers(0, 6))):
        response = draw(responses(ids))
        messages.append(response)
        calls = [p for p in response.parts if isinstance(p, pai.ToolCallPart)]
        if calls:
            messages.append(pai.ModelRequest(parts=returns(calls, draw)))
        elif draw(st.booleans()):
            extra = draw(st.sampled_from(["user", "retry", "empty"]))
            part: list[pai.ModelRequestPart] = {
                "user": [pai.UserPromptPart(content=draw(texts))],
                "retry": [pai.RetryFeedbackPart(content=draw(words), retry=RETRIED)],
                "empty": [],
            }[extra]
            messages.append(pai.ModelRequest(parts=part))
    return messages


@PROPERTY
@given(histories(), st.none() | words)
def test_the_round_trip_gives_back_the_very_same_messages(
    history: list[pai.ModelMessage], instructions: str | None
) -> None:
    back = to_pydantic_ai(to_chatcli(history, instructions))
    assert len(back) == len(history)
    assert all(a is b for a, b in zip(back, history, strict=True))


def test_instructions_are_a_system_message_first_and_are_not_sent_back() -> None:
    history = [pai.ModelRequest(parts=[pai.UserPromptPart(content="hi")])]
    converted = to_chatcli(history, "Be brief.")
    assert [(m.role, m.text) for m in converted] == [(Role.SYSTEM, "Be brief."), (Role.USER, "hi")]
    assert to_pydantic_ai(converted) == history


def test_a_cut_tool_return_is_the_original_part_with_the_cut_text() -> None:
    call = pai.ToolCallPart(tool_name="read", args={"path": "log"}, tool_call_id="c1")
    result = pai.ToolReturnPart(tool_name="read", content="x" * 50_000, tool_call_id="c1")
    history: list[pai.ModelMessage] = [
        pai.ModelRequest(parts=[pai.UserPromptPart(content="read the log")]),
        pai.ModelResponse(parts=[pai.TextPart(content="reading"), call]),
        pai.ModelRequest(parts=[result]),
        pai.ModelResponse(parts=[pai.TextPart(content="done")]),
    ]
    level1 = apply_recovery_level(to_chatcli(history), 1, RecoveryConfig()).messages
    back = to_pydantic_ai(level1)
    assert back[0] is history[0] and back[1] is history[1] and back[3] is history[3]
    request = back[2]
    assert isinstance(request, pai.ModelRequest) and request is not history[2]
    (cut,) = request.parts
    assert isinstance(cut, pai.ToolReturnPart) and len(cut.model_response_str()) < 50_000
    assert (cut.tool_call_id, cut.tool_name, cut.timestamp) == ("c1", "read", result.timestamp)
    assert result.content == "x" * 50_000  # the original is not mutated


def tool_pairs_are_valid(messages: list[pai.ModelMessage]) -> bool:
    """Each response's calls are answered in the request right after it (when one follows),
    and every tool return answers a call of the response right before it."""
    previous: set[str] = set()
    for message in messages:
        if isinstance(message, pai.ModelResponse):
            previous = {p.tool_call_id for p in message.parts if isinstance(p, pai.ToolCallPart)}
            continue
        answered = {p.tool_call_id for p in message.parts if isinstance(p, pai.ToolReturnPart)}
        if answered != previous:
            return False
        previous = set()
    return True


@PROPERTY
@given(histories(), st.sampled_from([1, 2, 3]))
def test_recovery_levels_leave_valid_tool_pairs_and_unchanged_messages_identical(
    history: list[pai.ModelMessage], level: int
) -> None:
    converted = to_chatcli(history)
    view = apply_recovery_level(
        converted, level, RecoveryConfig(emergency_keep_messages=3)
    ).messages
    back = to_pydantic_ai(view)
    assert tool_pairs_are_valid(back)
    originals = {id(m) for m in history}
    reused = [m for m in back if id(m) in originals]
    assert reused == [m for m in history if any(m is r for r in reused)]  # in order
    for message in reused:  # reused only where recovery left every part of it as it was
        assert all(part in view for part in to_chatcli([message]))
