"""Retention by tokens ("fit", SPEC section 7): the transform, its settings, and the policy.

The transform is checked with exact expectations on small histories counted by the estimator,
and on real text (the standard library's sources) counted by a real tokenizer (tiktoken
o200k, seeded offline). The policy is walked against `WindowedProvider`, whose tokenizer is
not the estimator's (3.3 chars/token and 7 tokens per message against 4 and 4).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import replace

import pytest

from chatcli.chat.demo import view_fill
from chatcli.chat.session import Turn
from chatcli.chat.tap import CallRecord
from chatcli.config import RecoveryConfig
from chatcli.cost import CallKind
from chatcli.errors import ConfigError, ContextRecoveryError
from chatcli.events import LevelApplied
from chatcli.history.carry import Numbering
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.retain import (
    CUT_NOTE,
    FIRST_REQUEST_SHARE,
    MESSAGE_SHARE,
    MIN_BOUNDARY_TOKENS,
    Retention,
    recover,
    retain,
)
from chatcli.history.truncate import (
    COMPACTION_NOTICE,
    SUMMARY_HEADER,
    TRUNCATION_NOTICE,
    apply_recovery_level,
    is_compaction_notice,
)
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, Usage
from chatcli.recovery import Client, Reply
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator
from chatcli.tokens.exact import TiktokenCounter, load_encoding
from tests.fakes import WindowedProvider

ESTIMATOR = TokenEstimator()
FIT = RecoveryConfig()
SYSTEM = Message.system("You are a careful coding agent.")
GOAL = Message.user("Goal: make the test suite pass.")


def count(messages: Sequence[Message]) -> int:
    return ESTIMATOR.count(messages)


def agent_session(turns: int, *, result_chars: int = 2_000) -> list[Message]:
    """system, the goal, then turns of request / call / result / answer."""
    messages = [SYSTEM, GOAL]
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"src/m{i}.py"})
        messages += [
            Message.user(f"request {i}: look at module {i}"),
            Message.assistant(f"Reading module {i}.", tool_calls=(call,)),
            Message.tool(f"c{i}", f"line of module {i}\n" * (result_chars // 18)),
            Message.assistant(f"Module {i} is fine. " * 20),
        ]
    return messages


def others(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is not Role.SYSTEM]


# --- settings -----------------------------------------------------------------------------


def test_fit_is_the_default_with_its_shares() -> None:
    config = RecoveryConfig.from_env({})
    assert (config.retention, config.target_pct, config.nuclear_pct) == ("fit", 75, 40)


@pytest.mark.parametrize(
    ("environ", "field", "value"),
    [
        ({"CHATCLI_RETENTION": "seed"}, "retention", "seed"),
        ({"CHATCLI_RETENTION": " FIT "}, "retention", "fit"),
        ({"CHATCLI_RECOVERY_TARGET_PCT": "90"}, "target_pct", 90),
        ({"CHATCLI_RECOVERY_NUCLEAR_PCT": "20"}, "nuclear_pct", 20),
    ],
)
def test_the_variables_are_read(environ: dict[str, str], field: str, value: object) -> None:
    assert getattr(RecoveryConfig.from_env(environ), field) == value


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("CHATCLI_RETENTION", "tokens"),
        ("CHATCLI_RETENTION", ""),
        ("CHATCLI_RECOVERY_TARGET_PCT", "101"),
        ("CHATCLI_RECOVERY_TARGET_PCT", "0"),
        ("CHATCLI_RECOVERY_NUCLEAR_PCT", "abc"),
    ],
)
def test_a_bad_value_names_the_variable(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RecoveryConfig.from_env({variable: raw})
    assert variable in str(caught.value) and repr(raw) in str(caught.value)


def test_level_3_may_not_keep_more_than_level_2() -> None:
    with pytest.raises(ConfigError, match="CHATCLI_RECOVERY_NUCLEAR_PCT=80"):
        RecoveryConfig.from_env({"CHATCLI_RECOVERY_NUCLEAR_PCT": "80"})
    with pytest.raises(ConfigError, match="retention='tokens'"):
        RecoveryConfig(retention="tokens")


# --- the transform ------------------------------------------------------------------------


def test_level_2_keeps_the_newest_messages_that_fit_three_quarters_of_the_room() -> None:
    messages = agent_session(60)
    room = 20_000
    result = retain(messages, 2, FIT, Retention(room=room, count=count))
    view = result.messages
    target = room * 75 // 100
    assert count(view) <= target
    # Nothing more fits: the next older turn would pass the target (turns cost < 1,000).
    assert count(view) > target - 1_000
    assert view[0] == SYSTEM and view[1] == GOAL  # the goal is pinned after the system prompt
    kept = others(view)[1:]
    newest = others(messages)[-len(kept) :]
    # The newest, in order, whole but for the largest message of the turn at the boundary.
    cut = [i for i, (k, m) in enumerate(zip(kept, newest, strict=True)) if k != m]
    assert len(cut) <= 1 and all(CUT_NOTE in kept[i].text for i in cut)
    assert kept[0].role is Role.USER
    assert len(kept) > FIT.emergency_keep_messages  # far more than the seed's ten
    assert result.report.moved == ("pinned user request #0 in front of the newest messages",)


def test_the_turn_at_the_boundary_fills_the_room_it_leaves_with_its_answer_cut() -> None:
    # Few long answers fit the room: whole turns alone would leave up to one unused.
    messages = [SYSTEM, GOAL]
    for i in range(12):
        messages += [Message.user(f"question {i}?"), Message.assistant(f"answer {i}. " * 480)]
    messages.append(Message.user("and to sum up?"))
    room = 8_000
    target = room * 75 // 100
    view = retain(messages, 2, FIT, Retention(room=room, count=count)).messages
    assert target - MIN_BOUNDARY_TOKENS < count(view) <= target
    boundary = others(view)[1:3]  # after the pinned goal: the boundary turn, its answer cut
    assert boundary[0].text.startswith("question ") and boundary[1].role is Role.ASSISTANT
    assert CUT_NOTE in boundary[1].text
    assert all(CUT_NOTE not in m.text for m in others(view)[3:])


def test_an_agent_turn_at_the_boundary_fills_the_room_behind_the_goal() -> None:
    # One request, then file reads, each over a quarter of the target (cut to it): the unit at
    # the boundary (a call and its result, no user message before it within two units) is
    # kept with its result cut to what is left, behind the pinned goal, instead of leaving a
    # quarter of the target unused.
    def read(i: int) -> list[Message]:
        call = ToolCall(id=f"r{i}", name="read_file", arguments={"path": f"src/m{i}.py"})
        result = "".join(f"{n:6}\tvalue_{i}_{n} = compute({n}, {i})\n" for n in range(1_500))
        return [
            Message.assistant(f"Reading m{i}.", tool_calls=(call,)),
            Message.tool(call.id, result),
        ]

    messages = [SYSTEM, GOAL, Message.user("Read the modules one by one.")]
    for i in range(8):
        messages += read(i)
    messages += [Message.user("Now sum up."), *read(8), *read(9)]
    room = 20_000
    target = room * 75 // 100
    view = retain(messages, 2, FIT, Retention(room=room, count=count)).messages
    assert target - MIN_BOUNDARY_TOKENS < count(view) <= target
    assert view[:2] == (SYSTEM, GOAL) and view[2].role is Role.ASSISTANT
    assert repair_tool_pairing(view).messages == view  # every call with its result
    boundary = view[3]
    assert boundary.tool_result is not None and CUT_NOTE in boundary.text
    whole_turns = count(view) - count(view[2:4])
    assert whole_turns < target * 0.8  # what the view filled without the boundary unit


@pytest.mark.parametrize("scale", [1.0, 3.46])  # the shape estimate; calibrated on llama's
def test_a_huge_request_is_cut_to_fit_whatever_the_room(scale: float) -> None:
    # A paste of real source, cut at line breaks: the estimate of a cut is not linear in the
    # chars asked for, and asking for a char less may give the same cut. Every room still
    # gets the request cut to fit it, never reduced to its bare marker.
    paste = "\n".join(inspect.getsource(m) for m in (textwrap, json, inspect, re, argparse))
    messages = [SYSTEM, Message.user(f"What breaks here?\n{paste}")]
    estimator = MarginEstimator(scale=scale, calibrations=1)
    for room in range(2_000, 60_000, 293):
        view = retain(messages, 2, FIT, Retention(room=room, count=estimator.count)).messages
        assert estimator.count(view) <= room * 75 // 100
        assert view[-1].text.startswith("What breaks here?") and CUT_NOTE in view[-1].text


def test_level_3_keeps_a_lower_share_after_the_notice() -> None:
    messages = agent_session(60)
    result = retain(messages, 3, FIT, Retention(room=20_000, count=count))
    assert count(result.messages) <= 20_000 * 40 // 100
    assert [m.text for m in result.messages[:3]] == [SYSTEM.text, TRUNCATION_NOTICE, GOAL.text]
    assert len(
        others(retain(messages, 2, FIT, Retention(room=20_000, count=count)).messages)
    ) > len(others(result.messages))
    # Applied to a view that carries the notice already, it is not repeated.
    again = retain(result.messages, 3, FIT, Retention(room=20_000, count=count)).messages
    assert sum(m.text == TRUNCATION_NOTICE for m in again) == 1


def test_level_3_after_a_compaction_says_the_history_was_summarized() -> None:
    summary = Message.user(f"{SUMMARY_HEADER}: the 200 messages before this one ...]\nx")
    messages = [SYSTEM, summary, *agent_session(60)[1:]]
    room = Retention(room=20_000, count=count)
    view = retain(messages, 3, FIT, room).messages
    assert summary in view and view[1].text == COMPACTION_NOTICE  # the spec's words: true


def test_the_markers_name_the_transcripts_message_numbers() -> None:
    # The recall tool reads a message by its number: a cut message's marker names its own,
    # level 3's notice the span it stands for, and each depends only on the message (and the
    # span) so that it stays the same from one request to the next.
    messages = agent_session(60, result_chars=40_000)
    retention = Retention(room=20_000, count=count)
    view = retain(messages, 3, FIT, retention, Numbering(messages)).messages
    (notice,) = [m for m in view if is_compaction_notice(m)]
    found = re.search(r"The transcript keeps the earlier messages #1-#(\d+)\.\]$", notice.text)
    assert found is not None
    heads = {(m.role, m.text[:40]) for m in view}
    last = int(found.group(1))  # the last dropped: the one after it is kept
    assert (messages[last - 1].role, messages[last - 1].text[:40]) not in heads
    assert (messages[last].role, messages[last].text[:40]) in heads
    cut = [m for m in view if CUT_NOTE in m.text]
    assert cut
    for message in cut:
        (original,) = [
            n
            for n, m in enumerate(messages, 1)
            if m.role is message.role and m.text[:40] == message.text[:40]
        ]
        assert f"{CUT_NOTE} #{original} ...]" in message.text
    # Numbered by a longer transcript (the next request's), the same cut, the same markers.
    longer = Numbering([*messages, Message.user("and now?")])
    assert retain(messages, 3, FIT, retention, longer).messages == view
    # Applied again to its own view, grown: one notice, whose span covers both cuts.
    grown = [*messages, *agent_session(70, result_chars=40_000)[2 + 4 * 60 :]]
    again = retain([*view, *grown[len(messages) :]], 3, FIT, retention, Numbering(grown))
    notices = [m for m in again.messages if is_compaction_notice(m)]
    assert len(notices) == 1 and notices[0] != notice
    wider = re.search(r"#1-#(\d+)\.\]$", notices[0].text)
    assert wider is not None and int(wider.group(1)) > last


def test_the_goal_is_pinned_only_when_it_is_small() -> None:
    big_goal = Message.user("Goal: " + "context " * 400)  # ~800 tokens
    messages = [SYSTEM, big_goal, *agent_session(40)[2:]]
    room = 6_000
    assert count([big_goal]) > room * FIRST_REQUEST_SHARE
    view = retain(messages, 2, FIT, Retention(room=room, count=count)).messages
    assert big_goal not in view
    small = retain(messages, 2, FIT, Retention(room=10_000, count=count)).messages
    assert count([big_goal]) <= 10_000 * FIRST_REQUEST_SHARE and small[1] == big_goal


def test_a_huge_tool_result_is_cut_instead_of_evicting_the_turns_before_it() -> None:
    messages = agent_session(30)
    call = ToolCall(id="big", name="cat", arguments={"path": "data.csv"})
    messages += [
        Message.user("and the data file?"),
        Message.assistant("Reading it.", tool_calls=(call,)),
        Message.tool("big", "row,value\n" * 10_000),  # 100,000 chars: ~25,000 tokens
        Message.assistant("It has 10,000 rows."),
    ]
    room = 12_000
    result = retain(messages, 2, FIT, Retention(room=room, count=count))
    view = result.messages
    cut = next(m for m in view if m.tool_result is not None and m.tool_result.call_id == "big")
    assert count([cut]) <= room * 75 // 100 * MESSAGE_SHARE
    assert "chars cut" + CUT_NOTE in cut.text
    assert cut.text.startswith("row,value\n") and cut.text.endswith("row,value\n")
    assert len(others(view)) > 20  # the turns before it are kept
    assert count(view) <= room * 75 // 100
    assert any(line.startswith("tool message #") for line in result.report.cut)


def test_a_call_is_never_split_from_its_result() -> None:
    messages = agent_session(20)
    room = 5_000
    view = retain(messages, 2, FIT, Retention(room=room, count=count)).messages
    assert repair_tool_pairing(view).messages == view
    ids = {call.id for m in view for call in m.tool_calls}
    assert ids == {m.tool_result.call_id for m in view if m.tool_result is not None}


def test_a_latest_request_larger_than_the_room_is_cut_and_kept() -> None:
    paste = Message.user("Please review:\n" + "def f(x):\n    return x\n" * 20_000)
    messages = [*agent_session(10), paste]
    room = 4_000
    result = retain(messages, 2, FIT, Retention(room=room, count=count))
    latest = result.messages[-1]
    assert latest.role is Role.USER and latest.text.startswith("Please review:\n")
    head, marker, tail = re.split(r"(\n\[\.\.\. [0-9,]+ chars cut[^\]]*\]\n)", latest.text)
    stated = int(re.sub(r"[^0-9]", "", marker.split("chars")[0]))
    assert len(head) + stated + len(tail) == len(paste.text)  # the marker says how much
    assert paste.text.startswith(head) and paste.text.endswith(tail)
    assert CUT_NOTE in marker
    assert count(result.messages) <= room * 75 // 100
    assert paste.text == messages[-1].text  # the input is not changed


def test_a_latest_request_too_short_to_cut_is_kept_as_it_is() -> None:
    # Over the target, but shorter than any marker: a "cut" would only merge its parts (and
    # drop the second part's provider_details) without removing a char.
    parts = (
        TextPart(text="0", provider_details={"n": 1}),
        TextPart(text="0", provider_details={"n": 2}),
    )
    request = Message(role=Role.USER, parts=parts)
    tiny = TokenEstimator(chars_per_token=1.5, per_message=9)
    config = replace(FIT, target_pct=40)
    result = retain([Message.system(""), request], 2, config, Retention(room=30, count=tiny.count))
    assert tiny.count(result.messages) > 30 * 40 // 100  # nothing fits the target
    assert result.messages[-1] == request
    assert result.report.cut == ()


def test_the_seed_count_is_the_floor_when_it_fits() -> None:
    # The goal's reserve leaves room for one message fewer than the seed's last four at level
    # 3, whose view fits the target too: the seed's view is the one kept.
    messages = [SYSTEM, GOAL, *(Message.user(f"note {i} " + "x" * 200) for i in range(8))]
    seed = apply_recovery_level(messages, 3, FIT).messages
    room = count(seed) * 100 // 40 + 3
    result = retain(messages, 3, FIT, Retention(room=room, count=count))
    assert result.messages == seed


def test_the_seed_floor_keeps_the_goal_pinned_when_both_fit() -> None:
    # The docs say the session's small first request is pinned; the seed's floor used to
    # replace the view that pinned it with one that did not, even with room for both.
    messages = [SYSTEM, GOAL, *(Message.user(f"note {i} " + "x" * 200) for i in range(8))]
    seed = apply_recovery_level(messages, 3, FIT).messages
    room = (count(seed) + count([GOAL]) + 2) * 100 // 40
    result = retain(messages, 3, FIT, Retention(room=room, count=count))
    assert result.messages == (*seed[:2], GOAL, *seed[2:])  # the seed's four notes, whole
    assert count(result.messages) <= room * 40 // 100
    assert result.report.moved == ("pinned user request #0 in front of the newest messages",)


def test_recover_uses_the_seed_without_a_room_or_with_retention_seed() -> None:
    messages = agent_session(30)
    room = Retention(room=20_000, count=count)
    for level in (1, 2, 3):
        seed = apply_recovery_level(messages, level, FIT)
        assert recover(messages, level, FIT, None) == seed
        assert recover(messages, level, RecoveryConfig(retention="seed"), room) == seed
    assert recover(messages, 2, FIT, room) == retain(messages, 2, FIT, room)


def test_real_text_counted_by_a_real_tokenizer_fills_the_target() -> None:
    encoding = load_encoding("o200k_base")
    assert encoding is not None, "bpe-openai ships o200k_base (the tiktoken extra)"
    counter = TiktokenCounter(encoding=encoding)
    messages = stdlib_session()
    room = 28_000  # a 32k window with a 4k reserve
    assert counter.count(messages) > 2 * room
    for level, pct in ((2, 75), (3, 40)):
        view = retain(messages, level, FIT, Retention(room=room, count=counter.count)).messages
        target = room * pct // 100
        assert 0.6 * target < counter.count(view) <= target, level
        assert view[-1] == messages[-1]


def stdlib_session() -> list[Message]:
    """An agent reading standard-library modules: real code as results, docstrings as prose."""
    modules = [json, inspect, textwrap, pytest]
    messages = [SYSTEM, GOAL]
    for turn in range(24):
        module = modules[turn % len(modules)]
        source = inspect.getsource(module)
        call = ToolCall(id=f"r{turn}", name="read_file", arguments={"path": module.__name__})
        messages += [
            Message.user(f"What does {module.__name__} do? (step {turn})"),
            Message.assistant("Reading the source.", tool_calls=(call,)),
            Message.tool(f"r{turn}", source[: 4_000 + 800 * turn]),
            Message.assistant(inspect.getdoc(module) or module.__name__),
        ]
    return messages


# --- through the client -------------------------------------------------------------------


def windowed(window: int, *, declares: bool = True) -> WindowedProvider:
    """A vLLM-like model that states its prompt size and limit when it rejects a prompt."""
    return WindowedProvider(window=window, declares_limits=declares, answer=short_answer)


def short_answer(messages: Sequence[Message]) -> str:
    return f"Answered, with {len(messages)} messages in view."


def test_a_declared_window_recovers_in_one_call_and_fills_the_room() -> None:
    provider = windowed(16_000)
    messages = agent_session(80)
    assert provider.count(messages) > 3 * provider.window
    reply = Client(provider).send(messages, max_tokens=1_000)
    assert reply.calls == 1
    room = provider.window - 1_000
    # Measured by the provider's own tokenizer, not by the estimator that chose the view.
    assert 0.6 * room <= provider.count(reply.view) <= room
    assert reply.view[-1] == messages[-1] and reply.view[1] == GOAL


def test_a_declared_window_and_a_dense_tokenizer_recount_level_2_not_fall_to_level_3() -> None:
    # About one token per 1.3 chars: the uncalibrated estimate (4 chars/token) chooses a level-2
    # view three times the window. The rejection states the real count; level 2 recounted with
    # it fits, and is sent instead of level 3's lower share.
    provider = WindowedProvider(window=16_000, chars_per_token=1.3, answer=short_answer)
    messages = agent_session(60)
    reply = Client(provider).send(messages, max_tokens=1_000)
    assert [e.level for e in reply.events if isinstance(e, LevelApplied)] == [2, 2]
    assert reply.calls == 2
    room = provider.window - 1_000
    assert 0.6 * room <= provider.count(reply.view) <= room


def test_seed_retention_keeps_the_seed_counts() -> None:
    provider = windowed(16_000)
    messages = agent_session(80)
    reply = Client(provider, RecoveryConfig(retention="seed")).send(messages, max_tokens=1_000)
    assert reply.calls == 1
    # The last ten, and the latest request pinned in front when they hold none.
    assert len(others(reply.view)) <= FIT.emergency_keep_messages + 1
    assert provider.count(reply.view) < 0.2 * provider.window


def test_a_window_learned_from_an_overflow_is_kept_for_the_next_send() -> None:
    provider = windowed(16_000, declares=False)
    messages = agent_session(80)
    client = Client(provider)
    first = client.send(messages, max_tokens=1_000)
    assert first.calls == 2  # the first overflow states the window
    assert client.learned_windows == {"": 16_000}
    more = [*messages, first.message, Message.user("and module 81?")]
    assert client.send(more, max_tokens=1_000).calls == 1
    # An app persists the learned windows and gives them back to a new client.
    again = Client(provider, learned_windows=client.learned_windows)
    assert again.send(more, max_tokens=1_000).calls == 1


@pytest.mark.parametrize(("declares", "calls"), [(True, 1), (False, 2)])
def test_a_latest_message_five_times_the_window_is_answered_and_the_session_goes_on(
    declares: bool, calls: int
) -> None:
    provider = windowed(8_000, declares=declares)
    paste = Message.user("Summarise this log:\n" + "GET /index.html 200 0.003s\n" * 5_300)
    assert provider.count([paste]) > 5 * provider.window
    client = Client(provider)
    transcript = [*agent_session(6), paste]
    reply = client.send(transcript, max_tokens=500)
    assert reply.calls == calls and not reply.truncated
    sent = reply.view[-1]
    assert sent.text.startswith("Summarise this log:\n") and CUT_NOTE in sent.text
    transcript += [reply.message, Message.user("Thanks. Which module did we read first?")]
    follow_up = client.send(transcript, max_tokens=500)
    assert follow_up.calls == 1
    assert follow_up.view[-1] == transcript[-1]


def test_a_system_prompt_larger_than_the_window_fails_with_advice() -> None:
    provider = windowed(2_000)
    messages = [Message.system("rules\n" * 4_000), Message.user("hi")]
    with pytest.raises(ContextRecoveryError) as raised:
        Client(provider).send(messages, max_tokens=100)
    text = str(raised.value)
    assert "/clear" in text and "--context-window" in text and "system prompt" in text
    assert len(provider.requests) <= 2


def test_the_plain_ladder_retains_by_the_counts_the_provider_stated() -> None:
    # A tokenizer far from the estimator's 4 chars/token (the demo's tiny model takes about
    # one token per char of code): uncalibrated, "75% of the room" would be twice the window.
    provider = WindowedProvider(window=8_000, chars_per_token=1.5, answer=short_answer)
    messages = agent_session(40)
    reply = Client(provider, predictive=False).send(messages, max_tokens=200)
    assert [e.level for e in reply.events if isinstance(e, LevelApplied)] == [1, 2]
    assert provider.count(reply.view) <= (provider.window - 200) * 0.8


def test_the_demo_shows_how_full_a_recovered_view_is() -> None:
    report = apply_recovery_level(agent_session(3), 2, FIT).report
    applied = LevelApplied(
        level=2, name="emergency truncation", report=report, kept=8, total=14, chars_freed=10
    )
    reply = Reply(
        message=Message.assistant("ok"),
        usage=Usage(input_tokens=630, output_tokens=16),
        events=(applied,),
        truncated=False,
        view=(),
        stop_reason=StopReason.END_TURN,
        calls=2,
    )
    calls = (
        CallRecord(kind=CallKind.FAILED, usage=Usage()),
        CallRecord(kind=CallKind.ANSWER, usage=Usage(input_tokens=630, output_tokens=16)),
    )
    turn = Turn(reply=reply, request_id=1, cost=None, recovery_cost=None, calls=calls)
    assert view_fill(turn, 1_024, 16) == (
        "recovered view: 630 tokens, 62% of the room (1,024-token window - 16 output)"
    )
    plain = Turn(
        reply=replace(reply, events=()), request_id=1, cost=None, recovery_cost=None, calls=calls
    )
    assert view_fill(plain, 1_024, 16) is None  # no level applied: nothing recovered


def test_one_request_then_a_long_agent_run_fills_the_target() -> None:
    # The seed pins the request in front of its last ten; the fit view pins it too, in front
    # of far more: the seed's floor must not win because the pinned request is not adjacent.
    messages = [SYSTEM, Message.user("Fix every module.")]
    for i in range(80):
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"m{i}.py"})
        messages += [
            Message.assistant(f"Reading {i}.", tool_calls=(call,)),
            Message.tool(f"c{i}", f"code of module {i}\n" * 100),
        ]
    room = 20_000
    view = retain(messages, 2, FIT, Retention(room=room, count=count)).messages
    assert 0.6 * room * 0.75 < count(view) <= room * 0.75
    assert view[1] == messages[1] and view[-1] == messages[-1]


def test_a_pinned_goal_leads_a_span_that_starts_inside_an_agent_run() -> None:
    # The goal, an agent run with no user message, the latest request and two more rounds:
    # the span starts inside the run, and the pinned goal is the user message leading it.
    messages = [SYSTEM, GOAL]
    for i in range(80):
        call = ToolCall(id=f"c{i}", name="run", arguments={"cmd": f"pytest t{i}.py"})
        messages += [
            Message.assistant(f"Step {i}.", tool_calls=(call,)),
            Message.tool(f"c{i}", f"t{i}.py PASSED\n" * 150),
        ]
    messages += [Message.user("Now the latest request."), Message.assistant("On it.")]
    room = 20_000
    view = retain(messages, 2, FIT, Retention(room=room, count=count)).messages
    assert view[1] == GOAL and view[2].role is Role.ASSISTANT
    assert 0.6 * room * 0.75 < count(view) <= room * 0.75
