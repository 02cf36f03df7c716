"""Microcompaction under pressure: the trigger, batches, stable prefixes, and the memoised
scans of microcompaction, the tool-result budget and pairing repair (same results as fresh)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.carry import Numbering
from chatcli.history.microcompact import (
    BATCH_ROOM_TURNS,
    BATCH_TARGET_SHARE,
    PRESSURE_CHARS_PER_TOKEN,
    STUB_PREFIX,
    microcompact,
    original_size,
)
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.result import TransformResult
from chatcli.history.scan import ScanMemos
from chatcli.messages import Message, Role, ToolCall
from chatcli.tokens.estimate import TokenEstimator
from tests.strategies import agent_sessions, conversations

# What the pressure estimate counts with when it is given no estimator.
ESTIMATOR = TokenEstimator(chars_per_token=PRESSURE_CHARS_PER_TOKEN)


def _step(index: int, chars: int = 8_000) -> list[Message]:
    call = ToolCall(id=f"c{index}", name="read_file", arguments={"path": f"f{index}.py"})
    content = "".join(f"line {index}-{n}: value = {n * index}\n" for n in range(chars // 24))
    return [Message.assistant(f"step {index}", tool_calls=(call,)), Message.tool(call.id, content)]


def _session(steps: int, chars: int = 8_000) -> list[Message]:
    messages = [Message.system("You are an agent."), Message.user("Read every file.")]
    for index in range(steps):
        messages += _step(index, chars)
    return messages


def _shared_prefix(a: Sequence[Message], b: Sequence[Message]) -> int:
    count = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        count += 1
    return count


# --- the trigger --------------------------------------------------------------------------


def test_the_trigger_is_the_lower_of_tokens_and_a_share_of_the_room() -> None:
    config = MicrocompactConfig()
    assert config.trigger() == 100_000  # room unknown
    assert config.trigger(1_000_000) == 100_000
    assert config.trigger(120_000) == 60_000
    assert MicrocompactConfig(trigger_pct=25).trigger(100_000) == 25_000
    assert MicrocompactConfig(trigger_tokens=0).trigger(1_000_000) == 0
    assert MicrocompactConfig(trigger_pct=0).trigger(1_000_000) == 0


def test_trigger_settings_are_read_from_the_environment_and_checked() -> None:
    env = {"CHATCLI_MICROCOMPACT_TRIGGER_TOKENS": "0", "CHATCLI_MICROCOMPACT_TRIGGER_PCT": "80"}
    assert MicrocompactConfig.from_env(env) == MicrocompactConfig(trigger_tokens=0, trigger_pct=80)
    with pytest.raises(ConfigError, match="CHATCLI_MICROCOMPACT_TRIGGER_PCT='101'"):
        MicrocompactConfig.from_env({"CHATCLI_MICROCOMPACT_TRIGGER_PCT": "101"})
    with pytest.raises(ConfigError, match="CHATCLI_MICROCOMPACT_TRIGGER_TOKENS='-1'"):
        MicrocompactConfig.from_env({"CHATCLI_MICROCOMPACT_TRIGGER_TOKENS": "-1"})


def test_a_calibrated_ratio_is_rounded_down_so_small_moves_change_nothing() -> None:
    messages = _session(30)
    config = MicrocompactConfig(trigger_tokens=30_000)

    def view(ratio: float) -> tuple[Message, ...]:
        estimator = TokenEstimator(chars_per_token=ratio)
        return microcompact(messages, config, estimator=estimator).messages

    assert view(3.76) == view(3.99) == view(3.75)
    assert view(3.5) == microcompact(messages, config).messages  # the default's ratio
    assert view(3.74) != view(3.75)  # another step: the batches fall elsewhere


def test_below_the_trigger_nothing_is_cut_however_old() -> None:
    messages = _session(20)  # 20 results of 8,000 chars: ~41,000 tokens
    assert ESTIMATOR.count(messages) < 100_000
    result = microcompact(messages)
    assert result.messages == tuple(messages) and not result.report.changed
    # The same session with the window known: half of a 60,000-token room is passed.
    assert microcompact(messages, room=60_000).report.changed


def _first_over(messages: Sequence[Message], trigger: int) -> int:
    """The length of the first prefix of `messages` whose pressure estimate passes `trigger`."""
    return next(n for n in range(2, len(messages) + 1) if ESTIMATOR.count(messages[:n]) > trigger)


def test_past_the_trigger_one_batch_moves_the_latest_results_that_reach_its_target() -> None:
    config = MicrocompactConfig(trigger_tokens=20_000)
    messages = _session(12)  # ~24,700 tokens whole; steps of ~2,300 tokens
    # `BATCH_ROOM_TURNS` steps of room would be deeper than half the trigger: it goes to half.
    transcript = messages[: _first_over(messages, 20_000)]
    growth = ESTIMATOR.count(transcript) / sum(m.tool_calls != () for m in transcript)
    assert BATCH_ROOM_TURNS * growth > 20_000 * (1 - BATCH_TARGET_SHARE)
    view = microcompact(transcript, config).messages
    assert ESTIMATOR.count(view) <= 20_000 * BATCH_TARGET_SHARE
    results = [
        (old.text, new.text) for old, new in zip(transcript, view, strict=True) if new.tool_result
    ]
    moved = [old != new for old, new in results]
    start = moved.index(True)
    # One run of moved results from `start` on, up to the ones too young to move...
    assert moved == [False] * start + [True] * (len(moved) - start - 2) + [False] * 2
    assert start > 0  # ...after results kept whole: a cache keeps them and what precedes
    # The latest start: one more result kept whole and the view is above half the trigger.
    kept = list(view)
    first = next(i for i, (old, new) in enumerate(zip(transcript, view, strict=True)) if old != new)
    kept[first] = transcript[first]
    assert ESTIMATOR.count(kept) > 20_000 * BATCH_TARGET_SHARE
    assert [new.startswith(STUB_PREFIX) for _, new in results[start:-2]] == [True] * (
        len(moved) - start - 4
    ) + [False] * 2  # stubbed from 4 turns on, cut at 2-3 (the seed's ages)


def test_a_batch_makes_room_for_some_turns_when_that_is_less_than_half() -> None:
    # Steps of ~1,200 tokens: `BATCH_ROOM_TURNS` of them are less than half of 60,000 tokens.
    config = MicrocompactConfig(trigger_tokens=60_000)
    messages = _session(70, chars=4_000)
    transcript = messages[: _first_over(messages, 60_000)]
    growth = ESTIMATOR.count(transcript) / sum(m.tool_calls != () for m in transcript)
    view = microcompact(transcript, config).messages
    target = 60_000 - BATCH_ROOM_TURNS * growth
    assert 60_000 * BATCH_TARGET_SHARE < target - 2 * growth <= ESTIMATOR.count(view) <= target


def test_between_batches_requests_share_their_whole_prefix() -> None:
    # An agent loop of 60 steps (~128,000 tokens whole): each request is the previous one plus
    # one step. With the seed's aging (trigger 0) a result changes at almost every step;
    # under pressure, only batches change earlier messages: every ~7 steps at a 30,000-token
    # trigger, three times with the default (100,000: passed at step ~46, then each batch
    # makes room for `BATCH_ROOM_TURNS` steps).
    messages = _session(60)

    def breaks(config: MicrocompactConfig) -> int:
        views = [
            microcompact(messages[:n], config).messages for n in range(4, len(messages) + 1, 2)
        ]
        return sum(
            _shared_prefix(previous, view) < len(previous)
            for previous, view in itertools.pairwise(views)
        )

    assert 4 <= breaks(MicrocompactConfig(trigger_tokens=30_000)) <= 8
    assert breaks(MicrocompactConfig()) == 3
    assert breaks(MicrocompactConfig(trigger_tokens=0)) > 50


def test_no_stub_says_how_old_its_result_is() -> None:
    aging = MicrocompactConfig(trigger_tokens=0)
    messages = _session(6)
    stub = microcompact(messages, aging).messages[3].text
    assert stub.startswith(STUB_PREFIX) and "turn" not in stub
    later = messages + _step(6) + _step(7)
    assert microcompact(later, aging).messages[3].text == stub


# --- properties ---------------------------------------------------------------------------

_TRIGGERS = st.sampled_from([0, 3_000, 8_000, 20_000])


@settings(max_examples=60, deadline=None)
@given(agent_sessions(), _TRIGGERS)
def test_appending_a_message_changes_earlier_output_only_in_a_batch_past_the_trigger(
    messages: list[Message], trigger: int
) -> None:
    config = MicrocompactConfig(trigger_tokens=trigger)
    previous = microcompact(messages[:1], config).messages
    for count in range(2, len(messages) + 1):
        view = microcompact(messages[:count], config).messages
        changed = [i for i, old in enumerate(previous) if view[i] != old]
        if changed:
            # Only past the trigger (the whole transcript is an upper bound of the view),
            # only tool results, and only further: a stub stays a stub.
            assert trigger == 0 or ESTIMATOR.count(messages[:count]) > trigger
            for i in changed:
                assert messages[i].tool_result is not None
                assert len(view[i].text) < len(previous[i].text)
                assert not previous[i].text.startswith(STUB_PREFIX)
        # A batch is the eligible results after one start: none it passes over is left
        # behind at an earlier stage than its age allows (the start alone is the prices'
        # choice).
        for i in range(changed[0] if changed else count, count):
            small = original_size(messages[i].text) < config.min_content
            if messages[i].tool_result is None or small:
                continue
            age = sum(m.role is Role.ASSISTANT for m in messages[i:count])
            if age >= config.summarize_turns:
                assert view[i].text.startswith(STUB_PREFIX)
            elif age >= config.truncate_turns:
                assert view[i].text != messages[i].text
        previous = view


def _alone(result: Message, tool: str, stage: int) -> str:
    """The text of `result` at `stage`, made with nothing else around it: its call, then as
    many turns as the stage needs, aged by the seed's always-on aging."""
    assert result.tool_result is not None
    call = ToolCall(id=result.tool_result.call_id, name=tool)
    turns = MicrocompactConfig().summarize_turns if stage == 2 else 2
    alone = [Message.assistant("", tool_calls=(call,)), result]
    alone += [Message.assistant(f"turn {n}") for n in range(turns)]
    return microcompact(alone, MicrocompactConfig(trigger_tokens=0)).messages[1].text


