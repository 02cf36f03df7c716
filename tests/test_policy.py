"""The recovery policy, step by step: outcomes in, actions out, no provider and no I/O.

Outcomes here are our own `ProviderError(ErrorInfo)` values (what an adapter raises after
classifying once) and `Response`s; real provider bodies are exercised in test_client*.py.

The ladder's mechanics (levels, skips, calibration, fits) are walked with the seed's retention,
whose views `level_views` knows in advance; retention by tokens ("fit") is walked in
test_retention.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.continuation import (
    CONTINUATION_MESSAGE,
    DEFAULT_MAX_TOKENS,
    continuation_request_messages,
)
from chatcli.errors import ContextRecoveryError, ErrorInfo, ErrorKind, ProviderError
from chatcli.events import (
    Continued,
    Escalated,
    Event,
    LevelApplied,
    LevelSkipped,
    MaxTokensFitted,
    OutputCapLowered,
    OverflowDetected,
    PreflightRecovery,
    RecoveryFailed,
    Retried,
    SilentTruncationDetected,
    ToolCallsDropped,
)
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.carry import Numbering
from chatcli.history.microcompact import microcompact
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import TRUNCATION_NOTICE, apply_recovery_level
from chatcli.messages import Message, StopReason, ToolCall, Usage
from chatcli.providers.base import Response
from chatcli.recovery import (
    LAST_LEVEL_MARGIN,
    PREFLIGHT_MARGIN,
    RETRY_MAX_DELAY,
    Flow,
    RecoveryPolicy,
    Reply,
    Send,
    Sleep,
    retry_delay,
    useful_output_room,
)
from tests.fakes import response

CONFIG = RecoveryConfig(retention="seed")
# What a policy built without an estimator counts with: the expected figures are its counts.
ESTIMATOR = RecoveryPolicy().estimator


def seed_policy(**settings: object) -> RecoveryPolicy:
    """A policy with the seed's retention (`CONFIG`) unless given another config."""
    config = settings.pop("config", CONFIG)
    return RecoveryPolicy(config=config, **settings)  # type: ignore[arg-type]


def session(turns: int = 12) -> tuple[Message, ...]:
    """A system prompt, then user / assistant+tool call / tool result / assistant turns."""
    messages = [Message.system("You are a careful coding agent.")]
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"src/{i}.py"})
        messages += [
            Message.user(f"request {i}: fix the bug in module {i}"),
            Message.assistant(f"Reading module {i}.", tool_calls=(call,)),
            Message.tool(f"c{i}", f"line {i}\n" * 3000),  # ~21,000 chars: over the budget
            Message.assistant(f"Fixed module {i}. " + "Explanation. " * 500),
        ]
    return tuple(messages)


def level_views(messages: Sequence[Message], *, micro: bool = True) -> list[tuple[Message, ...]]:
    """The views the policy builds by default: base (microcompaction + budget + pairing), then
    levels 1-3 in a chain. `micro=False`: without microcompaction, for a policy built with
    `microcompact=None` (with a small window declared, microcompaction's trigger is half the
    room, so it would act: tests of the ladder alone turn it off on both sides)."""
    compacted = microcompact(messages, MicrocompactConfig()).messages if micro else messages
    budgeted = enforce_tool_result_budget(
        compacted,
        per_result_chars=CONFIG.tool_result_max_chars,
        per_turn_chars=CONFIG.tool_result_budget_chars,
    )
    views = [repair_tool_pairing(budgeted.messages).messages]
    number = Numbering(messages)  # the notice names what it stands for, as the ladder's
    for level in (1, 2, 3):
        views.append(apply_recovery_level(views[-1], level, CONFIG, number).messages)
    return views


def overflow(**numbers: int) -> ProviderError:
    return ProviderError(ErrorInfo(kind=ErrorKind.CONTEXT_OVERFLOW, message="too long", **numbers))


def failure(kind: ErrorKind, **fields: float | int) -> ProviderError:
    return ProviderError(ErrorInfo(kind=kind, message=kind.value, **fields))  # type: ignore[arg-type]


class Walk:
    """Drives a flow by hand, collecting the events it emits."""

    def __init__(self, policy: RecoveryPolicy, messages: Sequence[Message], **kw: int) -> None:
        self.events: list[Event] = []
        self.flow: Flow = policy.flow(messages, emit=self.events.append, **kw)
        self.action = next(self.flow)

    def send(self, outcome: Response | Exception | None) -> Send | Sleep:
        self.action = self.flow.send(outcome)
        return self.action

    def finish(self, outcome: Response | Exception) -> Reply:
        with pytest.raises(StopIteration) as done:
            self.flow.send(outcome)
        reply = done.value.value
        assert isinstance(reply, Reply)
        return reply

    def sent(self) -> Send:
        assert isinstance(self.action, Send)
        return self.action


def kinds(events: Sequence[Event]) -> list[type[Event]]:
    return [type(event) for event in events]


# --- the working view -------------------------------------------------------------------


def test_first_request_is_the_shaped_transcript_and_success_finishes() -> None:
    messages = session()
    walk = Walk(seed_policy(), messages, max_tokens=1000)
    request = walk.sent().request
    assert request.messages == level_views(messages)[0]
    # The old 21,000-char results were microcompacted, the latest cut to 20,000 by the budget.
    assert len(request.messages[-2].text) < 20_000 < len(messages[-2].text)
    assert request.max_tokens == 1000
    reply = walk.finish(response("done", usage=Usage(100, 5)))
    assert (reply.message.text, reply.calls, reply.events, reply.truncated) == (
        "done",
        1,
        (),
        False,
    )
    assert reply.view == request.messages
    assert reply.usage == Usage(100, 5)
    assert reply.stop_reason is StopReason.END_TURN


def test_microcompaction_comes_before_the_budget_and_sees_the_original() -> None:
    # A 37,499-char log (over the 20,000-char budget), then four assistant turns: the stub
    # states its exact lines and size. Had the budget cut it first, microcompaction would see
    # 20,000 chars: the size comes back from the cut marker, the lines do not ("N+ lines").
    call = ToolCall(id="log", name="run", arguments={"cmd": "make test"})
    output = "".join(f"12:00:{i % 60:02d} INFO step {i:05d}\n" for i in range(1_500))[:-1]
    messages = [Message.user("run the tests"), Message.assistant(tool_calls=(call,))]
    messages += [Message.tool("log", output), Message.assistant("Read it.")]
    for i in range(3):
        messages += [Message.user(f"and then {i}?"), Message.assistant(f"done {i}")]
    aging = MicrocompactConfig(trigger_tokens=0)  # by age alone, as the seed
    stub = Walk(seed_policy(microcompact=aging), messages).sent().request.messages[2].text
    assert "run, call log: log, 1,500 lines, 37,499 chars" in stub
    budget_first = enforce_tool_result_budget(
        messages,
        per_result_chars=CONFIG.tool_result_max_chars,
        per_turn_chars=CONFIG.tool_result_budget_chars,
    )
    after_budget = microcompact(budget_first.messages, aging).messages[2].text
    assert ", 1,500 lines," not in after_budget and "+ lines, 37,499 chars" in after_budget


