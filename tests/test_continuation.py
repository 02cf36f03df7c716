"""Tests for max_tokens escalation, cut tool calls, the continuation request and stitching."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chatcli.continuation import (
    CONTINUATION_MESSAGE,
    DEFAULT_MAX_TOKENS,
    MIN_SEAM_OVERLAP,
    continuation_request_messages,
    drop_incomplete_tool_calls,
    mark_cut_tool_call,
    next_max_tokens,
    seam_overlap,
    stitch,
)
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall


def _call(call_id: str, *, incomplete: bool = False) -> ToolCall:
    return ToolCall(id=call_id, name="read_file", arguments={"path": "a"}, incomplete=incomplete)


# --- the message --------------------------------------------------------------------------


def test_continuation_message_is_the_spec_text() -> None:
    lines = CONTINUATION_MESSAGE.split("\n")
    assert lines == [
        "Your response was cut off at the token limit.",
        "Resume DIRECTLY from where you stopped \u2014 do not repeat any content.",
        "Continue the implementation or explanation from the exact point of interruption.",
    ]


# --- next_max_tokens ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "cap", "produced", "expected"),
    [
        (1000, 8192, 1000, 2000),
        (2000, 8192, 2000, 4000),
        (5000, 8192, 5000, 8192),  # doubling clipped to the cap
        (8192, 8192, 8192, None),  # already at the cap: cannot be raised
        (10_000, 8192, 8192, None),  # above the cap: never lowered
        (1000, None, 1000, 2000),  # unknown cap: plain doubling
        (None, 64_000, 8192, 64_000),  # nothing set: start from the model's cap
        (None, 8192, 8192, None),  # the provider's own limit was the cap already
        (None, None, 0, DEFAULT_MAX_TOKENS),  # nothing known: the documented default
        (None, None, 1000, DEFAULT_MAX_TOKENS),  # a lower provider limit: the default is more
        (None, None, 8192, 16_384),  # a higher provider limit: doubled from what it allowed
    ],
)
def test_next_max_tokens(
    current: int | None, cap: int | None, produced: int, expected: int | None
) -> None:
    assert next_max_tokens(current, cap=cap, produced=produced) == expected


def test_next_max_tokens_custom_default() -> None:
    assert next_max_tokens(None, cap=None, default=1024) == 1024


def test_spec_ladder_two_escalations_then_stop() -> None:
    limits = [1000]
    for _ in range(3):
        raised = next_max_tokens(limits[-1], cap=3000)
        if raised is None:
            break
        limits.append(raised)
    assert limits == [1000, 2000, 3000]


@pytest.mark.parametrize(
    ("current", "cap", "produced"), [(0, 100, 0), (-5, None, 0), (10, 0, 0), (None, None, -1)]
)
def test_next_max_tokens_rejects_nonsense(
    current: int | None, cap: int | None, produced: int
) -> None:
    with pytest.raises(ValueError):
        next_max_tokens(current, cap=cap, produced=produced)


@given(
    current=st.none() | st.integers(1, 10**6),
    cap=st.none() | st.integers(1, 10**6),
    produced=st.integers(0, 10**6),
)
@settings(max_examples=200)
def test_next_max_tokens_never_lowers_nor_exceeds_cap(
    current: int | None, cap: int | None, produced: int
) -> None:
    """The limit in force is `current`, or, when none was set, at least the `produced`
    tokens the provider let through: the result is above it and within the cap, else None,
    and None only when the cap leaves nothing above it."""
    limit = current if current is not None else produced
    raised = next_max_tokens(current, cap=cap, produced=produced)
    if raised is None:
        assert cap is not None and cap <= limit
        return
    assert raised > limit
    if cap is not None:
        assert raised <= cap
    else:
        assert raised >= 2 * limit  # the SPEC's doubling, at least


# --- cut tool calls -----------------------------------------------------------------------


def test_drop_incomplete_tool_calls() -> None:
    message = Message.assistant("text", (_call("a"), _call("b", incomplete=True)))
    kept, dropped = drop_incomplete_tool_calls(message)
    assert [c.id for c in kept.tool_calls] == ["a"]
    assert [c.id for c in dropped] == ["b"]
    assert kept.text == "text"
    assert [c.id for c in message.tool_calls] == ["a", "b"]  # input untouched


def test_drop_incomplete_tool_calls_without_any_returns_same_message() -> None:
    message = Message.assistant("text", (_call("a"),))
    assert drop_incomplete_tool_calls(message) == (message, ())


@pytest.mark.parametrize("reason", [StopReason.MAX_TOKENS, StopReason.CONTEXT_WINDOW])
def test_mark_cut_tool_call_marks_only_the_last_when_cut_off(reason: StopReason) -> None:
    message = Message.assistant("", (_call("a"), _call("b")))
    marked = mark_cut_tool_call(message, reason)
    assert [c.incomplete for c in marked.tool_calls] == [False, True]
    kept, dropped = drop_incomplete_tool_calls(marked)
    assert [c.id for c in kept.tool_calls] == ["a"]
    assert [c.id for c in dropped] == ["b"]


@pytest.mark.parametrize("reason", [StopReason.TOOL_USE, StopReason.END_TURN])
def test_mark_cut_tool_call_leaves_complete_answers(reason: StopReason) -> None:
    message = Message.assistant("", (_call("a"),))
    assert mark_cut_tool_call(message, reason) is message


def test_mark_cut_tool_call_trusts_an_adapter_that_could_tell() -> None:
    message = Message.assistant("", (_call("a", incomplete=True), _call("b")))
    assert mark_cut_tool_call(message, StopReason.MAX_TOKENS) is message


# --- the continuation request -------------------------------------------------------------


def test_continuation_request_messages() -> None:
    view = (Message.system("sys"), Message.user("write a story"))
    partial = Message.assistant("Once upon a", (_call("x", incomplete=True),))
    sent = continuation_request_messages(view, partial)
    assert sent[:2] == view
    assert sent[2].role is Role.ASSISTANT
    assert sent[2].text == "Once upon a"
    assert sent[2].tool_calls == ()  # unanswered/cut calls are never sent
    assert sent[3] == Message.user(CONTINUATION_MESSAGE)
    assert len(sent) == 4


def test_continuation_request_keeps_partial_details() -> None:
    partial = Message(
        role=Role.ASSISTANT,
        parts=(TextPart(text="abc", provider_details={"signature": "s"}),),
        provider_details={"id": "r1"},
    )
    sent = continuation_request_messages((Message.user("q"),), partial)
    assert sent[1].parts == partial.parts
    assert sent[1].provider_details == {"id": "r1"}


def test_continuation_request_without_partial_text_is_a_plain_retry() -> None:
    view = (Message.user("q"),)
    partial = Message.assistant("", (_call("x", incomplete=True),))
    assert continuation_request_messages(view, partial) == view


def test_continuation_request_rejects_non_assistant_partial() -> None:
    with pytest.raises(ValueError):
        continuation_request_messages((), Message.user("q"))


# --- seam overlap -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("The quick brown fox jumps", " over the lazy dog", 0),  # clean continuation
        ("implementa", "tion of the parser", 0),  # resumed mid-word
        ("We read the file and then", " then parse it", 0),  # 5-char coincidence kept
        ("end of sentence. ", " Next", 0),  # a single shared space is not removed
        ("first line\nsecond li", "second line\nthird", len("second li")),  # restarted line
        ("items:\n- a", "- apple\n- b", 3),  # short restarted line, whole line repeated
        ("def f(x):\n    return x + ", "    return x + 1\n", 15),  # indentation included
        ("counting: 1 2 3 4 5 6", "3 4 5 6 7 8", 0),  # 7 chars, mid-line: kept
        ("counting: 1 2 3 4 5 6", " 3 4 5 6 7 8", 8),  # 8 chars: removed
        ("abc\n", "\nxyz", 0),  # a lone newline is coincidence
        ("title\n   ", "   body", 0),  # a blank restarted line is too weak
    ],
)
def test_seam_overlap(before: str, after: str, expected: int) -> None:
    assert seam_overlap(before, after) == expected


def test_seam_overlap_prefers_the_longest_match() -> None:
    before = "Results: ok, ok, fail. Results: ok, ok"
    after = "Results: ok, ok, fail, ok."
    assert seam_overlap(before, after) == len("Results: ok, ok")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # The partial was laughing: the continuation laughs on, or repeats 14 chars of it.
        ("ha ha ha ha ha ha ha ha", "ha ha ha ha ha! done"),
        ("----------------", "--------\nnext"),  # a rule drawn on
        ("x = 1\nx = 1\nx = 1\nx = ", "1\nx = 1\nx = 1\ny"),  # the same line again and again
        ("abcdefghij" * 2 + "abc", "defghijabcdefghij"),  # two whole units, then the seam
    ],
)
def test_seam_overlap_keeps_a_loop_going_on(before: str, after: str) -> None:
    """In a loop the partial already showed, a match is no evidence of a repeat: kept."""
    assert seam_overlap(before, after) == 0


def test_seam_overlap_removes_a_unit_seen_once() -> None:
    """The same seam as the last loop case, but the partial shows the unit once only: that
    is what a model repeating itself produces, so the match is removed."""
    assert seam_overlap("xyz" + "abcdefghij" + "abc", "defghijabcdefghij") == 10


def test_seam_overlap_is_linear_on_long_texts() -> None:
    # Not periodic: the digits of successive squares.
    text = "".join(str(n * n) for n in range(40_000))
    before, after = text, text[-100_000:] + "|"
    assert seam_overlap(before, after) == 100_000
    assert seam_overlap("a" * 200_000, "a" * 100_000 + "b") == 0  # a loop


# --- stitch -------------------------------------------------------------------------------


def test_stitch_removes_repeated_seam() -> None:
    partial = Message.assistant("Step 1: install the package.\nStep 2: run the te")
    continued = Message.assistant("Step 2: run the tests.\nStep 3: done.")
    stitched = stitch(partial, continued)
    assert stitched.text == ("Step 1: install the package.\nStep 2: run the tests.\nStep 3: done.")
    assert len(stitched.parts) == 1


def test_stitch_concatenates_tool_calls_and_drops_cut_ones() -> None:
    partial = Message.assistant("a", (_call("1"), _call("2", incomplete=True)))
    continued = Message.assistant("b", (_call("3"),))
    stitched = stitch(partial, continued)
    assert [c.id for c in stitched.tool_calls] == ["1", "3"]


def test_stitch_keeps_provider_details() -> None:
    partial = Message(
        role=Role.ASSISTANT,
        parts=(TextPart(text="thinking done. The answer is", provider_details={"sig": "p"}),),
        provider_details={"id": "r1", "model": "m"},
    )
    continued = Message(
        role=Role.ASSISTANT,
        parts=(TextPart(text=" 42.", provider_details={"sig": "c"}),),
        provider_details={"id": "r2"},
    )
    stitched = stitch(partial, continued)
    assert [p.provider_details for p in stitched.parts] == [{"sig": "p"}, {"sig": "c"}]
    assert stitched.text == "thinking done. The answer is 42."
    assert stitched.provider_details == {"id": "r2", "model": "m"}


def test_stitch_overlap_spanning_continued_parts() -> None:
    partial = Message.assistant("intro\nthe repeated line")
    continued = Message(
        role=Role.ASSISTANT,
        parts=(
            TextPart(text="the rep", provider_details={"k": 1}),
            TextPart(text="eated line and more"),
        ),
    )
    stitched = stitch(partial, continued)
    assert stitched.text == "intro\nthe repeated line and more"
    # The emptied part carried details, so it survives (empty) rather than losing them.
    assert [p.provider_details for p in stitched.parts] == [None, {"k": 1}, None]


def test_stitch_with_empty_partial_is_the_continuation() -> None:
    continued = Message.assistant("all of it", (_call("1"),))
    assert stitch(Message.assistant(""), continued) == continued


def test_stitch_rejects_non_assistant() -> None:
    with pytest.raises(ValueError):
        stitch(Message.assistant("a"), Message.user("b"))


# Letters and spaces only, so that a separator from another alphabet bounds the overlap.
_text = st.text(alphabet="ab \n\u00e9\u4e2d", max_size=60)


def _longest_border(before: str, after: str) -> int:
    return max(n for n in range(min(len(before), len(after)) + 1) if before.endswith(after[:n]))


# Distinct chars: a repeated text with no period of its own, which only a loop in the partial
# (a second copy right before it) could explain.
_distinct = st.lists(
    st.characters(min_codepoint=32, max_codepoint=0x4E2D), unique=True, min_size=1, max_size=30
).map("".join)


# Repeats long enough to be a seam, drawn so (filtering short ones out discarded most draws:
# Hypothesis's filter_too_much health check failed the test now and then).
_distinct_seam = st.lists(
    st.characters(min_codepoint=32, max_codepoint=0x4E2D),
    unique=True,
    min_size=MIN_SEAM_OVERLAP,
    max_size=MIN_SEAM_OVERLAP + 30,
).map("".join)


@given(head=_text, repeat=_distinct_seam, rest=_text)
@settings(max_examples=200)
def test_an_exact_repeat_of_the_end_is_removed_exactly(head: str, repeat: str, rest: str) -> None:
    """A continuation that repeats exactly the last k chars loses exactly those k, where
    that is decidable: k is the longest match, and the partial shows the repeated text once
    (a copy right before it would make the seam a loop)."""
    assert len(repeat) >= MIN_SEAM_OVERLAP and "\n" not in repeat  # as drawn
    partial, continued = head + repeat, repeat + rest
    assume(_longest_border(partial, continued) == len(repeat))
    assume(not head.endswith(repeat))
    assert stitch(Message.assistant(partial), Message.assistant(continued)).text == partial + rest


@given(head=_text, line=_distinct, rest=_text)
@settings(max_examples=200)
def test_a_restarted_short_line_is_removed_exactly(head: str, line: str, rest: str) -> None:
    assume(len(line) < MIN_SEAM_OVERLAP and "\n" not in line and line.strip())
    partial, continued = head + "\n" + line, line + rest
    assume(_longest_border(partial, continued) == len(line))
    assert stitch(Message.assistant(partial), Message.assistant(continued)).text == partial + rest


@given(
    head=_text,
    unit=st.text(alphabet="ab \n\u00e9", min_size=1, max_size=12),
    copies=st.integers(2, 5),
    cut=st.integers(0, 11),
    more=st.integers(0, 40),
)
@settings(max_examples=300)
def test_continuing_a_loop_is_appended_whole(
    head: str, unit: str, copies: int, cut: int, more: int
) -> None:
    """The partial ended in two or more copies of a unit (then part of one), and the
    continuation goes on with the loop for at least one more whole unit: not a repeat,
    appended whole, however long the match with the partial's end."""
    assume(cut < len(unit))
    loop = unit * (copies + 10)
    seam = copies * len(unit) + cut
    partial, continued = head + loop[:seam], loop[seam : seam + len(unit) + more]
    stitched = stitch(Message.assistant(partial), Message.assistant(continued))
    assert stitched.text == partial + continued


