"""Microcompaction: ages and stages (with the seed's always-on aging), env vars, kinds."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli import recall_tool
from chatcli.config import MicrocompactConfig
from chatcli.errors import ConfigError
from chatcli.history.carry import Numbering
from chatcli.history.microcompact import (
    STUB_PREFIX,
    describe_content,
    microcompact,
    original_size,
)
from chatcli.history.scan import ScanMemos
from chatcli.history.stubs import DESCRIBED_CHARS
from chatcli.history.text import cut_middle
from chatcli.messages import Message, ToolCall
from tests.strategies import conversations


def _lines(count: int, width: int = 60) -> str:
    """Distinct numbered lines, so a head and a tail are recognisable."""
    return "\n".join(f"line {i:05d} " + "x" * (width - 11) for i in range(count))


BIG = _lines(200)  # 12,199 chars
assert len(BIG) > 10_000
# The seed's always-on aging: these tests are about ages and stages, not pressure.
AGING = MicrocompactConfig(trigger_tokens=0)


def _conversation(content: str, turns_after: int, call_id: str = "call_1") -> list[Message]:
    """A tool result followed by `turns_after` assistant turns."""
    messages = [
        Message.system("You are a coding agent."),
        Message.user("Read the log."),
        Message.assistant(tool_calls=(ToolCall(id=call_id, name="read_file", arguments={}),)),
        Message.tool(call_id, content),
    ]
    for turn in range(turns_after):
        messages.append(Message.assistant(f"step {turn}"))
        messages.append(Message.user(f"go on {turn}"))
    return messages


def _tool_text(messages: tuple[Message, ...]) -> str:
    return next(m.text for m in messages if m.tool_result is not None)


@pytest.mark.parametrize("age", [0, 1])
def test_young_results_are_untouched(age: int) -> None:
    messages = _conversation(BIG, age)
    result = microcompact(messages, AGING)
    assert result.messages == tuple(messages)
    assert not result.report.changed


@pytest.mark.parametrize("age", [2, 3])
def test_results_two_turns_old_are_cut_to_head_and_tail_with_defaults(age: int) -> None:
    result = microcompact(_conversation(BIG, age), AGING)
    text = _tool_text(result.messages)
    assert text.startswith(BIG[:1900])
    head, rest = text.split("\n[... ", 1)
    marker, tail = rest.split(" ...]\n", 1)
    assert len(head) <= 2000 and BIG.startswith(head) and len(head) > 1900
    assert len(tail) == 500 and BIG.endswith(tail)
    removed = len(BIG) - len(head) - len(tail)
    assert marker.startswith(f"{removed:,} chars cut by microcompaction")
    assert "/history" in marker and "call_1" in marker
    assert result.report.cut == (
        f"tool result call_1 (read_file): {len(BIG):,} -> {len(text):,} chars",
    )
    assert result.report.chars_freed == len(BIG) - len(text)


@pytest.mark.parametrize("age", [4, 9])
def test_results_four_turns_old_become_a_one_line_stub_with_defaults(age: int) -> None:
    result = microcompact(_conversation(BIG, age), AGING)
    stub = _tool_text(result.messages)
    assert stub.startswith(STUB_PREFIX)
    assert "\n" not in stub
    assert "read_file" in stub and "call_1" in stub and "/history" in stub
    assert "200 lines" in stub and f"{len(BIG):,} chars" in stub and ": text," in stub


@pytest.mark.parametrize(("content", "lines"), [(BIG, 200), (BIG + "\n", 200), ("\n" * 3000, 3000)])
def test_the_stub_counts_lines_as_lines_a_trailing_newline_ends_the_last_one(
    content: str, lines: int
) -> None:
    stub = _tool_text(microcompact(_conversation(content, 4), AGING).messages)
    assert f", {lines:,} lines, " in stub


def test_over_a_session_the_full_transcript_goes_through_both_stages() -> None:
    # Every request microcompacts the full transcript (never its own earlier output).
    transcript = _conversation(BIG, 0)
    stages = []
    for turn in range(6):
        text = _tool_text(microcompact(transcript, AGING).messages)
        cut = "chars cut by microcompaction" in text
        stages.append("stub" if text.startswith(STUB_PREFIX) else "cut" if cut else "full")
        transcript += [Message.assistant(f"turn {turn}"), Message.user("next")]
    assert stages == ["full", "full", "cut", "cut", "stub", "stub"]
    assert _tool_text(tuple(transcript)) == BIG  # the transcript itself keeps everything


def test_a_result_already_cut_to_head_and_tail_still_reaches_the_stub_stage() -> None:
    first = microcompact(_conversation(BIG, 2), AGING)
    cut = _tool_text(first.messages)
    assert len(cut) < MicrocompactConfig().min_content  # 2,500 + marker < 3,000
    assert original_size(cut) == len(BIG)

    later = microcompact(_conversation(cut, 4), AGING)
    stub = _tool_text(later.messages)
    assert stub.startswith(STUB_PREFIX)
    assert f"{len(BIG):,} chars" in stub  # the original size, not the cut one


def test_a_result_cut_by_the_tool_result_budget_counts_with_its_original_size() -> None:
    budgeted = cut_middle(BIG, 2_400)  # the budget's own marker, below min_content
    assert len(budgeted) < 3000
    assert original_size(budgeted) == len(BIG)
    stub = _tool_text(microcompact(_conversation(budgeted, 4), AGING).messages)
    assert stub.startswith(STUB_PREFIX) and "+ lines" in stub  # only the kept lines are known
    assert f"{len(BIG):,} chars" in stub


def test_small_results_are_never_touched_however_old() -> None:
    small = _lines(49)  # 2,988 chars
    assert len(small) < 3000
    messages = _conversation(small, 20)
    assert microcompact(messages, AGING).messages == tuple(messages)


def test_the_threshold_is_inclusive() -> None:
    exact = "a" * 3000
    assert _tool_text(microcompact(_conversation(exact, 4), AGING).messages).startswith(STUB_PREFIX)


def test_only_tool_contents_change_and_the_input_is_not_mutated() -> None:
    messages = _conversation(BIG, 5)
    snapshot = list(messages)
    result = microcompact(messages, AGING)
    assert messages == snapshot
    assert len(result.messages) == len(messages)
    for before, after in zip(messages, result.messages, strict=True):
        assert before.role == after.role and before.tool_calls == after.tool_calls
        if before.tool_result is None:
            assert after == before
        else:
            assert after.tool_result is not None
            assert after.tool_result.call_id == before.tool_result.call_id


def test_each_result_is_aged_by_the_assistant_turns_after_it() -> None:
    calls = tuple(ToolCall(id=f"c{i}", name="grep") for i in range(3))
    messages = [Message.user("Search.")]
    for i, call in enumerate(calls):
        messages += [Message.assistant(tool_calls=(call,)), Message.tool(call.id, BIG + str(i))]
    messages += [Message.assistant("done"), Message.user("thanks"), Message.assistant("ok")]
    # ages: c0 -> 4 (c1, c2, done, ok), c1 -> 3, c2 -> 2
    texts = [m.text for m in microcompact(messages, AGING).messages if m.tool_result is not None]
    assert texts[0].startswith(STUB_PREFIX)
    assert "chars cut by microcompaction" in texts[1] and "chars cut by" in texts[2]
    assert not texts[1].startswith(STUB_PREFIX)


def test_same_input_same_output_and_a_second_pass_changes_nothing() -> None:
    messages = []
    for age in range(6):
        messages += _conversation(BIG + str(age), 1, call_id=f"call_{age}")
    first = microcompact(messages, AGING)
    assert microcompact(list(messages), AGING) == first
    again = microcompact(first.messages, AGING)
    assert again.messages == first.messages
    assert not again.report.changed


def test_env_vars_set_every_stage() -> None:
    env = {
        "CHATCLI_MICROCOMPACT_MIN_CONTENT": "100",
        "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "1",
        "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "3",
        "CHATCLI_MICROCOMPACT_HEAD_CHARS": "40",
        "CHATCLI_MICROCOMPACT_TAIL_CHARS": "0",
        "CHATCLI_MICROCOMPACT_TRIGGER_TOKENS": "0",
        "CHATCLI_MICROCOMPACT_TRIGGER_PCT": "30",
    }
    config = MicrocompactConfig.from_env(env)
    assert config == MicrocompactConfig(
        min_content=100,
        truncate_turns=1,
        summarize_turns=3,
        head_chars=40,
        tail_chars=0,
        trigger_tokens=0,
        trigger_pct=30,
    )
    text = _lines(5)  # 299 chars
    cut = _tool_text(microcompact(_conversation(text, 1), config).messages)
    assert cut.startswith(text[:30]) and cut.endswith("...]\n")
    stub = _tool_text(microcompact(_conversation(text, 3), config).messages)
    assert stub.startswith(STUB_PREFIX)
    assert MicrocompactConfig.from_env({}) == MicrocompactConfig()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHATCLI_MICROCOMPACT_MIN_CONTENT", "abc"),
        ("CHATCLI_MICROCOMPACT_TRUNCATE_TURNS", "0"),
        ("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS", "-1"),
        ("CHATCLI_MICROCOMPACT_HEAD_CHARS", "2.5"),
        ("CHATCLI_MICROCOMPACT_TAIL_CHARS", "-3"),
    ],
)
def test_bad_env_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name) as caught:
        MicrocompactConfig.from_env({name: value})
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "1"},
            ("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS=1", "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS=2"),
        ),
        (
            {"CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "6"},
            ("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS=4", "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS=6"),
        ),
        (
            {"CHATCLI_MICROCOMPACT_HEAD_CHARS": "2500"},
            (
                "CHATCLI_MICROCOMPACT_HEAD_CHARS=2500",
                "CHATCLI_MICROCOMPACT_TAIL_CHARS=500",
                "CHATCLI_MICROCOMPACT_MIN_CONTENT=3000",
            ),
        ),
        (
            {"CHATCLI_MICROCOMPACT_MIN_CONTENT": "1000"},
            (
                "CHATCLI_MICROCOMPACT_HEAD_CHARS=2000",
                "CHATCLI_MICROCOMPACT_TAIL_CHARS=500",
                "CHATCLI_MICROCOMPACT_MIN_CONTENT=1000",
            ),
        ),
    ],
)
def test_settings_that_contradict_each_other_name_the_variables_and_values(
    env: dict[str, str], named: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigError) as caught:
        MicrocompactConfig.from_env(env)
    assert all(text in str(caught.value) for text in named)


def test_the_edges_of_the_cross_checks_are_allowed() -> None:
    # The same age for both stages: results go straight to the stub (no cut stage).
    assert MicrocompactConfig(truncate_turns=3, summarize_turns=3).summarize_turns == 3
    # Head + tail one char below the threshold: the smallest eligible result is still cut.
    assert MicrocompactConfig(min_content=2501).min_content == 2501
    with pytest.raises(ConfigError, match="head_chars"):
        MicrocompactConfig(min_content=2500)


def test_bad_constructor_values_are_rejected() -> None:
    with pytest.raises(ConfigError, match="head_chars"):
        MicrocompactConfig(head_chars=0)


_DIFF = """diff --git a/app.py b/app.py
index 3b18e51..a9c2f4d 100644
--- a/app.py
+++ b/app.py
@@ -1,3 +1,4 @@
 import os
