"""The recovery benchmark's parts that decide its figures: real histories and the fill.

The benchmark itself is not run here (minutes of CPU); these keep it from rotting silently:
its histories must be the standard library's real text, sized by the counter they are given,
and its fill and pairing checks must be right on cases small enough to count by hand.
"""

from __future__ import annotations

from benchmarks.histories import (
    FIRST_REQUEST,
    LATEST_REQUEST,
    build_session,
    oversized_session,
    read_source,
    source_files,
)
from benchmarks.recovery import (
    CachedCounter,
    Outcome,
    Results,
    fill_of,
    pairing_valid,
    run_chatcli,
    summary,
)
from benchmarks.rivals import middle_out

from chatcli.messages import Message, Role, ToolCall


def words() -> CachedCounter:
    """A tokenizer simple enough to count by hand: one token per space-separated word."""
    return CachedCounter(name="words", text_tokens=lambda text: len(text.split()), per_message=3)


def test_histories_are_standard_library_text() -> None:
    counter = words()
    agent = build_session("agent", 20_000, counter)
    results = [m for m in agent if m.role is Role.TOOL]
    assert results, "an agent session reads files"
    sources = {read_source(p) for p in source_files()}
    # Each result is a real file, numbered as a read tool shows it (line 1 is the file's).
    for result in results:
        first_line = result.text.splitlines()[0].split("\t", 1)[1]
        assert any(src.splitlines()[:1] == [first_line] for src in sources if src)
    chat = build_session("chat", 20_000, counter)
    answers = [m.text for m in chat if m.role is Role.ASSISTANT]
    quoted = answers[0].split("```python\n", 1)[1].rsplit("\n```", 1)[0]
    assert any(quoted in src for src in sources), "an answer quotes real library code"


def test_sessions_reach_the_count_and_keep_their_ends() -> None:
    counter = words()
    for kind in ("chat", "agent"):
        session = build_session(kind, 30_000, counter)
        assert counter.count(session) >= 30_000
        assert session[0].role is Role.SYSTEM
        assert session[1].text == FIRST_REQUEST
        assert LATEST_REQUEST in [m.text for m in session[-5:]]
        assert pairing_valid(session)
        assert build_session(kind, 30_000, counter) == session, "deterministic"


def test_oversized_session_ends_with_one_huge_message() -> None:
    counter = words()
    for kind in ("chat", "agent"):
        session = oversized_session(kind, 10_000, counter)
        assert counter.count(session[-1:]) >= 10_000
        assert counter.count(session[:-1]) < 10_000 / 2


def test_a_paste_five_times_the_window_costs_recovery_calls_only() -> None:
    # The model answers briefly: an echo of the paste would be cut at max_tokens and
    # continued, calls that measure the fake model, not recovery.
    counter = words()
    history = oversized_session("chat", 5 * 4_000, counter)
    declared = run_chatcli(history, 4_000, counter, retention="fit", declared=True)
    learned = run_chatcli(history, 4_000, counter, retention="fit", declared=False)
    assert (declared.calls, learned.calls) == (1, 2)
    assert declared.recovered and declared.view is not None
    assert declared.fill is not None and declared.fill <= 1.0


def test_fill_counts_every_message_of_the_view() -> None:
    view = [Message.system("be brief"), Message.user("one two three")]
    # (2 words + 3) + (3 words + 3) = 11 tokens of a 20-token room.
    assert fill_of(view, words(), 20) == 11 / 20


def test_counter_counts_tool_calls_and_caches() -> None:
    calls: list[str] = []

    def text_tokens(text: str) -> int:
        calls.append(text)
        return len(text.split())

    counter = CachedCounter(name="spy", text_tokens=text_tokens, per_message=1)
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a b"})
    message = Message.assistant("let me look", tool_calls=(call,))
    # "let me look" 3 + "read_file" 1 + '{"path":"a b"}' 2 + framing 1.
    assert counter.count([message, message]) == 2 * 7
    assert len(calls) == 3, "tokenized once"


def test_pairing_check() -> None:
    call = ToolCall(id="c1", name="run")
    asked = Message.assistant("", tool_calls=(call,))
    answer = Message.tool("c1", "done")
    assert pairing_valid([Message.user("go"), asked, answer])
    assert not pairing_valid([Message.user("go"), asked])  # unanswered
    assert not pairing_valid([Message.user("go"), answer])  # orphan result
    assert not pairing_valid([asked, Message.user("wait"), answer])  # answered too late


def test_middle_out_keeps_both_ends_and_fits() -> None:
    counter = words()
    history = [
        Message.system("sys"),
        *(Message.user(f"message {i} " + "w " * 20) for i in range(9)),
    ]
    view = middle_out(history, 100, counter)
    assert counter.count(view) <= 100
    assert view[0] == history[0] and view[1] == history[1] and view[-1] == history[-1]


def test_the_summary_measures_the_fill_goal_over_the_cells_a_level_recovered() -> None:
    # Issue 8's goal is over the views a recovery level made; the cells no level ran in
    # (microcompaction alone) are listed apart with their fills, not hidden nor counted.
    def outcome(fill: float, recovered: bool) -> Outcome:
        view = (Message.user("q"),)
        return Outcome(
            calls=1,
            view=view,
            fill=fill,
            latest=True,
            first=True,
            paired=True,
            seconds=0.001,
            recovered=recovered,
        )

    results = Results()
    results.by_method["chatcli fit, declared"] = [
        outcome(0.70, True),
        outcome(0.80, True),
        outcome(0.90, True),
        outcome(0.20, False),
        outcome(0.40, False),
    ]
    row = next(line for line in summary(results) if line.startswith("| chatcli fit, declared |"))
    assert "| 5 | 3 | 80% | 70% | 90% | 2, 20%-40% | 70% |" in row
    rival = next(line for line in summary(results) if line.startswith("| LangChain"))
    assert "not available" in rival  # no cells: said, not left blank
