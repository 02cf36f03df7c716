"""ChatSession, the library side of the chat: the transcript is stored before and after each
call, views from /compact and /clear survive a reopen, cost splits answer and recovery, the
budget rule, the /context statuses, and the exports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatcli.catalog import ModelInfo, Prices
from chatcli.chat.context import Status
from chatcli.chat.export import export_transcript
from chatcli.chat.session import ChatSession
from chatcli.chat.spending import check_budget, usd
from chatcli.chat.text import CompactionNote, CompactionStarted, MessageCut
from chatcli.compaction import SUMMARY_SECTIONS
from chatcli.compaction.prompt import SYSTEM_PROMPT
from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.cost import CallKind
from chatcli.errors import CompactionError, ProviderError
from chatcli.events import Event, LevelApplied, PreflightRecovery
from chatcli.history.microcompact import STUB_PREFIX
from chatcli.history.text import original_length
from chatcli.messages import Message, Role, StopReason, ToolCall, Usage
from chatcli.providers.base import Request, StreamChunk, TextDelta
from chatcli.recall import recall_tool
from chatcli.serialize import message_from_dict
from chatcli.store import SessionStore
from tests.fakes import ScriptedProvider, WindowedProvider, response

PRICED = ModelInfo(model="m", prices=Prices(input=1.0, output=2.0, cache_read=0.1, cache_write=1.0))


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    with SessionStore(tmp_path / "s.db") as opened:
        yield opened  # type: ignore[misc]


def open_session(store: SessionStore, provider: object, **options: object) -> ChatSession:
    return ChatSession.open(store, provider, provider_name="test", model="m", **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spent", "next_cost", "status"),
    [
        (0.0, 0.1, "ok"),
        (0.75, 0.1, "warn"),
        (0.79, 0.0, "ok"),
        (0.9, 0.2, "over"),
        (1.0, 0.0, "over"),
        (0.1, None, "unknown"),
        (1.5, None, "over"),
    ],
)
def test_check_budget(spent: float, next_cost: float | None, status: str) -> None:
    assert check_budget(spent, next_cost, 1.0).status == status


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0, "$0.00"),
        (2.5, "$2.50"),
        (0.5, "$0.50"),
        (0.05, "$0.05"),
        (0.005, "$0.005"),
        (0.0000123, "$0.000012"),
        (0.000005, "$0.000005"),
        (12.345, "$12.35"),
    ],
)
def test_usd_keeps_small_amounts_visible(value: float, shown: str) -> None:
    assert usd(value) == shown


def test_a_small_budget_is_not_shown_as_zero() -> None:
    message = check_budget(0.0041, 0.002, 0.005).message
    assert message.startswith("$0.0041 of the $0.005 session budget spent")
    assert "(about $0.002)" in message


def test_the_user_message_is_stored_even_when_the_call_fails(store: SessionStore) -> None:
    provider = ScriptedProvider(script=[RuntimeError("boom: connection reset")])
    session = open_session(store, provider)
    with pytest.raises(ProviderError):
        session.send("are you there?")
    assert [m.text for m in store.transcript(session.info.id)] == ["are you there?"]
    assert [r.tag for r in store.requests(session.info.id)] == ["chat-failed"]


def test_answer_cost_and_recovery_cost_are_apart(store: SessionStore) -> None:
    cut = response("first half ", stop=StopReason.MAX_TOKENS, usage=Usage(100, 10))
    rest = response("second half", usage=Usage(120, 20))
    session = open_session(
        store, ScriptedProvider(script=[cut, rest]), model_info=PRICED, max_tokens=10
    )
    turn = session.send("go")
    assert [c.kind for c in turn.calls] == [CallKind.ANSWER, CallKind.CONTINUATION]
    assert turn.cost == pytest.approx((220 * 1.0 + 30 * 2.0) / 1e6)
    assert turn.recovery_cost == pytest.approx((120 * 1.0 + 20 * 2.0) / 1e6)
    (stored,) = store.requests(session.info.id)
    assert stored.cost_usd == pytest.approx(turn.cost)
    assert stored.recovery_cost_usd == pytest.approx(turn.recovery_cost)
    assert store.transcript(session.info.id)[-1].text == "first half second half"


def test_unknown_prices_cost_none(store: SessionStore) -> None:
    session = open_session(store, ScriptedProvider(script=[response("hi")]))
    assert session.send("hello").cost is None
    assert session.cost_summary().total.cost is None


def test_a_cancelled_call_keeps_the_usage_its_stream_reported(store: SessionStore) -> None:
    class CancelledAtTheEnd(ScriptedProvider):
        """Streams its answer and its usage, then the user presses Ctrl-C."""

        def stream(self, request: Request) -> Iterator[StreamChunk]:
            yield TextDelta(text="half an ans")
            yield response("half an ans", usage=Usage(100, 5))
            raise KeyboardInterrupt

    session = open_session(store, CancelledAtTheEnd(script=[]), model_info=PRICED)
    streamed: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        session.send("go", on_delta=streamed.append)
    session.record_cancelled("".join(streamed))
    (cancelled,) = store.requests(session.info.id)
    assert (cancelled.tag, cancelled.usage) == ("cancelled", Usage(100, 5))
    assert cancelled.cost_usd == pytest.approx((100 * 1.0 + 5 * 2.0) / 1e6)
    assert store.transcript(session.info.id)[-1].text.startswith("half an ans")


def test_clear_is_an_event_not_a_request(store: SessionStore) -> None:
    session = open_session(store, ScriptedProvider(script=[response("a1")]))
    session.send("q1")
    session.clear()
    assert [r.tag for r in store.requests(session.info.id)] == ["chat"]
    (clear,) = [e for e in store.events(session.info.id) if e.kind == "clear"]
    assert clear.request_id is None and clear.data == {"view": [], "upto": 2}
    assert session.cost_summary().total.requests == 1


def test_compaction_cost_is_its_own_line_even_when_it_fails(store: SessionStore) -> None:
    words = "the parser fails on tabs so fix the tokenizer and keep tests green"
    summary = "\n".join(f"## {section}\nthe parser fails on tabs" for section in SUMMARY_SECTIONS)
    answers = [response(f"answer {i}: {words * 8}", usage=Usage(1000, 100)) for i in range(6)]
    refused = response("I cannot summarise this.", usage=Usage(3000, 10))
    made = response(summary, usage=Usage(2000, 50))
    # Refused twice: after the last chat request (on its cached prefix), then as text.
    provider = ScriptedProvider(script=[*answers, refused, refused, made])
    session = open_session(store, provider, model_info=PRICED)
    for i in range(6):
        session.send(f"question {i}: {words}")
    with pytest.raises(CompactionError, match="0 of the 7 sections"):
        session.compact()
    asked = len(provider.requests)
    warm, rendered = provider.requests[-2:]
    assert warm.messages[: len(provider.requests[5].messages)] == provider.requests[5].messages
    assert rendered.messages[0].text == SYSTEM_PROMPT
    # The model could not summarise: /compact refuses at once, no call made, nothing stored.
    with pytest.raises(CompactionError, match="not asked again"):
        session.compact()
    assert len(provider.requests) == asked
    session.switch_model(provider, "m", PRICED)  # another model may summarise: asked again
    session.compact()
    tags = [r.tag for r in store.requests(session.info.id)]
    assert tags == ["chat"] * 6 + ["compaction-failed", "compaction"]
    total = session.cost_summary().total
    assert total.compaction_cost == pytest.approx((2 * 3000 + 2000 + 2 * 2 * 10 + 2 * 50) / 1e6)
    assert total.recovery_cost == 0.0  # a compaction is not a recovery
    assert total.cost == pytest.approx(6 * 1200 / 1e6 + (total.compaction_cost or 0))


def _is_summary_call(request: Request) -> bool:
    return bool(request.messages) and request.messages[0].text == SYSTEM_PROMPT


def test_a_model_that_cannot_summarise_is_asked_once_per_session(store: SessionStore) -> None:
    # The windowed model answers "Answer to: ..." to everything, a summary request too: the
    # summary has none of the sections, as SmolLM2-135M's plain answers had.
    provider = WindowedProvider(window=4096)
    session = open_session(store, provider, max_tokens=100)
    seen: list[Event] = []
    for i in range(8):
        session.send(
            f"question {i}: " + "about the parser and its tests " * 30, on_event=seen.append
        )
    summary_calls = [r for r in provider.requests if _is_summary_call(r)]
    failed = [r for r in store.requests(session.info.id) if r.tag == "compaction-failed"]
    assert len(failed) == 1 and len(summary_calls) == 1  # tried once, then stepped aside
    notes = [e for e in seen if isinstance(e, CompactionNote) and e.notice]
    assert len(notes) == 1 and "cannot summarise this conversation" in (notes[0].notice or "")
    starts = [i for i, e in enumerate(seen) if isinstance(e, CompactionStarted)]
    assert len(starts) == 1  # "compacting…" was shown while the one attempt ran
    assert isinstance(seen[starts[0] + 1], CompactionNote)
    asked = len(provider.requests)
    with pytest.raises(CompactionError, match="not asked again"):
        session.compact()  # /compact refuses at once
    assert len(provider.requests) == asked


def test_clear_survives_a_reopen(store: SessionStore) -> None:
    provider = ScriptedProvider(script=[response("a1"), response("a2")])
    session = open_session(store, provider)
    session.send("q1")
    session.clear()
    session.send("q2")
    assert [m.text for m in provider.requests[-1].messages] == ["q2"]
    reopened = open_session(store, provider, resume=session.info.id)
    assert len(reopened.transcript) == 4
    assert [m.text for m in reopened.working_messages()] == ["q2", "a2"]


def test_compaction_survives_a_reopen(store: SessionStore) -> None:
    words = "the parser fails on tabs so fix the tokenizer and keep tests green"
    summary = "\n".join(f"## {section}\nthe parser fails on tabs" for section in SUMMARY_SECTIONS)
    script = [response(f"answer {i}: {words * 8}") for i in range(6)] + [response(summary)]
    session = open_session(store, ScriptedProvider(script=script))
    for i in range(6):
        session.send(f"question {i}: {words}")
    result = session.compact()
    assert len(result.messages) < 12
    reopened = open_session(store, ScriptedProvider(script=[]), resume=session.info.id)
    assert reopened.working_messages() == session.working_messages()
    assert len(reopened.transcript) == 12  # nothing lost


def test_context_report_statuses(store: SessionStore) -> None:
    recovery = RecoveryConfig(tool_result_max_chars=300, tool_result_budget_chars=300)
    session = open_session(store, WindowedProvider(window=100_000), recovery=recovery)
    session.append(
        (
            Message.user("read it"),
            Message.assistant(tool_calls=()),
        )
    )
    report = session.context_report()
    assert [r.status for r in report.rows] == [Status.VERBATIM, Status.VERBATIM]
    call = ToolCall(id="c1", name="read_file", arguments={"path": "big.txt"})
    session.append((Message.assistant(tool_calls=(call,)), Message.tool("c1", "z" * 5000)))
    rows = session.context_report().rows
    assert rows[-1].status == Status.CUT and rows[-1].detail == "tool-result budget"
    assert report.window == 100_000 and 0 < (report.fraction or 0) < 0.01


def append_tool_rounds(session: ChatSession, rounds: int = 5) -> str:
    """Rounds of a 6,000-char tool result each; returns the result's text."""
    output = "x = 1\n" * 1000
    for i in range(rounds):
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"f{i}.py"})
        round_ = (Message.user(f"read f{i}.py"), Message.assistant(tool_calls=(call,)))
        session.append((*round_, Message.tool(f"c{i}", output), Message.assistant("read")))
    return output