@given(a=_text, b=_text)
@settings(max_examples=150)
def test_stitch_loses_no_text_without_overlap(a: str, b: str) -> None:
    continued = "|" + b  # starts with a char the partial lacks: no overlap possible
    stitched = stitch(Message.assistant(a), Message.assistant(continued))
    assert stitched.text == a + continued


@given(a=_text, b=_text)
@settings(max_examples=200)
def test_stitch_keeps_both_ends_and_never_grows(a: str, b: str) -> None:
    stitched = stitch(Message.assistant(a), Message.assistant(b)).text
    assert stitched.startswith(a)
    assert stitched.endswith(b)
    assert len(stitched) <= len(a) + len(b)
    removed = len(a) + len(b) - len(stitched)
    assert a.endswith(b[:removed])


def _ends_in_loop_by_brute_force(before: str, length: int) -> bool:
    for unit in range(1, length + 1):
        size = max(length, 2 * unit)
        tail = before[-size:]
        if len(before) >= size and tail[unit:] == tail[:-unit]:
            return True
    return False


def _seam_overlap_by_brute_force(before: str, after: str) -> int:
    longest = _longest_border(before, after)
    if longest and _ends_in_loop_by_brute_force(before, longest):
        return 0
    for length in range(min(len(before), len(after)), 0, -1):
        if not before.endswith(after[:length]):
            continue
        start = len(before) - length
        whole_line = start == 0 or before[start - 1] == "\n"
        if length >= MIN_SEAM_OVERLAP or (whole_line and before[start:].strip()):
            return length
    return 0


@given(before=st.text(alphabet="ab \n", max_size=40), after=st.text(alphabet="ab \n", max_size=40))
@settings(max_examples=300)
def test_seam_overlap_matches_brute_force(before: str, after: str) -> None:
    assert seam_overlap(before, after) == _seam_overlap_by_brute_force(before, after)