def test_microcompaction_can_be_turned_off() -> None:
    messages = session()
    walk = Walk(seed_policy(microcompact=None), messages)
    assert walk.sent().request.messages[2] == messages[2]  # 11 turns old, 21,000 chars
    assert RecoveryPolicy(microcompact=None).apply_microcompaction(messages) == messages


def test_the_callers_list_is_not_changed() -> None:
    messages = list(session(3))
    before = list(messages)
    walk = Walk(seed_policy(predictive=False), messages)
    walk.send(overflow())
    walk.send(overflow())
    walk.finish(response())
    assert messages == before


# --- the plain ladder -------------------------------------------------------------------


def test_plain_ladder_sends_each_level_in_turn_then_raises_chained() -> None:
    messages = session()
    views = level_views(messages)
    walk = Walk(seed_policy(predictive=False), messages)
    sent = [walk.sent().request.messages]
    errors = [overflow(), overflow(), overflow()]
    for error in errors:
        sent.append(walk.send(error).request.messages)  # type: ignore[union-attr]
    assert sent == views
    last = overflow(prompt_tokens=9, limit=5)
    with pytest.raises(ContextRecoveryError) as raised:
        walk.send(last)
    assert raised.value.__cause__ is last
    assert raised.value.info is last.info
    assert len(raised.value.attempts) == 3
    assert raised.value.attempts[1].startswith("level 2 (emergency truncation): kept ")
    assert kinds(walk.events) == [OverflowDetected, LevelApplied] * 3 + [
        OverflowDetected,
        RecoveryFailed,
    ]


def test_plain_ladder_sends_a_level_that_changes_nothing_too() -> None:
    # The SPEC's ladder as written, the benchmark's baseline: every level in turn.
    chat = (Message.user("q" * 50), Message.assistant("a" * 50), Message.user("go on"))
    walk = Walk(seed_policy(predictive=False), chat)
    walk.send(overflow())
    assert walk.sent().request.messages == chat
    assert kinds(walk.events) == [OverflowDetected, LevelApplied]


def test_preflight_skips_a_level_that_changes_nothing() -> None:
    # A short chat whose request alone is over the declared window: levels 1 and 2 keep it
    # as it is, level 3 is the last one (a guess never fails a request: it is sent).
    chat = (Message.user("q" * 50), Message.assistant("a" * 50), Message.user("x" * 8_000))
    walk = Walk(seed_policy(context_window=1_000), chat)
    assert [getattr(e, "unchanged", None) for e in walk.events] == [None, True, True, None]
    assert kinds(walk.events) == [PreflightRecovery, LevelSkipped, LevelSkipped, LevelApplied]
    assert walk.sent().request.messages == level_views(chat)[3]


def test_levels_are_cumulative_and_shrink() -> None:
    views = level_views(session())
    sizes = [sum(m.char_count for m in view) for view in views]
    assert sizes == sorted(sizes, reverse=True)
    assert len(set(sizes)) == 4


def test_level_applied_event_describes_what_was_kept() -> None:
    messages = session()
    walk = Walk(seed_policy(predictive=False), messages)
    walk.send(overflow())
    walk.send(overflow())
    applied = walk.events[-1]
    assert isinstance(applied, LevelApplied)
    assert applied.level == 2
    assert applied.kept == len(level_views(messages)[2])
    assert applied.total == len(messages) == 49
    assert applied.describe().startswith(
        f"level 2 (emergency truncation): kept {applied.kept} of 49"
    )
    assert applied.describe().endswith(", retrying")


def level_events(messages: Sequence[Message]) -> list[LevelApplied]:
    """The LevelApplied events of the plain ladder climbed to level 3."""
    walk = Walk(seed_policy(predictive=False), messages)
    for _ in range(3):
        walk.send(overflow())
    return [e for e in walk.events if isinstance(e, LevelApplied)]


def test_level_3_on_a_short_history_says_it_added_the_notice() -> None:
    # Nothing to drop: level 3 keeps all four messages and adds the notice, so the view is
    # larger than the transcript. The notice is not one of the transcript's messages.
    messages = [Message.user("fix it"), Message.assistant("done"), Message.user("thanks, now?")]
    messages.insert(0, Message.system("Be brief."))
    level3 = level_events(messages)[-1]
    grown = len(TRUNCATION_NOTICE)
    assert (level3.kept, level3.total, level3.chars_freed) == (4, 4, -grown)
    assert level3.describe() == (
        "level 3 (nuclear truncation): kept 4 of 4 messages, added the compaction notice "
        f"(+{grown} chars), retrying"
    )


def test_level_3_on_a_long_history_counts_only_transcript_messages_as_kept() -> None:
    level3 = level_events(session())[-1]
    assert level3.kept == len(level_views(session())[3]) - 1  # the notice is added
    assert level3.describe().startswith(
        f"level 3 (nuclear truncation): kept {level3.kept} of 49 messages, added the "
        "compaction notice, freed "
    )


def test_a_result_made_for_an_interrupted_call_is_added_not_kept() -> None:
    call = ToolCall(id="c1", name="run", arguments={"cmd": "make"})
    messages = [Message.user("build it"), Message.assistant(tool_calls=(call,))]
    messages.append(Message.user("well?"))
    level1 = level_events(messages)[0]
    assert (level1.kept, level1.total, level1.chars_freed < 0) == (3, 3, True)
    assert level1.action() == (
        "level 1 (aggressive budget): kept 3 of 3 messages, added a result for an interrupted "
        f"tool call (+{-level1.chars_freed} chars)"
    )


def test_max_recovery_attempts_limits_the_levels() -> None:
    walk = Walk(
        seed_policy(config=RecoveryConfig(max_recovery_attempts=1, retention="seed")), session()
    )
    walk.send(overflow())
    with pytest.raises(ContextRecoveryError) as raised:
        walk.send(overflow())
    assert len(raised.value.attempts) == 1


def test_zero_recovery_attempts_raises_at_once() -> None:
    walk = Walk(
        seed_policy(config=RecoveryConfig(max_recovery_attempts=0, retention="seed")), session()
    )
    error = overflow()
    with pytest.raises(ContextRecoveryError) as raised:
        walk.send(error)
    assert raised.value.attempts == ()
    assert raised.value.__cause__ is error


# --- predictive: calibration and skips ---------------------------------------------------


def test_stated_numbers_calibrate_and_skip_levels_predicted_not_to_fit() -> None:
    messages = session()
    views = level_views(messages)
    stated = ESTIMATOR.count(views[0]) * 5 // 4  # the real tokenizer is 25% denser
    calibrated = ESTIMATOR.calibrated(views[0], stated)
    level1, level2 = calibrated.count(views[1]), calibrated.count(views[2])
    assert level2 < level1
    limit = (level1 + level2) // 2
    walk = Walk(seed_policy(), messages)
    walk.send(overflow(prompt_tokens=stated, limit=limit))
    assert walk.sent().request.messages == views[2]
    skipped = walk.events[1]
    assert skipped == LevelSkipped(
        level=1, name="aggressive budget", predicted_tokens=level1, reserve=0, limit=limit
    )
    assert skipped.describe() == (
        f"level 1 (aggressive budget) skipped: predicted {level1:,} > {limit:,} tokens"
    )
    assert kinds(walk.events) == [OverflowDetected, LevelSkipped, LevelApplied]
    assert walk.finish(response()).calls == 2