def test_old_tool_results_are_microcompacted_by_the_client_and_shown_so(
    store: SessionStore,
) -> None:
    # Five rounds of 6,000-char results: 9, 7 and 5 assistant turns old (stubs), 3 (cut to
    # head and tail), 1 (whole). /context reports each; the request sends the same; the
    # transcript keeps every result whole. Trigger 0: by age alone (the default waits for
    # 100,000 tokens).
    provider = ScriptedProvider(script=[response("done")])
    session = open_session(store, provider, microcompaction=MicrocompactConfig(trigger_tokens=0))
    output = append_tool_rounds(session)
    tool_rows = [r for r in session.context_report().rows if r.role is Role.TOOL]
    assert [(r.status, r.detail) for r in tool_rows] == [
        *[(Status.CLEARED, "old tool result, stubbed by microcompaction")] * 3,
        (Status.CUT, "microcompaction"),
        (Status.VERBATIM, ""),
    ]
    estimated = [m.text for m in session._microcompacted() if m.role is Role.TOOL]
    session.send("next")
    sent = [m.text for m in provider.requests[0].messages if m.role is Role.TOOL]
    assert all(text.startswith(STUB_PREFIX) for text in sent[:3])
    assert "chars cut by microcompaction" in sent[3] and sent[4] == output
    transcript = store.transcript(session.info.id)
    results = [m.text for m in transcript if m.role is Role.TOOL]
    assert results == [output] * 5
    numbers = [n for n, m in enumerate(transcript, 1) if m.role is Role.TOOL]
    for number, text in zip(numbers[:4], sent[:4], strict=True):  # by the transcript's number
        assert f"(/history #{number}, call id" in text
    # The session's own estimate counted what the client sent (the same numbered texts).
    assert estimated == sent


