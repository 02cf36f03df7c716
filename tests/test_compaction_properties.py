"""Properties of compaction over random conversations (tests/strategies.py)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.compaction import (
    SUMMARY_SECTIONS,
    CompactionBreaker,
    CompactionReport,
    compact,
    extract_instructions,
    is_summary_message,
)
from chatcli.errors import CompactionError
from chatcli.history.carry import is_carry_block, resolved_statements
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import is_real_user_request
from chatcli.messages import Message, Role
from chatcli.providers.base import Request
from tests.compaction_fakes import ScriptedSummarizer, conversation_text
from tests.strategies import conversations


def _echo_summary(request: Request) -> str:
    """Sections filled with the conversation's first words: a plausible, short summary."""
    words = conversation_text(request).split()[:40]
    return "\n".join(f"## {section}\n{' '.join(words)}" for section in SUMMARY_SECTIONS)


def _normalised(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower().replace("’", "'")))


@settings(max_examples=60, deadline=None)
@given(conversations(max_blocks=14))
def test_compaction_keeps_pairs_systems_the_task_and_the_rules(messages: list[Message]) -> None:
    snapshot = list(messages)
    try:
        result = compact(ScriptedSummarizer([_echo_summary]), messages)
    except CompactionError:
        assert messages == snapshot
        return
    assert messages == snapshot
    assert compact(ScriptedSummarizer([_echo_summary]), messages) == result
    view = result.messages
    assert not repair_tool_pairing(view).report.changed  # no split or orphan tool pair
    repaired = repair_tool_pairing(messages).messages
    # The system messages are kept; the one added is the block of carried instructions.
    assert [m for m in view if m.role is Role.SYSTEM and not is_carry_block(m)] == [
        m for m in repaired if m.role is Role.SYSTEM
    ]
    summaries = [m for m in view if is_summary_message(m)]
    assert len(summaries) == 1
    carried = "".join(_normalised(m.text) for m in view if is_carry_block(m))
    summary = _normalised(summaries[0].text) + carried
    # The summary, then the user's carried words (if any), then the kept turns.
    after = view[view.index(summaries[0]) + 1 :]
    tail = after[1:] if after and is_carry_block(after[0]) else after
    assert tail == repaired[len(repaired) - len(tail) :]
    latest = next((m for m in reversed(repaired) if is_real_user_request(m)), None)
    if latest is not None and latest not in tail:
        assert _normalised(latest.text) in summary
    # What the left-out user messages said that carrying keeps is stated, carried or pinned.
    kept = (*(m for m in repaired if m.role is Role.SYSTEM), *tail)
    for item in resolved_statements(repaired, kept)[0]:
        assert _normalised(item.text) in summary


@settings(max_examples=30, deadline=None)
@given(conversations(max_blocks=14), st.integers(3000, 20_000))
def test_no_summary_call_exceeds_the_summariser_window(
    messages: list[Message], window: int
) -> None:
    summarizer = ScriptedSummarizer([_echo_summary], context_window=window)
    try:
        result = compact(summarizer, messages, window=10**9, summarizer_window=window)
    except CompactionError as error:
        assert "exceeds the available context size" not in str(error)
    else:
        assert result.report.calls == len(summarizer.requests)
    assert all(summarizer.needed_tokens(r) <= window for r in summarizer.requests)


_PHRASES = st.sampled_from(
    ["Nunca", "não", "No,", "Por favor,", "¡No", "I want you to", "siempre", "use", "?", ". ", "\n"]
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=20), _PHRASES), max_size=12).map(" ".join))
def test_instructions_are_sentences_of_the_text_and_never_questions(text: str) -> None:
    found = extract_instructions(text)
    assert found == extract_instructions(text)
    assert len(set(found)) == len(found)
    for instruction in found:
        assert instruction in text and instruction.strip() and not instruction.endswith("?")


_EVENTS = st.lists(st.sampled_from(["fail", "weak", "good"]), max_size=12)


@settings(max_examples=60, deadline=None)
@given(_EVENTS)
def test_the_breaker_counts_trailing_strikes_and_reports_once(events: list[str]) -> None:
    freed = {"weak": 950, "good": 300}
    breaker = CompactionBreaker()
    notices = 0
    for event in events:
        if breaker.is_open:
            break  # auto-compaction stops here
        if event == "fail":
            breaker = breaker.after_failure("error")
        else:
            report = CompactionReport(
                messages_before=9, messages_after=3, tokens_before=1000, tokens_after=freed[event]
            )
            breaker = breaker.after_compaction(report)
        breaker, notice = breaker.take_notice()
        notices += notice is not None
    opened = breaker.is_open
    assert notices == (1 if opened else 0)
    assert opened == (breaker.strikes >= 3)
    if not opened:  # every event was processed: strikes are the failures since the last good
        marks = "".join("g" if event == "good" else "s" for event in events)
        assert breaker.strikes == len(marks) - len(marks.rstrip("s"))