def test_when_no_level_is_predicted_to_fit_it_raises_without_a_call() -> None:
    messages = session()
    views = level_views(messages)
    stated = ESTIMATOR.count(views[0])
    walk = Walk(seed_policy(), messages, max_tokens=100)
    error = overflow(prompt_tokens=stated, limit=50)  # not even the level-3 view fits
    with pytest.raises(ContextRecoveryError) as raised:
        walk.send(error)
    assert raised.value.__cause__ is error
    assert [a.split(" skipped")[0] for a in raised.value.attempts] == [
        "level 1 (aggressive budget)",
        "level 2 (emergency truncation)",
        "level 3 (nuclear truncation)",
    ]
    assert " + 100 output > 50 tokens" in raised.value.attempts[2]


@pytest.mark.parametrize(("over", "sent"), [(1.14, True), (1.16, False)])
def test_the_last_level_is_sent_unless_clearly_over_the_window(over: float, sent: bool) -> None:
    # Levels 1 and 2 are predicted well over the window and skipped; level 3, the last
    # chance, is predicted over it by 14% (a near miss: sent) or by 16% (raised, no call).
    messages = session()
    views = level_views(messages)
    stated = ESTIMATOR.count(views[0])
    predicted = ESTIMATOR.calibrated(views[0], stated).count(views[3])
    limit = math.floor((predicted + 100) / over)
    assert (over <= 1 + LAST_LEVEL_MARGIN) is sent
    walk = Walk(seed_policy(), messages, max_tokens=100)
    error = overflow(prompt_tokens=stated, limit=limit)
    if not sent:
        with pytest.raises(ContextRecoveryError) as raised:
            walk.send(error)
        assert raised.value.__cause__ is error
        assert kinds(walk.events)[1:] == [LevelSkipped] * 3 + [RecoveryFailed]
        return
    walk.send(error)
    assert walk.sent().request.messages == views[3]
    assert kinds(walk.events)[1:] == [LevelSkipped, LevelSkipped, LevelApplied]
    assert predicted + 100 > limit  # a miss all the same


@pytest.mark.parametrize(
    ("reason", "message", "silent"),
    [
        ("silent_truncation", "the server read 2,048 of ~9,000 tokens", True),  # structured
        (None, "prompt silently truncated by the server (detected from usage): ...", False),
        (None, "prompt is too long: 9000 tokens > 2048 maximum", False),
        ("pattern", "the prompt was not silently truncated by the server", False),
    ],
)
def test_a_silent_truncation_is_reported_before_the_recovery(
    reason: str | None, message: str, silent: bool
) -> None:
    # A silent cut states the window it cut to (one it does not state is tested in
    # tests/test_silent_truncation.py: no level can help then).
    limit = 2_048 if silent else None
    info = ErrorInfo(
        kind=ErrorKind.CONTEXT_OVERFLOW,
        message=message,
        reason=reason,
        prompt_tokens=9_000,
        limit=limit,
    )
    walk = Walk(seed_policy(), session())
    walk.send(ProviderError(info))
    first = [SilentTruncationDetected, OverflowDetected] if silent else [OverflowDetected]
    assert kinds(walk.events)[: len(first)] == first
    assert kinds(walk.events)[-1] is LevelApplied  # then the recovery, as for any overflow
    if silent:
        event = walk.events[0]
        assert event == SilentTruncationDetected(expected_tokens=9_000, detail=message)
        assert event.describe() == f"the provider silently truncated the prompt ({message})"


def test_requested_minus_output_is_the_prompt_size() -> None:
    # e.g. "you requested 141403 tokens (133211 in the messages, 8192 in the completion)"
    messages = session()
    walk = Walk(seed_policy(), messages, max_tokens=1000)
    walk.send(overflow(requested_tokens=51_000, limit=40_000))
    detected = walk.events[0]
    assert isinstance(detected, OverflowDetected)
    assert (detected.prompt_tokens, detected.limit) == (50_000, 40_000)
    assert detected.describe() == "context overflow (50,000 > 40,000 tokens)"


def test_an_uncalibrated_guess_never_fails_without_a_call() -> None:
    messages = session()
    views = level_views(messages)
    # The window is declared, the error states no numbers: predictions are guesses.
    walk = Walk(seed_policy(context_window=200), messages)
    assert kinds(walk.events) == [PreflightRecovery, LevelSkipped, LevelSkipped, LevelApplied]
    assert walk.sent().request.messages == views[3]
    with pytest.raises(ContextRecoveryError):
        walk.send(overflow())


def test_plain_ladder_ignores_numbers() -> None:
    messages = session()
    walk = Walk(seed_policy(microcompact=None, predictive=False, context_window=200), messages)
    assert walk.sent().request.messages == level_views(messages, micro=False)[0]
    walk.send(overflow(prompt_tokens=10**6, limit=200))
    assert walk.sent().request.messages == level_views(messages, micro=False)[1]
    assert kinds(walk.events) == [OverflowDetected, LevelApplied]


# --- the output does not fit, the prompt does: max_tokens fitted -------------------------


@pytest.mark.parametrize(
    ("requested", "limit", "room"),
    [
        (8_192, 200_000, 2_048),  # a quarter of the request
        (64_000, 64_001, 16_000),
        (3_000, 2_048, 1_024),  # over the window: a quarter of the window, at least 1,024
        (8_000, 4_096, 1_024),
        (1_000_000, 128_000, 32_000),
        (2_000, 200_000, 1_024),  # never under MIN_OUTPUT_ROOM ...
        (350, 4_096, 350),  # ... nor over the request
    ],
)
def test_useful_output_room(requested: int, limit: int, room: int) -> None:
    assert useful_output_room(requested, limit) == room


@pytest.mark.parametrize("predictive", [True, False])
def test_an_output_that_does_not_fit_is_lowered_and_the_history_kept(predictive: bool) -> None:
    # pe-035's numbers: "'max_tokens' ... is too large: 8000. This model's maximum context
    # length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778)"
    messages = session()
    walk = Walk(seed_policy(predictive=predictive), messages, max_tokens=8000)
    first = walk.sent().request
    walk.send(overflow(prompt_tokens=2778, limit=4096, max_tokens=8000))
    assert walk.sent().request == type(first)(messages=first.messages, max_tokens=1318)
    fitted = MaxTokensFitted(old=8000, new=1318, prompt_tokens=2778, limit=4096)
    assert kinds(walk.events) == [OverflowDetected, MaxTokensFitted]
    assert walk.events[1] == fitted
    assert fitted.describe() == (
        "max_tokens lowered from 8,000 to 1,318 to fit the 2,778-token prompt in the "
        "4,096-token window; history kept, retrying"
    )
    assert walk.events[0].describe() == "context overflow (2,778 + 8,000 output > 4,096 tokens)"
    reply = walk.finish(response())
    assert (reply.view, reply.calls, reply.truncated) == (first.messages, 2, False)


def test_too_little_room_for_the_output_truncates_history_instead() -> None:
    # pe-004's numbers: "199759 + 8192 > 200000" leaves 241 tokens, under 2,048 (a quarter)
    messages = session()
    walk = Walk(seed_policy(predictive=False), messages, max_tokens=8192)
    walk.send(overflow(prompt_tokens=199_759, limit=200_000, max_tokens=8192))
    assert walk.sent().request.max_tokens == 8192
    assert walk.sent().request.messages == level_views(messages)[1]
    assert kinds(walk.events) == [OverflowDetected, LevelApplied]


