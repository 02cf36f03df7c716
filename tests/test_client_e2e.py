"""End to end: a 200-message agent session against a provider that really enforces its window.

The session is what a coding agent accumulates: a system prompt, a task, then round after
round of tool calls with large results (some over the per-result budget), a few follow-up
requests from the user, and the latest request at the end. It is far beyond the window.
`WindowedProvider` counts it with its own tokenizer (not chatcli's estimate) and rejects
what does not fit with real error bodies (vLLM's with numbers; Anthropic's 413 without).

Checked every time: the session recovers, the number of provider calls, the latest user
request survives (the model answers it, it is in the final view), and every view sent had
its tool calls and results correctly paired.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chatcli.config import RecoveryConfig
from chatcli.errors import ContextRecoveryError
from chatcli.events import (
    Continued,
    Escalated,
    InstructionsCarried,
    LevelApplied,
    LevelSkipped,
    MaxTokensFitted,
    OverflowDetected,
    PreflightRecovery,
)
from chatcli.history.carry import is_carry_block
from chatcli.history.pairing import repair_tool_pairing
from chatcli.messages import Message, Role, ToolCall
from chatcli.recovery import Client, Reply
from chatcli.tokens.estimate import TokenEstimator
from tests.fakes import Overflow, WindowedProvider

LATEST = "Latest request: write the migration notes for the payment module."
NO_NUMBERS = Overflow(record="pe-062", envelope=None, sdk="anthropic")  # 413, no numbers


def agent_session(size: int = 200, rounds_after: int = 4) -> list[Message]:
    """`size` messages: system, task, tool rounds with 2-30k-char results and follow-ups,
    then LATEST, then the `rounds_after` tool rounds the agent ran for it so far."""
    messages = [
        Message.system("You are a coding agent working in the payments repository."),
        Message.user("Task: refactor the payment module and keep the tests green."),
    ]
    step = 0
    while len(messages) < size - 1 - 2 * rounds_after:
        if step % 12 == 11:
            messages.append(Message.user(f"Follow-up {step}: never skip the refund path tests."))
        else:
            messages += tool_round(step)
        step += 1
    messages = messages[: size - 1 - 2 * rounds_after]
    messages.append(Message.user(LATEST))
    for extra in range(rounds_after):
        messages += tool_round(step + extra)
    return messages


def tool_round(step: int, result_chars: int | None = None) -> list[Message]:
    call = ToolCall(id=f"call_{step}", name="run", arguments={"cmd": f"pytest tests/t{step}.py"})
    size = result_chars or (2_000, 9_000, 30_000)[step % 3]  # 30,000 chars exceed the budget
    output = (f"tests/t{step}.py::test_case PASSED [{step}%]\n" * 1200)[:size]
    return [
        Message.assistant(f"Running the tests for step {step}. " * 20, tool_calls=(call,)),
        Message.tool(call.id, output),
    ]


def assert_recovered(
    reply: Reply, provider: WindowedProvider, answer: str = f"Answer to: {LATEST}"
) -> None:
    assert reply.message.text == answer
    assert Message.user(LATEST) in reply.view
    assert reply.view[0].role is Role.SYSTEM
    assert provider.count(reply.view) <= provider.window
    for request in provider.requests:
        assert_paired(request.messages)


def assert_paired(messages: Sequence[Message]) -> None:
    """Every call answered right after its message, no stray result: repair changes nothing."""
    repaired = repair_tool_pairing(messages)
    assert not repaired.report.changed
    assert repaired.messages == tuple(messages)


def kinds(reply: Reply) -> list[type]:
    return [type(event) for event in reply.events]


def test_the_session_is_200_messages_far_beyond_the_window() -> None:
    session = agent_session()
    assert len(session) == 200
    assert sum(1 for m in session if m.role is Role.TOOL) > 80
    assert session[-9] == Message.user(LATEST)
    assert WindowedProvider(window=32_000).count(session) > 10 * 32_000


@pytest.mark.parametrize("window", [8_000, 32_000])
def test_a_declared_window_recovers_in_one_call(window: int) -> None:
    provider = WindowedProvider(window=window)
    reply = Client(provider).send(agent_session())
    assert reply.calls == 1
    assert kinds(reply)[0] is PreflightRecovery
    assert kinds(reply)[-1] is LevelApplied
    assert_recovered(reply, provider)


def test_stated_numbers_recover_in_two_calls() -> None:
    provider = WindowedProvider(window=32_000, declares_limits=False)
    reply = Client(provider).send(agent_session())
    assert reply.calls == 2
    assert kinds(reply) == [OverflowDetected, LevelSkipped, LevelApplied]
    assert_recovered(reply, provider)


def test_the_plain_ladder_needs_more_calls() -> None:
    ladder = WindowedProvider(window=32_000)
    reply = Client(ladder, predictive=False).send(agent_session())
    assert reply.calls == 3  # the full view, level 1 (still too long), level 2
    assert kinds(reply) == [OverflowDetected, LevelApplied] * 2
    assert_recovered(reply, ladder)
    predictive = WindowedProvider(window=32_000, declares_limits=False)
    assert Client(predictive).send(agent_session()).calls == 2 < reply.calls


def test_without_numbers_or_window_the_ladder_is_climbed() -> None:
    provider = WindowedProvider(window=8_000, overflow=NO_NUMBERS, declares_limits=False)
    reply = Client(provider).send(agent_session())
    assert reply.calls == 3
    assert [e.level for e in reply.events if isinstance(e, LevelApplied)] == [1, 2]
    assert_recovered(reply, provider)


def test_a_window_too_small_for_any_level_fails_with_what_was_tried() -> None:
    # 30 tokens: under level 2's view (the system prompt and the request's cut marker) by the
    # estimate calibrated on this code-heavy history too; at 40 it predicts that prose view
    # fits and this provider's flat 3.3 chars per token rejects it (one more call, same end).
    provider = WindowedProvider(window=30, declares_limits=False)
    with pytest.raises(ContextRecoveryError) as raised:
        Client(provider).send(agent_session())
    assert len(provider.requests) == 1  # the numbers showed no level can fit: no more calls
    assert [a.split(" skipped")[0] for a in raised.value.attempts] == [
        "level 1 (aggressive budget)",
        "level 2 (emergency truncation)",
        "level 3 (nuclear truncation)",
    ]


def test_a_long_answer_in_a_recovered_session_is_continued() -> None:
    full = "".join(f"{i}. Move the refund logic into refunds.py.\n" for i in range(450))
    provider = WindowedProvider(window=32_000, answer=lambda _: full, repeat=25)
    reply = Client(provider).send(agent_session(), max_tokens=2_000)
    assert reply.message.text == full
    assert reply.calls == 2
    assert not reply.truncated
    for request in provider.requests:
        assert_paired(request.messages)
        assert any(m.text == LATEST for m in request.messages)


def test_a_continuation_that_overflows_is_recovered_too() -> None:
    # The window holds the level-2 view plus a 1,000-token output reserve, but not the view
    # plus the 4,000-char partial answer that the continuation request carries. The sizes are
    # those of the transcript's last messages as they are (microcompaction off): level 3's
    # view then leaves room for the rest of the answer. The seed's retention (fixed counts)
    # makes the views known in advance; "fit" leaves headroom that avoids this overflow.
    seed = RecoveryConfig(retention="seed")
    roomy = WindowedProvider(window=32_000)
    level2 = Client(roomy, seed, microcompact=None).send(agent_session()).view
    # 11: the system prompt, the block carrying "Follow-up 95: never skip the refund path
    # tests." (a removed user message's standing rule, carried in the user's channel), then
    # 9 kept.
    assert len(level2) == 11
    assert is_carry_block(level2[1])
    full = "".join(f"{i}. Move the refund logic into refunds.py.\n" for i in range(250))
    provider = WindowedProvider(window=roomy.count(level2) + 1_000, answer=lambda _: full)
    # The flat estimate lets pre-flight send level 2; the default shape estimate predicts that
    # view over this window and sends level 3 at once (2 calls, no overflow to recover).
    client = Client(provider, seed, microcompact=None, estimator=TokenEstimator())
    reply = client.send(agent_session(), max_tokens=1_000)
    assert reply.calls == 3  # level 2 (answer cut), continuation (overflow), level 3 (rest)
    # Level 2 carried the block (InstructionsCarried); level 3 keeps it with the same item,
    # so it reports nothing newly carried.
    assert kinds(reply)[3:] == [
        InstructionsCarried,
        Escalated,
        Continued,
        OverflowDetected,
        LevelApplied,
    ]
    assert sum(is_carry_block(m) for m in reply.view) == 1
    assert reply.events[-1].level == 3  # type: ignore[attr-defined]
    assert reply.view == provider.requests[-1].messages[:-2]  # minus partial + continuation
    assert_recovered(reply, provider, answer=full)


def test_escalation_after_a_fitted_limit_sends_no_rejected_call() -> None:
    # vLLM's pe-035, verbatim: 2,778 input tokens + 8,000 asked > 4,096. max_tokens is fitted
    # to the 1,318 left; the answer is cut there, and the continuation carries those 1,318
    # tokens of partial answer: doubling is certain to be rejected (the window is nearly full).
    # The error calibrated the estimate, so this is known before sending: the view is
    # shortened, and the limit raised only to the room that leaves. (Doubling made 4 calls,
    # call 3 rejected.)
    full = "".join(f"{i}. Move the refund logic into refunds.py.\n" for i in range(180))
    vllm = Overflow(output_record="pe-035")  # prompt too long: pe-038; output too: pe-035
    provider = WindowedProvider(
        window=4_096, overflow=vllm, declares_limits=False, answer=lambda _: full
    )
    reply = Client(provider).send(session_counted_at(provider, 2_778), max_tokens=8_000)
    assert reply.calls == 3
    assert kinds(reply) == [
        OverflowDetected,  # call 1: the output does not fit
        MaxTokensFitted,  # call 2: answered, cut at 1,318 tokens
        PreflightRecovery,  # the continuation cannot fit at 1,318: known without a call
        LevelSkipped,
        LevelApplied,
        Escalated,  # call 3: the rest of the answer, at the room left (not 2,636)
        Continued,
    ]
    limits = [request.max_tokens or 0 for request in provider.requests]
    assert limits[:2] == [8_000, 1_318]
    assert 1_318 < limits[2] < 2 * 1_318
    for request in provider.requests[1:]:  # none rejected
        assert provider.count(request.messages) + (request.max_tokens or 0) <= provider.window
    assert_recovered(reply, provider, answer=full)


def session_counted_at(provider: WindowedProvider, tokens: int) -> list[Message]:
    """A short agent session that `provider` counts at exactly `tokens`: an old task with
    long notes (what recovery can drop), small tool rounds, then LATEST and a round for it."""

    def session(notes_chars: int) -> list[Message]:
        notes = ("Design notes. " * (notes_chars // 14 + 1))[:notes_chars]
        rounds = [m for step in range(6) for m in tool_round(step, result_chars=150)]
        return [
            Message.system("You are a coding agent working in the payments repository."),
            Message.user(f"Task: refactor the payment module. Notes: {notes}"),
            *rounds,
            Message.user(LATEST),
            *tool_round(9, result_chars=150),
        ]

    low, high = 0, 4 * tokens  # the shortest notes that reach `tokens`
    while low < high:
        middle = (low + high) // 2
        low, high = (
            (middle + 1, high) if provider.count(session(middle)) < tokens else (low, middle)
        )
    assert provider.count(session(low)) == tokens
    return session(low)


async def test_async_recovers_the_same_way() -> None:
    provider = WindowedProvider(window=32_000, declares_limits=False)
    reply = await Client(provider).asend(agent_session())
    assert reply.calls == 2
    assert_recovered(reply, provider)