+import sys
 def main():
"""
_LOG = "\n".join(f"2024-05-01 12:00:{i:02d} INFO worker {i} finished job" for i in range(20))
_CODE = """import json

def load(path):
    with open(path) as f:
        return json.load(f)

class Store:
    def __init__(self):
        self.items = {}
"""
_JS = "function add(a, b) {\n  const c = a + b;\n  return c;\n}\n"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (json.dumps({"items": [{"id": i} for i in range(50)]}, indent=2), "JSON"),
        (json.dumps(list(range(100))), "JSON"),
        (_DIFF, "diff"),
        (_LOG, "log"),
        ("[ERROR] build failed\n[INFO] retrying\n[WARN] slow\n", "log"),
        (_CODE, "source code"),
        (_JS, "source code"),
        ("The quick brown fox.\nIt jumped over the lazy dog.\n", "text"),
        ("", "text"),
    ],
)
def test_describe_content_detects_the_kind(text: str, kind: str) -> None:
    assert describe_content(text) == kind


def test_the_kind_is_read_from_the_results_head() -> None:
    # A stub is remade at every request: its kind reads the first DESCRIBED_CHARS only, so
    # its cost does not grow with the result. A log after a long prose head is "text".
    prose = "The quick brown fox jumped over the lazy dog.\n" * (DESCRIBED_CHARS // 40)
    assert describe_content(_CODE * 40 + prose) == "source code"
    assert describe_content(prose + _LOG * 100) == "text"
    assert describe_content(_LOG * 100 + prose) == "log"


def test_a_cut_json_result_is_still_described_as_json() -> None:
    data = json.dumps({"rows": [{"n": i, "name": f"row {i}"} for i in range(400)]}, indent=1)
    cut = _tool_text(microcompact(_conversation(data, 2), AGING).messages)
    assert describe_content(cut) == "JSON"
    stub = _tool_text(microcompact(_conversation(cut, 4), AGING).messages)
    assert ": JSON, " in stub


def test_error_results_say_so_in_the_stub() -> None:
    messages = _conversation(_LOG * 20, 4)
    messages[3] = Message.tool("call_1", _LOG * 20, is_error=True)
    assert "error output (log)" in _tool_text(microcompact(messages, AGING).messages)


def test_cuts_never_split_a_character() -> None:
    family = "👨\u200d👩\u200d👧"
    text = family * 1200  # 6,000 code points
    cut = _tool_text(microcompact(_conversation(text, 2), AGING).messages)
    head, rest = cut.split("\n[... ", 1)
    tail = rest.split(" ...]\n", 1)[1]
    assert not head.endswith("\u200d") and not tail.startswith("\u200d")
    assert text.startswith(head) and text.endswith(tail)


# Big results are a short random piece repeated (random 3,000-char texts exhaust hypothesis).
_BIG_TEXTS = st.builds(
    lambda piece, n: piece * n, st.text(min_size=1, max_size=20), st.integers(300, 3000)
)
_TEXTS = st.one_of(st.text(max_size=40), _BIG_TEXTS.filter(lambda text: len(text) >= 2000))


@st.composite
def _agent_sessions(draw: st.DrawFn) -> list[Message]:
    messages = [Message.system("sys"), Message.user("start")]
    for i in range(draw(st.integers(0, 8))):
        call = ToolCall(id=f"c{i}", name=draw(st.sampled_from(["ls", "cat"])))
        messages.append(Message.assistant(draw(st.text(max_size=10)), tool_calls=(call,)))
        messages.append(Message.tool(call.id, draw(_TEXTS), is_error=draw(st.booleans())))
        if draw(st.booleans()):
            messages.append(Message.user(draw(st.text(max_size=10))))
    return messages


# Always-on aging, a trigger small enough for batches to fire in short sessions, the default.
_CONFIGS = st.sampled_from(
    [AGING, MicrocompactConfig(trigger_tokens=1_500), MicrocompactConfig(trigger_tokens=4_000)]
)


@settings(max_examples=60, deadline=None)
@given(_agent_sessions(), _CONFIGS)
def test_microcompaction_properties(messages: list[Message], config: MicrocompactConfig) -> None:
    result = microcompact(messages, config)
    assert microcompact(messages, config) == result
    assert microcompact(result.messages, config).messages == result.messages
    assert [m.role for m in result.messages] == [m.role for m in messages]
    for before, after in zip(messages, result.messages, strict=True):
        assert len(after.text) <= len(before.text)
        if before.tool_result is None:
            assert after == before
    assert result.report.chars_freed >= 0


@settings(max_examples=60, deadline=None)
@given(conversations(max_blocks=14), _CONFIGS)
def test_microcompaction_properties_on_tricky_conversations(
    messages: list[Message], config: MicrocompactConfig
) -> None:
    snapshot = list(messages)
    result = microcompact(messages, config)
    assert messages == snapshot
    assert microcompact(messages, config) == result
    assert microcompact(result.messages, config).messages == result.messages
    assert len(result.messages) == len(messages)
    for before, after in zip(messages, result.messages, strict=True):
        if before.tool_result is None or after.tool_result is None:
            assert after == before  # systems, requests, calls: untouched
            continue
        assert after.tool_result.call_id == before.tool_result.call_id
        assert after.tool_result.provider_details == before.tool_result.provider_details
        if after.text != before.text:
            assert original_size(after.text) == len(before.text) or after.text.startswith(
                STUB_PREFIX
            )


# ---------------------------------------------------------------------------- numbers

WHERE = "the full output is kept in the transcript (/history, call id call_1)"
NUMBERED = WHERE.replace("/history,", "/history #4,")  # the result is the 4th message


def test_without_numbering_the_texts_are_what_they_always_were() -> None:
    stub = _tool_text(microcompact(_conversation(BIG, 4), AGING).messages)
    assert stub == (
        f"{STUB_PREFIX}: read_file, call call_1: text, 200 lines, 12,199 chars; {WHERE}, "
        "or run the tool again.]"
    )
    cut = _tool_text(microcompact(_conversation(BIG, 2), AGING).messages)
    assert f"{len(BIG) - 2_500:,} chars cut by microcompaction; {WHERE} ...]\n" in cut


@pytest.mark.parametrize("age", [2, 4])
def test_with_numbering_the_cut_and_the_stub_name_the_transcript_number(age: int) -> None:
    messages = _conversation(BIG, age)
    plain = _tool_text(microcompact(messages, AGING).messages)
    numbered = microcompact(messages, AGING, numbering=Numbering(messages))
    text = _tool_text(numbered.messages)
    assert NUMBERED in text and text == plain.replace(WHERE, NUMBERED)
    assert original_size(text) == len(BIG)  # the size still reads back
    again = microcompact(numbered.messages, AGING, numbering=Numbering(messages))
    assert again.messages == numbered.messages  # idempotent with numbers too


def test_a_result_keeps_its_number_and_text_as_the_transcript_grows() -> None:
    transcript = [
        *_conversation("small", 0, "call_0"),
        Message.assistant(tool_calls=(ToolCall(id="call_1", name="read_file", arguments={}),)),
        Message.tool("call_1", BIG),
    ]
    memos, texts = ScanMemos(), []
    for turn in range(8):
        transcript += [Message.assistant(f"turn {turn}"), Message.user("next")]
        whole = microcompact(transcript, AGING, numbering=Numbering(transcript))
        memoised = microcompact(transcript, AGING, numbering=Numbering(transcript), memos=memos)
        assert memoised == whole
        texts.append(whole.messages[5].text)
    assert texts[1] == texts[2] and texts[3:] == [texts[3]] * 5  # each stage's text holds
    assert "chars cut by microcompaction" in texts[1] and "/history #6," in texts[1]
    assert texts[3].startswith(STUB_PREFIX) and "/history #6," in texts[3]


def test_the_recall_tool_returns_the_message_a_stub_names() -> None:
    transcript = _conversation("small", 0, "call_0") + _conversation(BIG, 4)
    stub = microcompact(transcript, AGING, numbering=Numbering(transcript)).messages[7].text
    number = re.search(r"/history #(\d+),", stub)
    assert stub.startswith(STUB_PREFIX) and number is not None
    answer, is_error = recall_tool(transcript)({"message": int(number.group(1))})
    assert not is_error and answer.startswith(f"[message #{number.group(1)} (tool)")
    assert BIG.startswith(answer.split("\n", 1)[1])