def test_the_sent_max_tokens_counts_when_only_the_sum_is_stated() -> None:
    # Cohere's form: "total number of tokens (prompt and prediction) cannot exceed 2048 -
    # received 6354", here with a prompt that fits: 2,548 - 2,000 sent = 548 tokens.
    walk = Walk(seed_policy(), session(), max_tokens=2000)
    walk.send(overflow(requested_tokens=2548, limit=2048))
    assert walk.sent().request.max_tokens == 1500
    assert walk.events[1] == MaxTokensFitted(old=2000, new=1500, prompt_tokens=548, limit=2048)


def test_a_fitted_request_that_still_overflows_goes_to_the_levels() -> None:
    messages = session()
    walk = Walk(seed_policy(predictive=False), messages, max_tokens=8000)
    walk.send(overflow(prompt_tokens=2778, limit=4096, max_tokens=8000))
    walk.send(overflow(prompt_tokens=2778, limit=4096, max_tokens=1318))  # numbers lied
    assert walk.sent().request.messages == level_views(messages)[1]
    assert walk.sent().request.max_tokens == 1318
    assert kinds(walk.events) == [OverflowDetected, MaxTokensFitted, OverflowDetected, LevelApplied]


def test_after_a_level_the_numbers_can_show_room_for_the_output() -> None:
    # Azure's pe-059 asked 1,000,000 output tokens of a 128,000 window: no history cut
    # makes that fit, but once the prompt is small the room left is worth answering in.
    messages = session()
    walk = Walk(seed_policy(predictive=False), messages, max_tokens=1_000_000)
    walk.send(overflow(prompt_tokens=124_171, limit=128_000, max_tokens=1_000_000))
    walk.send(overflow(prompt_tokens=60_000, limit=128_000, max_tokens=1_000_000))
    assert walk.sent().request.messages == level_views(messages)[1]
    assert walk.sent().request.max_tokens == 68_000
    assert kinds(walk.events) == [OverflowDetected, LevelApplied, OverflowDetected, MaxTokensFitted]


def test_calibrated_a_level_that_leaves_useful_room_is_sent_with_the_output_fitted() -> None:
    # The same request, predictive: skipping every level because 1,000,000 output tokens fit
    # next to none of them would fail it; level 1 leaves a useful room, so it is sent with
    # max_tokens fitted to that room, without another rejected call.
    messages = session()
    views = level_views(messages)
    stated = ESTIMATOR.count(views[0])
    level1 = ESTIMATOR.calibrated(views[0], stated).count(views[1])
    limit = level1 * 4 // 3 + 10  # level 1 leaves a quarter of the window; the base does not
    walk = Walk(seed_policy(), messages, max_tokens=1_000_000)
    walk.send(overflow(prompt_tokens=stated, limit=limit, max_tokens=1_000_000))
    assert walk.sent().request.messages == views[1]
    assert walk.sent().request.max_tokens == limit - level1
    assert kinds(walk.events) == [OverflowDetected, LevelApplied, MaxTokensFitted]
    assert walk.events[2] == MaxTokensFitted(
        old=1_000_000, new=limit - level1, prompt_tokens=level1, limit=limit, estimated=True
    )


def test_calibrated_a_level_with_room_for_the_whole_output_is_not_fitted() -> None:
    messages = session()
    views = level_views(messages)
    stated = ESTIMATOR.count(views[0])
    level1 = ESTIMATOR.calibrated(views[0], stated).count(views[1])
    walk = Walk(seed_policy(), messages, max_tokens=1000)
    walk.send(overflow(prompt_tokens=stated, limit=level1 + 1000, max_tokens=1000))
    assert walk.sent().request.messages == views[1]
    assert walk.sent().request.max_tokens == 1000
    assert kinds(walk.events) == [OverflowDetected, LevelApplied]


def test_output_that_was_not_the_problem_is_not_lowered() -> None:
    # The stated prompt plus the output fits: lowering max_tokens cannot help.
    messages = session()
    walk = Walk(seed_policy(predictive=False), messages, max_tokens=1000)
    walk.send(overflow(prompt_tokens=2000, limit=4096, max_tokens=1000))
    assert walk.sent().request.max_tokens == 1000
    assert kinds(walk.events) == [OverflowDetected, LevelApplied]


# --- pre-flight ---------------------------------------------------------------------------


def test_preflight_recovers_a_clear_excess_before_the_first_call() -> None:
    messages = session()
    views = level_views(messages, micro=False)
    window = ESTIMATOR.count(views[2]) + 10  # level 2 fits with the 10-token reserve
    assert ESTIMATOR.count(views[1]) + 10 > window * (1 + PREFLIGHT_MARGIN)  # level 1 does not
    walk = Walk(seed_policy(microcompact=None, context_window=window), messages, max_tokens=10)
    assert walk.sent().request.messages == views[2]
    estimate = ESTIMATOR.count(views[0])
    assert walk.events[0] == PreflightRecovery(estimate=estimate, reserve=10, window=window)
    assert walk.events[0].describe() == (
        f"pre-flight: estimated {estimate:,} + 10 output tokens > {window:,}-token window, "
        "recovering before sending"
    )
    assert kinds(walk.events) == [PreflightRecovery, LevelSkipped, LevelApplied]
    applied = walk.events[2]
    assert isinstance(applied, LevelApplied) and applied.preflight
    assert applied.describe() == f"{applied.action()}, sending"  # nothing was rejected yet
    assert walk.finish(response()).calls == 1


def test_preflight_leaves_a_near_miss_alone() -> None:
    messages = session()
    estimate = ESTIMATOR.count(level_views(messages, micro=False)[0])
    walk = Walk(seed_policy(microcompact=None, context_window=estimate - 100), messages)
    assert walk.events == []
    assert walk.sent().request.messages == level_views(messages, micro=False)[0]


def test_preflight_fits_the_output_when_the_prompt_fits() -> None:
    messages = session(2)
    estimate = ESTIMATOR.count(level_views(messages, micro=False)[0])
    room = 3000
    window = math.ceil(estimate * (1 + PREFLIGHT_MARGIN)) + room
    assert estimate + 8000 > window * (1 + PREFLIGHT_MARGIN)  # a clear excess, of the output
    walk = Walk(seed_policy(microcompact=None, context_window=window), messages, max_tokens=8000)
    assert walk.sent().request.messages == level_views(messages, micro=False)[0]
    assert walk.sent().request.max_tokens == room
    fitted = MaxTokensFitted(
        old=8000, new=room, prompt_tokens=estimate, limit=window, estimated=True
    )
    assert walk.events == [fitted]
    assert fitted.describe().endswith("-token window; history kept, sending")
    assert f"fit the ~{estimate:,}-token prompt" in fitted.describe()


def test_preflight_truncates_when_the_room_left_is_too_small() -> None:
    messages = session(2)
    estimate = ESTIMATOR.count(level_views(messages, micro=False)[0])
    window = math.ceil(estimate * (1 + PREFLIGHT_MARGIN)) + 1000  # under a quarter of 8,000
    walk = Walk(seed_policy(microcompact=None, context_window=window), messages, max_tokens=8000)
    assert walk.sent().request.max_tokens == 8000
    assert kinds(walk.events)[0] is PreflightRecovery
    assert LevelApplied in kinds(walk.events)