def test_microcompaction_none_turns_it_off_as_for_the_client(store: SessionStore) -> None:
    # The same rounds as above, which the default microcompaction stubs and cuts: with
    # microcompaction=None (as `Client(microcompact=None)`) every result is sent whole and
    # /context calls each verbatim. It used to fall back to the default settings.
    provider = ScriptedProvider(script=[response("done")])
    session = open_session(store, provider, microcompaction=None)
    output = append_tool_rounds(session)
    tool_rows = [r for r in session.context_report().rows if r.role is Role.TOOL]
    assert [r.status for r in tool_rows] == [Status.VERBATIM] * 5
    session.send("next")
    sent = [m.text for m in provider.requests[0].messages if m.role is Role.TOOL]
    assert sent == [output] * 5


def test_context_report_judges_cuts_with_the_sessions_microcompaction(
    store: SessionStore,
) -> None:
    # Microcompaction set to leave results alone for 50 turns: an old 6,000-char result is
    # sent whole until the pre-flight level 1 cuts it. The default settings would have cut
    # it already, and a report judging by them called level 1's cut the budget's.
    session = open_session(
        store,
        # Room for level 1's view: the estimate counts "x = 1" lines at ~3 tokens each.
        WindowedProvider(window=2400),
        max_tokens=1,  # the whole window is the prompt's
        recovery=RecoveryConfig(tool_result_max_chars=8000, tool_result_budget_chars=8000),
        microcompaction=MicrocompactConfig(truncate_turns=50, summarize_turns=60),
    )
    call = ToolCall(id="c0", name="read_file", arguments={"path": "a.py"})
    result = Message.tool("c0", "x = 1\n" * 1000)
    session.append((Message.user("read a.py"), Message.assistant(tool_calls=(call,)), result))
    for i in range(5):
        session.append((Message.assistant(f"read {i}"), Message.user(f"question {i}")))
    report = session.context_report()
    assert report.level == 1
    (tool_row,) = [row for row in report.rows if row.role is Role.TOOL]
    assert (tool_row.status, tool_row.detail) == (Status.CUT, "level 1")