@settings(max_examples=40, deadline=None)
@given(agent_sessions(max_steps=16), _TRIGGERS)
def test_a_results_text_depends_only_on_the_result_and_its_stage(
    messages: list[Message], trigger: int
) -> None:
    # Whatever the batch around it, its start or the transcript's length: a result is sent
    # whole, or as the text it has at its stage alone, byte for byte (so a cache can keep it).
    config = MicrocompactConfig(trigger_tokens=trigger)
    tools = {call.id: call.name for m in messages for call in m.tool_calls}
    for count in range(len(messages) // 2, len(messages) + 1):
        view = microcompact(messages[:count], config).messages
        for message, sent in zip(messages, view, strict=False):
            if sent.text != message.text:
                assert message.tool_result is not None
                tool = tools[message.tool_result.call_id]
                assert sent.text in (_alone(message, tool, 1), _alone(message, tool, 2))


@settings(max_examples=60, deadline=None)
@given(agent_sessions(), st.integers(1_000, 200_000))
def test_nothing_is_cut_while_the_transcript_stays_below_the_trigger(
    messages: list[Message], trigger: int
) -> None:
    result = microcompact(messages, MicrocompactConfig(trigger_tokens=trigger))
    if ESTIMATOR.count(messages) <= trigger:
        assert result.messages == tuple(messages)


def _policy_transforms(
    messages: Sequence[Message],
    config: MicrocompactConfig,
    memos: ScanMemos | None,
    numbered: bool = False,
) -> list[object]:
    """Microcompaction, budget and pairing as the policy chains them (small budgets, so the
    budget cuts too), with `memos` (None: every transcript read whole); `numbered`: the
    markers name the transcript's numbers (each call's own `Numbering`, as each request's)."""
    numbering = Numbering(messages) if numbered else None
    compacted = microcompact(messages, config, memos=memos, numbering=numbering)
    budgeted = enforce_tool_result_budget(
        compacted.messages, per_result_chars=9_000, per_turn_chars=12_000, memos=memos
    )
    return [compacted, budgeted, repair_tool_pairing(budgeted.messages, memos=memos)]


@settings(max_examples=40, deadline=None)
@given(agent_sessions(max_steps=16), _TRIGGERS, st.booleans(), st.data())
def test_memoised_scans_give_what_a_fresh_scan_gives(
    messages: list[Message], trigger: int, numbered: bool, data: st.DataObject
) -> None:
    config = MicrocompactConfig(trigger_tokens=trigger)
    stops = sorted(data.draw(st.lists(st.integers(1, max(len(messages), 1)), max_size=6)))
    memos = ScanMemos()
    for stop in [*stops, len(messages)]:
        # Extends earlier scans (each request's numbering is of its own, longer transcript).
        memoised = _policy_transforms(messages[:stop], config, memos, numbered)
        assert memoised == _policy_transforms(messages[:stop], config, None, numbered)


@settings(max_examples=40, deadline=None)
@given(conversations(max_blocks=12), st.data())
def test_memoised_budget_and_pairing_match_fresh_ones_on_tricky_histories(
    messages: list[Message], data: st.DataObject
) -> None:
    # Histories that change anywhere between calls, not only at the end.
    config = RecoveryConfig(tool_result_max_chars=300, tool_result_budget_chars=500)
    variant = list(messages)
    if messages:
        index = data.draw(st.integers(0, len(messages) - 1))
        variant[index] = messages[index].with_text(messages[index].text + " (edited)")

    def both(history: list[Message], memos: ScanMemos | None) -> list[TransformResult]:
        budgeted = enforce_tool_result_budget(
            history,
            per_result_chars=config.tool_result_max_chars,
            per_turn_chars=config.tool_result_budget_chars,
            memos=memos,
        )
        return [budgeted, repair_tool_pairing(history, memos=memos)]

    memos = ScanMemos()
    for history in (messages, variant, messages + variant, variant[: len(variant) // 2]):
        assert both(history, memos) == both(history, None)


@settings(max_examples=40, deadline=None)
@given(agent_sessions(), st.integers(2_000, 30_000), st.integers(2_000, 60_000))
def test_the_budget_never_changes_a_turn_once_the_next_assistant_message_closed_it(
    messages: list[Message], per_result: int, per_turn: int
) -> None:
    # Every request of an agent loop ends with a turn's results; the next one appends an
    # assistant message and its results: the earlier output stays the same, byte for byte.
    def budget(history: list[Message]) -> tuple[Message, ...]:
        return enforce_tool_result_budget(
            history, per_result_chars=per_result, per_turn_chars=per_turn
        ).messages

    requests = [n for n in range(1, len(messages)) if messages[n].tool_calls] + [len(messages)]
    for earlier, later in itertools.pairwise(requests):
        assert budget(messages[:later])[:earlier] == budget(messages[:earlier])