def test_preflight_lowers_max_tokens_to_the_known_cap() -> None:
    walk = Walk(seed_policy(max_output_tokens=4096), session(2), max_tokens=10_000)
    assert walk.sent().request.max_tokens == 4096
    assert walk.events == [OutputCapLowered(old=10_000, new=4096)]


def preflight_without_max_tokens(room: int, cap: int | None) -> Walk:
    """A one-turn session sent without max_tokens, in a window that leaves `room` tokens next
    to its estimate grown by the pre-flight margin."""
    messages = session(1)
    estimate = ESTIMATOR.count(level_views(messages)[0])
    window = math.ceil(estimate * (1 + PREFLIGHT_MARGIN)) + room
    return Walk(seed_policy(context_window=window, max_output_tokens=cap), messages)


def test_without_max_tokens_preflight_reserves_the_output_and_fits_it() -> None:
    # 2,000 tokens left: the reserve (4,096 of the 64,000 cap) does not fit, the room is
    # useful, so max_tokens is set to it: no answer runs into a full window.
    walk = preflight_without_max_tokens(2_000, cap=64_000)
    assert walk.sent().request.max_tokens == 2_000
    assert kinds(walk.events) == [MaxTokensFitted]
    assert walk.events[0].old is None  # type: ignore[attr-defined]


def test_without_max_tokens_too_little_room_for_the_reserve_recovers_before_sending() -> None:
    walk = preflight_without_max_tokens(500, cap=64_000)
    preflight = walk.events[0]
    assert isinstance(preflight, PreflightRecovery) and preflight.reserve == DEFAULT_MAX_TOKENS
    assert walk.sent().request.messages != level_views(session(1))[0]


@pytest.mark.parametrize(("room", "cap"), [(DEFAULT_MAX_TOKENS, 64_000), (10, None)])
def test_without_max_tokens_the_reserve_is_the_default_at_most(room: int, cap: int | None) -> None:
    # Reserving the whole 64,000-token cap would truncate this history for nothing; with the
    # cap unknown nothing is reserved.
    walk = preflight_without_max_tokens(room, cap=cap)
    assert walk.events == []
    assert walk.sent().request.max_tokens is None


# --- output cap, retries, other errors ----------------------------------------------------


def test_output_cap_lowers_max_tokens_and_keeps_the_history() -> None:
    walk = Walk(seed_policy(), session(2), max_tokens=8192)
    first = walk.sent().request
    walk.send(failure(ErrorKind.OUTPUT_CAP, max_tokens=8192, output_limit=4096))
    assert walk.sent().request == type(first)(messages=first.messages, max_tokens=4096)
    assert walk.events == [OutputCapLowered(old=8192, new=4096)]


def test_output_cap_lowering_is_bounded() -> None:
    walk = Walk(seed_policy(), session(2), max_tokens=8192)
    walk.send(failure(ErrorKind.OUTPUT_CAP, output_limit=4096))
    walk.send(failure(ErrorKind.OUTPUT_CAP, output_limit=2048))
    third = failure(ErrorKind.OUTPUT_CAP, output_limit=1024)
    with pytest.raises(ProviderError) as raised:
        walk.send(third)
    assert raised.value is third


def test_output_cap_without_a_lower_number_is_raised() -> None:
    walk = Walk(seed_policy(), session(2), max_tokens=4096)
    error = failure(ErrorKind.OUTPUT_CAP, output_limit=4096)
    with pytest.raises(ProviderError):
        walk.send(error)


def test_rate_limit_backs_off_then_resends_the_same_request() -> None:
    walk = Walk(seed_policy(max_retries=2), session(2))
    first = walk.sent().request
    assert walk.send(failure(ErrorKind.RATE_LIMIT)) == Sleep(seconds=1.0)
    assert walk.send(None) == Send(request=first)
    assert walk.send(failure(ErrorKind.TRANSIENT, retry_after=7)) == Sleep(seconds=7.0)
    assert walk.send(None) == Send(request=first)
    last = failure(ErrorKind.RATE_LIMIT)
    with pytest.raises(ProviderError) as raised:
        walk.send(last)
    assert raised.value is last
    assert walk.events == [
        Retried(kind=ErrorKind.RATE_LIMIT, attempt=1, delay=1.0),
        Retried(kind=ErrorKind.TRANSIENT, attempt=2, delay=7.0),
    ]


def test_a_success_resets_the_retry_count() -> None:
    walk = Walk(seed_policy(max_retries=1), session(2), max_tokens=100)
    walk.send(failure(ErrorKind.RATE_LIMIT))
    walk.send(None)
    walk.send(response("part", stop=StopReason.MAX_TOKENS))  # a success: counters reset
    assert isinstance(walk.send(failure(ErrorKind.RATE_LIMIT)), Sleep)
    walk.send(None)
    assert walk.finish(response(" rest")).calls == 4


def test_a_retry_after_beyond_the_cap_is_not_waited_for() -> None:
    walk = Walk(seed_policy(), session(2))
    error = failure(ErrorKind.RATE_LIMIT, retry_after=RETRY_MAX_DELAY + 1)
    with pytest.raises(ProviderError):
        walk.send(error)


@pytest.mark.parametrize(
    ("attempt", "retry_after", "delay"),
    [(1, None, 1.0), (2, None, 2.0), (3, None, 4.0), (9, None, RETRY_MAX_DELAY), (1, 0.5, 0.5)],
)
def test_retry_delay(attempt: int, retry_after: float | None, delay: float) -> None:
    assert retry_delay(attempt, retry_after) == delay


@pytest.mark.parametrize(
    "kind", [ErrorKind.AUTH, ErrorKind.QUOTA, ErrorKind.PAYLOAD_TOO_LARGE, ErrorKind.OTHER]
)
def test_other_errors_are_raised_as_they_are(kind: ErrorKind) -> None:
    walk = Walk(seed_policy(), session(2))
    error = failure(kind)
    with pytest.raises(ProviderError) as raised:
        walk.send(error)
    assert raised.value is error


def test_a_foreign_exception_is_wrapped_and_chained() -> None:
    walk = Walk(seed_policy(), session(2))
    error = KeyError("boom")
    with pytest.raises(ProviderError) as raised:
        walk.send(error)
    assert raised.value.__cause__ is error


# --- max_tokens escalation and continuation ------------------------------------------------


def test_a_cut_answer_is_escalated_continued_and_stitched() -> None:
    messages = session(2)
    view = level_views(messages)[0]
    walk = Walk(seed_policy(), messages, max_tokens=1000)
    partial = "The fix is to change the loop bound"
    walk.send(response(partial, stop=StopReason.MAX_TOKENS, usage=Usage(50, 1000)))
    request = walk.sent().request
    assert request.max_tokens == 2000
    assert request.messages == continuation_request_messages(view, Message.assistant(partial))
    assert request.messages[-1].text == CONTINUATION_MESSAGE
    reply = walk.finish(response("change the loop bound to n - 1.", usage=Usage(60, 9)))
    assert reply.message.text == "The fix is to change the loop bound to n - 1."
    assert (reply.truncated, reply.calls, reply.view) == (False, 2, view)
    assert reply.usage == Usage(110, 1009)
    assert reply.events == (
        Escalated(attempt=1, old=1000, new=2000),
        Continued(attempt=1, max_tokens=2000),
    )