def test_context_report_shows_what_a_level_drops(store: SessionStore) -> None:
    session = open_session(store, WindowedProvider(window=300), max_tokens=10)
    for i in range(8):
        session.append((Message.user(f"question {i} " + "q" * 200), Message.assistant("ok")))
    report = session.context_report()
    assert report.level > 0 and report.notes
    statuses = {row.status for row in report.rows}
    assert Status.ONLY_IN_TRANSCRIPT in statuses and Status.VERBATIM in statuses
    assert report.rows[-1].status == Status.VERBATIM  # the latest exchange is kept


def _paste(chars: int, head: str = "here is the log:\n") -> str:
    words = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")
    text = " ".join(words[(i * 7) % len(words)] for i in range(chars // 4))
    return head + text[:chars]


def test_context_names_the_transform_behind_each_row_of_a_pasted_log(
    store: SessionStore,
) -> None:
    # Seen in the chat against llama-server (a 4,096-token window): after a 60k-char paste
    # was cut by level 2, /context called it "cut (microcompaction)" and listed a "level 3
    # notice" no event had announced; auto-compaction's fallback had grown the view
    # (~15,009 -> ~15,048 tokens, its own estimator) while pre-flight estimated the same
    # prompt at 47,303 (the session's).
    session = open_session(
        store, WindowedProvider(window=4096, answer=lambda messages: "ok"), max_tokens=512
    )
    session.send("Never push to main. Hello.")
    events: list[Event] = []
    session.send(_paste(60_000), on_event=events.append)
    said = "\n".join(e.describe() for e in events)
    # One estimate: auto-compaction counted the prompt as pre-flight did.
    (preflight,) = [e for e in events if isinstance(e, PreflightRecovery)]
    (note,) = [e for e in events if isinstance(e, CompactionNote)]
    assert f"~{preflight.estimate:,} -> " in note.describe()
    # Its fallback did not shrink the view, so it was not applied: the request's level was.
    assert note.result is None and "changed nothing" in note.describe()
    assert [e.level for e in events if isinstance(e, LevelApplied)] == [2]
    report = session.context_report()
    rows = {row.position: row for row in report.rows}
    assert (rows[3].status, rows[3].detail) == (Status.CUT, "level 2, kept from an earlier request")
    assert rows[2].detail == "dropped by level 2, kept from an earlier request"
    # Every notice in the view was announced by an event.
    added = [row.detail for row in report.rows if row.status == Status.ADDED]
    assert all("notice" not in detail for detail in added) or "notice" in said
    assert report.made_by == "level 2, kept from an earlier request" and report.notes == ()
    # A reopened session names the same transform (read back from the stored events).
    reopened = open_session(store, WindowedProvider(window=4096), resume=session.info.id)
    again = reopened.context_report().rows
    assert [(r.position, r.status, r.detail) for r in again] == [
        (r.position, r.status, r.detail) for r in report.rows
    ]


def test_cut_markers_name_the_transcripts_message_numbers(store: SessionStore) -> None:
    # The recall tool reads a message by its transcript number: the marker of a cut must
    # name that number, also when the view starts from an earlier cut (where the place in
    # the working view is another number).
    provider = WindowedProvider(window=4096, answer=lambda messages: "ok")
    session = open_session(store, provider, max_tokens=512)
    session.send("Never push to main. Hello.")
    session.send(_paste(60_000))  # message 3: level 2 cuts it, the cut is kept
    (first,) = [m.text for m in provider.requests[-1].messages if m.text.startswith("here is")]
    assert "the transcript keeps the whole message #3 ...]" in first
    assert session.base is not None and len(session.base) < len(session.transcript)
    second = _paste(50_000, head="and the next one:\n")
    session.send(second)  # message 5, the 4th of the working view
    sent = [
        m.text for m in provider.requests[-1].messages if m.text.startswith(("here is", "and the"))
    ]
    assert len(sent) == 1  # message 3 is dropped now: the new cut keeps the newest
    assert "the transcript keeps the whole message #5 ...]" in sent[0]
    tool = recall_tool(session.transcript)
    text, is_error = tool({"message": 5, "start": 0, "length": 100})
    assert not is_error and text.endswith(second[:100])
    rows = {row.position: row for row in session.context_report().rows}
    assert (rows[3].status, rows[5].status) == (Status.ONLY_IN_TRANSCRIPT, Status.CUT)
    assert rows[5].detail == "level 2, kept from an earlier request"


def test_context_names_a_compaction_s_fallback_and_its_notice(store: SessionStore) -> None:
    # Auto-compaction over the window, its summariser failing: it falls back to level 3,
    # which shrinks the view and adds its notice; the event says so, /context names both.
    session = open_session(
        store,
        WindowedProvider(window=2000, answer=lambda messages: "ok"),
        summarizer=ScriptedProvider(script=[RuntimeError("boom")]),
    )
    for i in range(12):  # level 2 keeps 8 of them: too many for the window, level 3 keeps 4
        session.append((Message.user(f"question {i} " + "q" * 1600), Message.assistant("ok")))
    events: list[Event] = []
    session.send("next", on_event=events.append)
    (note,) = [e for e in events if isinstance(e, CompactionNote)]
    assert note.result is not None and note.result.report.fallback is not None
    assert "fell back to level 3: nuclear truncation" in note.describe()
    assert "added the compaction notice" in note.describe()
    made_by = "compaction's fallback to level 3: nuclear truncation"
    assert session.base_made_by == made_by
    report = session.context_report()
    added = [row.detail for row in report.rows if row.status == Status.ADDED]
    assert added == [f"compaction notice ({made_by})"]
    dropped = [row for row in report.rows if row.status == Status.ONLY_IN_TRANSCRIPT]
    assert dropped and all(row.detail == f"dropped by {made_by}" for row in dropped)
    # Its summary failed: stored as a failed /compact is (it was "compaction" before), and
    # the view it made still serves a reopened session.
    assert [r.tag for r in store.requests(session.info.id)] == ["compaction-failed", "chat"]
    reopened = open_session(store, ScriptedProvider(script=[]), resume=session.info.id)
    assert reopened.working_messages() == session.working_messages()


def test_exports_hold_every_message(store: SessionStore) -> None:
    session = open_session(store, ScriptedProvider(script=[response("the answer")]))
    session.send("the question ```with fences```")
    messages = store.transcript(session.info.id)
    data = json.loads(export_transcript(session.info, messages, "json"))
    assert tuple(message_from_dict(m) for m in data["messages"]) == messages
    markdown = export_transcript(session.info, messages, "md")
    assert "## 1. User" in markdown and "## 2. Assistant" in markdown
    assert "the question ```with fences```" in markdown
    with pytest.raises(ValueError, match="unknown export format"):
        export_transcript(session.info, messages, "pdf")


def test_a_window_learned_from_an_overflow_serves_the_next_turns(store: SessionStore) -> None:
    # The provider states no window: the first oversized send costs one rejected call; the
    # next turn, with the oversized message still in the transcript, is cut before it is sent.
    provider = WindowedProvider(window=2_000, declares_limits=False)
    session = open_session(store, provider)
    first = session.send("Please read: " + "the cat sat on the mat. " * 2_000)
    assert first.reply.calls == 2 and session.learned_windows
    second = session.send("and then?")
    assert second.reply.calls == 1 and second.reply.message.text


def test_an_answer_is_asked_with_a_limit_sized_from_the_window(store: SessionStore) -> None:
    # SmolLM2 behind llama-server, no --max-tokens: the chat sent none, and the model wrote
    # 1,086 tokens until its 4,096-token window was full.
    provider = ScriptedProvider(script=[response("hi"), response("hi again")], context_window=4096)
    session = open_session(store, provider)
    session.send("hello")
    assert provider.requests[-1].max_tokens == 1024
    session.set_max_tokens(300)  # the user's own limit wins
    session.send("and now?")
    assert provider.requests[-1].max_tokens == 300
    assert session.context_report().reserve == 300


def test_the_chat_says_how_much_of_a_cut_paste_the_model_saw(store: SessionStore) -> None:
    # A 20k-character paste into a small window, then more turns: the view cuts the paste,
    # then cuts the cut again; each marker states the whole amount removed, and the user is
    # told how much of the paste the model saw, once per cut.
    paste = "Please review:\n" + "\n".join(
        f"{i:05d} the quick brown fox jumps over the lazy dog" for i in range(400)
    )
    provider = WindowedProvider(window=3000, answer=lambda messages: "Noted.")
    session = open_session(store, provider, max_tokens=200, auto_compaction=False)
    seen: list[Event] = []
    session.send(paste, on_event=seen.append)
    for i in range(6):
        session.send(
            f"follow-up question {i}: " + "and what about the dog? " * 20, on_event=seen.append
        )
    told = [e for e in seen if isinstance(e, MessageCut)]
    assert told and told[0].number == 1 and told[0].total == len(paste)
    assert 0 < told[0].seen < len(paste)
    assert f"of the {len(paste):,} characters of your message #1" in told[0].describe()
    assert len(told) >= 2  # cut, then the cut cut again
    assert len({cut.seen for cut in told}) == len(told)  # said again only when it changed
    for request in store.requests(session.info.id):
        for message in store.view(session.info.id, request.id):
            if message.role is Role.USER and "chars cut" in message.text:
                assert original_length(message.text) == len(paste)  # the whole amount


def test_a_call_that_broke_mid_answer_counts_what_it_processed(store: SessionStore) -> None:
    class BreaksOnce(ScriptedProvider):
        """The first stream sends some text, then the connection drops (no usage came)."""

        def stream(self, request: Request) -> Iterator[StreamChunk]:
            if len(self.requests) == 0:
                self.requests.append(request)
                yield TextDelta(text="The answer is")
                raise ConnectionResetError("connection reset by peer")
            answer = self.complete(request)
            yield TextDelta(text=answer.message.text)
            yield answer

    provider = BreaksOnce(script=[response("The answer is 42.", usage=Usage(50, 6))])
    session = open_session(store, provider, model_info=PRICED)
    turn = session.send("what is the answer?", on_delta=lambda text: None)
    broken, answered = turn.calls
    assert (broken.kind, broken.estimated) == (CallKind.FAILED, True)
    assert broken.usage.prompt_tokens > 0 and broken.usage.output_tokens > 0
    assert (answered.usage, answered.estimated) == (Usage(50, 6), False)
    (request,) = store.requests(session.info.id)
    assert request.usage == broken.usage + Usage(50, 6)
    assert session.cost_summary().estimated == {request.id}
    # A call refused before any answer processed nothing: no estimate.
    refused = ScriptedProvider(script=[RuntimeError("boom: connection refused")])
    other = open_session(store, refused)
    with pytest.raises(ProviderError):
        other.send("hello")
    (failed,) = store.requests(other.info.id)
    assert failed.usage == Usage() and not other.cost_summary().estimated