def test_escalations_run_out_and_the_partial_is_returned_truncated() -> None:
    walk = Walk(seed_policy(max_output_tokens=3000), session(2), max_tokens=1000)
    limits = [walk.sent().request.max_tokens]
    walk.send(response("one ", stop=StopReason.MAX_TOKENS))
    limits.append(walk.sent().request.max_tokens)
    walk.send(response("two ", stop=StopReason.MAX_TOKENS))
    limits.append(walk.sent().request.max_tokens)
    reply = walk.finish(response("three ", stop=StopReason.MAX_TOKENS))
    assert limits == [1000, 2000, 3000]  # doubled, then clipped to the cap
    assert reply.truncated is True
    assert reply.message.text == "one two three "
    assert reply.calls == 3
    assert reply.stop_reason is StopReason.MAX_TOKENS
    assert kinds(reply.events) == [Escalated, Continued, Escalated, Continued]


def test_at_the_cap_it_continues_without_escalating() -> None:
    walk = Walk(seed_policy(max_output_tokens=1000), session(2), max_tokens=1000)
    walk.send(response("half ", stop=StopReason.MAX_TOKENS))
    assert walk.sent().request.max_tokens == 1000
    assert walk.events == [Continued(attempt=1, max_tokens=1000)]


def test_without_max_tokens_escalation_starts_from_the_cap() -> None:
    walk = Walk(seed_policy(max_output_tokens=64_000), session(2))
    assert walk.sent().request.max_tokens is None
    walk.send(response("half ", stop=StopReason.MAX_TOKENS))
    assert walk.sent().request.max_tokens == 64_000
    assert walk.events[0] == Escalated(attempt=1, old=None, new=64_000)


def test_without_max_tokens_escalation_doubles_what_the_provider_allowed() -> None:
    # No limit sent, no cap known: the provider's own limit let 8,192 tokens through, so
    # the documented default (4,096) would lower it; escalation doubles from what it allowed.
    walk = Walk(seed_policy(), session(2))
    walk.send(response("half ", stop=StopReason.MAX_TOKENS, usage=Usage(50, 8192)))
    assert walk.sent().request.max_tokens == 16_384
    assert walk.events[0] == Escalated(attempt=1, old=None, new=16_384)


def test_without_max_tokens_a_provider_limit_at_the_cap_is_not_escalated() -> None:
    walk = Walk(seed_policy(max_output_tokens=8192), session(2))
    walk.send(response("half ", stop=StopReason.MAX_TOKENS, usage=Usage(50, 8192)))
    assert walk.sent().request.max_tokens is None  # the provider's limit: the cap already
    assert walk.events == [Continued(attempt=1, max_tokens=None)]


def calibrated_at_level_1(window: int) -> Walk:
    """A flow sending level 1's view with max_tokens 1,000, after an overflow whose numbers
    calibrated the estimate (to what `continuation_tokens` predicts with)."""
    messages = session()
    stated = ESTIMATOR.count(level_views(messages)[0])
    walk = Walk(seed_policy(), messages, max_tokens=1000)
    walk.send(overflow(prompt_tokens=stated, limit=window))
    assert walk.sent().request.messages == level_views(messages)[1]
    return walk


def continuation_tokens(level: int, partial: str) -> int:
    """The calibrated prediction for the continuation of `partial` at `level`."""
    views = level_views(session())
    estimator = ESTIMATOR.calibrated(views[0], ESTIMATOR.count(views[0]))
    return estimator.count(continuation_request_messages(views[level], Message.assistant(partial)))


def test_escalation_stops_at_the_room_the_window_leaves() -> None:
    # Doubling 1,000 would ask for 2,000 where the continuation leaves 1,500: certain to fail.
    partial = "The fix is to change the loop bound"
    window = continuation_tokens(1, partial) + 1500
    walk = calibrated_at_level_1(window)
    walk.send(response(partial, stop=StopReason.MAX_TOKENS))
    request = walk.sent().request
    assert request.max_tokens == 1500
    assert request.messages[:-2] == level_views(session())[1]
    assert walk.events[-2:] == [
        Escalated(attempt=1, old=1000, new=1500),
        Continued(attempt=1, max_tokens=1500),
    ]


def test_no_room_above_the_limit_no_escalation() -> None:
    partial = "The fix is to change the loop bound"
    walk = calibrated_at_level_1(continuation_tokens(1, partial) + 1000)
    walk.send(response(partial, stop=StopReason.MAX_TOKENS))
    assert walk.sent().request.max_tokens == 1000  # never lowered
    assert walk.events[-1] == Continued(attempt=1, max_tokens=1000)
    assert Escalated not in kinds(walk.events)


def test_a_continuation_known_not_to_fit_is_shortened_before_it_is_sent() -> None:
    partial = "The fix is to change the loop bound. " * 60  # ~560 tokens
    window = continuation_tokens(1, partial) + 500  # not even the current 1,000 fits
    walk = calibrated_at_level_1(window)
    walk.send(response(partial, stop=StopReason.MAX_TOKENS))
    request = walk.sent().request
    level2 = level_views(session())[2]
    assert request.messages == continuation_request_messages(level2, Message.assistant(partial))
    room = window - continuation_tokens(2, partial)
    assert request.max_tokens == min(2000, room) > 1000
    assert kinds(walk.events)[2:] == [PreflightRecovery, LevelApplied, Escalated, Continued]
    assert walk.events[3].level == 2  # type: ignore[attr-defined]


def test_a_continuation_no_level_can_fit_returns_the_partial_without_a_call() -> None:
    walk = calibrated_at_level_1(continuation_tokens(1, "") + 1500)
    partial = "A long answer. " * 20_000  # 300,000 chars: more than the whole window
    reply = walk.finish(response(partial, stop=StopReason.MAX_TOKENS))
    assert (reply.message.text, reply.truncated, reply.calls) == (partial, True, 2)
    assert kinds(reply.events)[2:] == [
        PreflightRecovery,
        LevelSkipped,
        LevelSkipped,
        RecoveryFailed,
    ]


def test_an_uncalibrated_guess_never_holds_an_escalation_back() -> None:
    # A declared window, no numbers yet: the guess says 2,000 leaves no room, but it is a
    # guess (~20% off against real tokenizers), so the SPEC's doubling is sent.
    partial = "The fix is to change the loop bound"
    messages = session(2)
    window = (
        ESTIMATOR.count(
            continuation_request_messages(level_views(messages)[0], Message.assistant(partial))
        )
        + 1000
    )
    walk = Walk(seed_policy(context_window=window), messages, max_tokens=1000)
    walk.send(response(partial, stop=StopReason.MAX_TOKENS))
    assert walk.sent().request.max_tokens == 2000
    assert walk.events == [
        Escalated(attempt=1, old=1000, new=2000),
        Continued(attempt=1, max_tokens=2000),
    ]


def test_zero_escalations_returns_the_cut_answer() -> None:
    config = RecoveryConfig(max_token_escalations=0)
    walk = Walk(seed_policy(config=config), session(2), max_tokens=10)
    reply = walk.finish(response("cut", stop=StopReason.MAX_TOKENS))
    assert (reply.truncated, reply.calls, reply.events) == (True, 1, ())


def test_a_cut_tool_call_is_dropped_and_the_text_continued() -> None:
    cut = ToolCall(id="t1", name="write_file", arguments={"path": "a"}, incomplete=True)
    walk = Walk(seed_policy(), session(2), max_tokens=100)
    walk.send(
        response(
            message=Message.assistant("Writing it", tool_calls=(cut,)), stop=StopReason.MAX_TOKENS
        )
    )
    assert walk.events[0] == ToolCallsDropped(names=("write_file",))
    assert walk.sent().request.messages[-2] == Message.assistant("Writing it")
    whole = ToolCall(id="t1", name="write_file", arguments={"path": "a", "text": "x"})
    reply = walk.finish(response(message=Message.assistant(" now.", tool_calls=(whole,))))
    assert reply.message.text == "Writing it now."
    assert reply.message.tool_calls == (whole,)


def test_a_cut_answer_with_complete_calls_is_returned_for_them_to_run() -> None:
    done = ToolCall(id="t1", name="read_file", arguments={"path": "a"})
    cut = ToolCall(id="t2", name="read_file", arguments={"pa": 1}, incomplete=True)
    walk = Walk(seed_policy(), session(2), max_tokens=100)
    message = Message.assistant("Reading both.", tool_calls=(done, cut))
    reply = walk.finish(response(message=message, stop=StopReason.MAX_TOKENS))
    assert reply.message.tool_calls == (done,)
    assert reply.truncated is True
    assert reply.events == (ToolCallsDropped(names=("read_file",)),)


def test_a_cut_call_whose_arguments_parse_is_never_returned() -> None:
    # The arguments parsed, so the adapter could not tell the call was cut; generation
    # stopped inside it all the same, and what parsed may be a prefix of the real arguments.
    prefix = ToolCall(id="t1", name="write_file", arguments={"path": "a"})
    walk = Walk(seed_policy(), session(2), max_tokens=100)
    cut = Message.assistant("Writing it", tool_calls=(prefix,))
    walk.send(response(message=cut, stop=StopReason.MAX_TOKENS))
    assert walk.events[0] == ToolCallsDropped(names=("write_file",))
    assert walk.sent().request.messages[-2] == Message.assistant("Writing it")
    assert all(not m.tool_calls for m in walk.sent().request.messages[-2:])
    reply = walk.finish(response(" now."))
    assert reply.message == Message.assistant("Writing it now.")


def test_of_parsed_calls_in_a_cut_answer_only_the_last_is_dropped() -> None:
    calls = tuple(
        ToolCall(id=f"t{i}", name=name, arguments={"path": "a"})
        for i, name in enumerate(("read_file", "grep", "write_file"))
    )
    walk = Walk(seed_policy(), session(2), max_tokens=100)
    message = Message.assistant("Three steps.", tool_calls=calls)
    reply = walk.finish(response(message=message, stop=StopReason.MAX_TOKENS))
    assert reply.message.tool_calls == calls[:2]  # closed before the next began: complete
    assert (reply.truncated, reply.calls) == (True, 1)
    assert reply.events == (ToolCallsDropped(names=("write_file",)),)


def test_a_continued_answer_cut_again_loses_its_last_call_too() -> None:
    walk = Walk(seed_policy(max_output_tokens=400), session(2), max_tokens=100)
    walk.send(response("Step one, ", stop=StopReason.MAX_TOKENS))
    prefix = ToolCall(id="t1", name="write_file", arguments={"path": "a"})
    again = Message.assistant("step two.", tool_calls=(prefix,))
    walk.send(response(message=again, stop=StopReason.MAX_TOKENS))
    assert kinds(walk.events) == [Escalated, Continued, ToolCallsDropped, Escalated, Continued]
    assert walk.sent().request.messages[-2] == Message.assistant("Step one, step two.")
    reply = walk.finish(response(" Done."))
    assert reply.message == Message.assistant("Step one, step two. Done.")


@pytest.mark.parametrize("stop", [StopReason.TOOL_USE, StopReason.END_TURN])
def test_a_call_the_adapter_marked_incomplete_is_dropped_at_any_stop(stop: StopReason) -> None:
    # e.g. the OpenAI adapter marks arguments that are not valid JSON, whatever the stop.
    bad = ToolCall(id="t1", name="run", incomplete=True)
    good = ToolCall(id="t2", name="read_file", arguments={"path": "a"})
    walk = Walk(seed_policy(), session(2))
    message = Message.assistant("", tool_calls=(bad, good))
    reply = walk.finish(response(message=message, stop=stop))
    assert reply.message.tool_calls == (good,)
    assert (reply.truncated, reply.stop_reason) == (False, stop)
    assert reply.events == (ToolCallsDropped(names=("run",)),)


def test_a_tool_use_answer_whose_every_call_was_dropped_is_flagged_cut() -> None:
    # "tool_use" with no call left would leave a caller waiting for calls to run.
    bad = ToolCall(id="t1", name="write_file", incomplete=True)
    walk = Walk(seed_policy(), session(2))
    message = Message.assistant("Writing it now.", tool_calls=(bad,))
    reply = walk.finish(response(message=message, stop=StopReason.TOOL_USE))
    assert reply.message == Message.assistant("Writing it now.")
    assert (reply.stop_reason, reply.truncated) == (StopReason.MAX_TOKENS, True)
    assert reply.events == (ToolCallsDropped(names=("write_file",)),)


# --- overflow reported as a stop reason; continuation overflow ------------------------------


def test_the_context_window_stop_reason_is_an_overflow() -> None:
    messages = session()
    walk = Walk(seed_policy(predictive=False), messages)
    stopped = response("", stop=StopReason.CONTEXT_WINDOW, usage=Usage(190_000, 10_000))
    walk.send(stopped)
    assert walk.sent().request.messages == level_views(messages)[1]
    reply = walk.finish(response("ok", usage=Usage(150_000, 10)))
    assert reply.usage == Usage(340_000, 10_010)
    assert kinds(reply.events) == [OverflowDetected, LevelApplied]


def test_a_continuation_that_overflows_goes_through_the_same_recovery() -> None:
    messages = session()
    views = level_views(messages)
    walk = Walk(seed_policy(predictive=False), messages, max_tokens=100)
    walk.send(response("The answer", stop=StopReason.MAX_TOKENS))
    walk.send(overflow())
    partial = Message.assistant("The answer")
    assert walk.sent().request.messages == continuation_request_messages(views[1], partial)
    reply = walk.finish(response(" is 42."))
    assert reply.message.text == "The answer is 42."
    assert reply.view == views[1]


def test_a_continuation_that_cannot_be_recovered_returns_the_partial() -> None:
    config = RecoveryConfig(max_recovery_attempts=1, retention="seed")
    walk = Walk(seed_policy(config=config, predictive=False), session(), max_tokens=100)
    walk.send(response("The answer", stop=StopReason.MAX_TOKENS))
    walk.send(overflow())
    reply = walk.finish(overflow())
    assert (reply.message.text, reply.truncated, reply.calls) == ("The answer", True, 3)
    assert isinstance(reply.events[-1], RecoveryFailed)


def window_filled(text: str) -> Response:
    """Anthropic's model_context_window_exceeded: the answer stopped when the window filled."""
    return response(text, stop=StopReason.CONTEXT_WINDOW, usage=Usage(190_000, 10_000))


def test_a_window_stop_keeps_the_partial_and_continues_it() -> None:
    messages = session()
    views = level_views(messages)
    walk = Walk(seed_policy(predictive=False), messages, max_tokens=20_000)
    walk.send(window_filled("The answer so far"))
    partial = Message.assistant("The answer so far")
    request = walk.sent().request
    assert request.messages == continuation_request_messages(views[1], partial)
    assert request.max_tokens == 20_000  # a higher limit cannot help: the room was short
    reply = walk.finish(response(" and the rest."))
    assert reply.message.text == "The answer so far and the rest."
    assert (reply.truncated, reply.view, reply.calls) == (False, views[1], 2)
    assert kinds(reply.events) == [OverflowDetected, LevelApplied, Continued]


INFO = ErrorInfo(kind=ErrorKind.CONTEXT_OVERFLOW, message="too long")


def test_a_window_stop_names_the_known_window_and_the_output_it_took() -> None:
    # Seen with SmolLM2 behind llama-server, the window read from /props: "context overflow
    # (3,010 > ? tokens)" then "continuation 1, max_tokens ?", though every number was known.
    walk = Walk(seed_policy(context_window=200_000, predictive=False), session())
    walk.send(window_filled("The answer so far"))
    reply = walk.finish(response(" and the rest."))
    detected, continued = reply.events[0], reply.events[-1]
    assert isinstance(detected, OverflowDetected) and isinstance(continued, Continued)
    assert detected.describe() == (
        "context overflow while answering (190,000 prompt + 10,000 output tokens filled the "
        "200,000-token window)"
    )
    assert continued.describe() == "continuing the cut answer (continuation 1, no max_tokens)"
    assert not any("?" in event.describe() for event in reply.events)


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            OverflowDetected(info=INFO, prompt_tokens=3010, limit=None),
            "context overflow (3,010 tokens; the window size is not stated)",
        ),
        (
            OverflowDetected(info=INFO, prompt_tokens=None, limit=4096),
            "context overflow (over 4,096)",
        ),
        (OverflowDetected(info=INFO, prompt_tokens=None, limit=None), "context overflow"),
        (
            OverflowDetected(info=INFO, prompt_tokens=None, limit=None, while_answering=True),
            "context overflow while answering (a window of unknown size filled up)",
        ),
        (
            Continued(attempt=2, max_tokens=2048),
            "continuing the cut answer (continuation 2, max_tokens 2,048)",
        ),
        (
            LevelSkipped(level=2, name="emergency truncation"),
            "level 2 (emergency truncation) skipped: predicted not to fit",
        ),
    ],
)
def test_an_event_shows_no_number_it_does_not_know(event: Event, line: str) -> None:
    assert event.describe() == line


def test_a_window_stop_recovery_cannot_fix_returns_the_partial() -> None:
    config = RecoveryConfig(max_recovery_attempts=1, retention="seed")
    walk = Walk(seed_policy(config=config, predictive=False), session())
    walk.send(window_filled("The answer"))
    reply = walk.finish(overflow())
    assert (reply.message.text, reply.truncated, reply.calls) == ("The answer", True, 2)
    assert reply.stop_reason is StopReason.CONTEXT_WINDOW
    assert kinds(reply.events)[-2:] == [OverflowDetected, RecoveryFailed]


def test_a_window_stop_with_recovery_disabled_returns_the_partial_at_once() -> None:
    config = RecoveryConfig(max_recovery_attempts=0, retention="seed")
    walk = Walk(seed_policy(config=config), session())
    reply = walk.finish(window_filled("Paid-for output"))
    assert (reply.message.text, reply.truncated, reply.calls) == ("Paid-for output", True, 1)
    assert kinds(reply.events) == [OverflowDetected, RecoveryFailed]


def test_a_window_stop_with_nothing_to_keep_raises_chained_to_what_was_known() -> None:
    walk = Walk(
        seed_policy(config=RecoveryConfig(max_recovery_attempts=0, retention="seed")), session()
    )
    with pytest.raises(ContextRecoveryError) as raised:
        walk.send(window_filled(""))
    cause = raised.value.__cause__
    assert isinstance(cause, ProviderError) and cause.info is raised.value.info
    assert cause.info.kind is ErrorKind.CONTEXT_OVERFLOW and cause.info.prompt_tokens == 190_000


def test_a_window_stop_drops_the_call_it_cut_and_returns_complete_ones() -> None:
    done = ToolCall(id="t1", name="read_file", arguments={"path": "a"})
    cut = ToolCall(id="t2", name="write_file", arguments={"path": "a"})  # parses: a prefix?
    walk = Walk(seed_policy(), session(2))
    message = Message.assistant("Reading, then writing.", tool_calls=(done, cut))
    stopped = response(message=message, stop=StopReason.CONTEXT_WINDOW)
    reply = walk.finish(stopped)
    assert reply.message.tool_calls == (done,)
    assert (reply.truncated, reply.calls, reply.stop_reason) == (
        True,
        1,
        StopReason.CONTEXT_WINDOW,
    )
    assert reply.events == (ToolCallsDropped(names=("write_file",)),)


def test_a_send_must_be_answered() -> None:
    walk = Walk(seed_policy(), session(1))
    with pytest.raises(TypeError):
        walk.send(None)


# --- termination, as a property -------------------------------------------------------------

OUTCOMES = st.sampled_from(
    [
        overflow(),
        overflow(prompt_tokens=40_000, limit=30_000),
        overflow(prompt_tokens=8_000, limit=10_000, max_tokens=4_000),  # fits with 2,000 out
        failure(ErrorKind.RATE_LIMIT),
        failure(ErrorKind.TRANSIENT),
        failure(ErrorKind.OUTPUT_CAP, output_limit=64),
        response("cut ", stop=StopReason.MAX_TOKENS),
        response("", stop=StopReason.CONTEXT_WINDOW),
        response("filled ", stop=StopReason.CONTEXT_WINDOW),
    ]
)


@settings(max_examples=60, deadline=None)
@given(script=st.lists(OUTCOMES, max_size=60), predictive=st.booleans())
def test_every_flow_ends_within_its_call_limit(
    script: list[Response | Exception], predictive: bool
) -> None:
    """Whatever the provider answers, the flow ends with a Reply or a chatcli error, having
    made no more calls than the limits allow (levels + escalations + cap lowerings + fits,
    one per answer received, each with at most max_retries retries before it)."""
    policy = RecoveryPolicy(predictive=predictive, max_retries=2)
    flow = policy.flow(session(4), max_tokens=1000)
    action = next(flow)
    calls, bound = 0, (3 + 2 + 2 + (3 + 2 + 1) + 1) * 3
    outcomes = [*script, response("final")]
    try:
        while True:
            if isinstance(action, Sleep):
                action = flow.send(None)
                continue
            calls += 1
            outcome = outcomes[min(calls - 1, len(outcomes) - 1)]
            action = flow.send(outcome)
    except StopIteration as done:
        assert isinstance(done.value, Reply)
        assert done.value.calls == calls
    except (ContextRecoveryError, ProviderError):
        pass
    assert calls <= bound
