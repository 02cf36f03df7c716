"""What a send reuses from the last one: every memoised step gives what a from-scratch
computation gives, on conversations that grow and on edits that are not appends.

The steps are the native compaction view (`chatcli.history.native`), the transcript's
numbers (`chatcli.history.numbers` against `chatcli.history.carry.Numbering`), the sticky
view's digest (`chatcli.history.sticky`) and a whole `Client.send` (microcompaction and its
stubs, the budget, the recovery levels and what they carry, against a client that keeps
nothing); and `ToolCall.arguments_json`, kept once made, is no part of the value.

A timeline is the transcripts one owner is sent in turn: a conversation that grows by a few
messages, with a message replaced in the middle (by another text, or by an equal copy that
is another object), a message object sent twice, the conversation shortened, and another
conversation in between.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.config import MicrocompactConfig
from chatcli.history.carry import Numbering
from chatcli.history.microcompact import microcompact
from chatcli.history.native import native_view
from chatcli.history.numbers import transcript_numbers
from chatcli.history.scan import ScanMemos
from chatcli.history.sticky import history_digest
from chatcli.messages import CompactionPart, Message, ToolCall
from chatcli.recovery import Client
from chatcli.serialize import message_from_dict, message_to_dict
from tests.fakes import WindowedProvider

OWNER = ("anthropic", "claude-sonnet-4-6")
OTHER = ("openai", "gpt-5")
# What users say that carrying keeps (rules, constraints, facts), beside the sessions' own.
SAID = (
    "Never push to main.",
    "The budget cap is 5,000 EUR.",
    "Deploy by 2026-03-01 at the latest.",
    "Always run the tests first.",
    "Use tabs, not spaces.",
)
# Tool results are these repeated (random text of that size would exhaust hypothesis).
PIECES = ("def step(x):\n    return x + 1\n", "ERROR 2026-01-02 12:00:01 disk full\n", "ok ")
# How many times: few sizes, so equal results (and numbers found by text) are common.
REPEATS = (1, 40, 400, 1_200)
EDITS = ("append", "append", "append", "replace", "copy", "repeat", "shorten", "other")


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """An agent session (a call and its result per step, a user message now and then) whose
    user messages say things worth carrying, whose results are up to ~40,000 chars (equal
    ones and equal user messages are common: numbers found by text are tried), and
    whose answers may hold a provider's compaction (the client's provider's, or another's)."""
    messages = [Message.system("You are an agent."), Message.user("Fix the build. " + SAID[0])]
    for step in range(draw(st.integers(1, 16))):
        call = ToolCall(id=f"call_{step}", name="read_file", arguments={"path": f"f{step}.py"})
        answer = Message.assistant(f"Reading f{step}.py.", tool_calls=(call,))
        if draw(st.integers(0, 4)) == 0:
            provider, model = draw(st.sampled_from((OWNER, OWNER, OTHER)))
            summary = draw(st.text(max_size=40))
            part = CompactionPart(
                provider=provider,
                model=model,
                summary=summary,
                provider_details={"type": "compaction", "content": summary},
                keeps=draw(st.integers(0, 2)),
            )
            answer = replace(answer, compaction=part)
        result = draw(st.sampled_from(PIECES)) * draw(st.sampled_from(REPEATS))
        messages += [answer, Message.tool(call.id, result, is_error=draw(st.booleans()))]
        if draw(st.integers(0, 2)) == 0:
            said = draw(st.lists(st.sampled_from(SAID), min_size=1, max_size=3))
            then = draw(st.sampled_from((f" Then look at step {step}.", "")))
            messages.append(Message.user(" ".join(said) + then))
    return messages


class Timeline:
    """The transcripts one owner is sent in turn, and the edits that made them (not a
    dataclass, so that a failure reports its short repr, not the tens of kilobytes of tool
    results its transcripts hold)."""

    def __init__(self, transcripts: tuple[tuple[Message, ...], ...], edits: tuple[str, ...]):
        self.transcripts, self.edits = transcripts, edits

    def __iter__(self) -> Iterator[tuple[Message, ...]]:
        return iter(self.transcripts)

    def __repr__(self) -> str:
        sizes = ", ".join(str(len(t)) for t in self.transcripts)
        return f"Timeline(edits={self.edits}, messages=({sizes}))"


@st.composite
def timelines(draw: st.DrawFn, kinds: tuple[str, ...] = EDITS) -> Timeline:
    """The transcripts one owner is sent in turn (see the module docstring), made by edits of
    `kinds`."""
    source, other = draw(conversations()), draw(conversations())
    edits = draw(st.lists(st.tuples(st.sampled_from(kinds), st.integers(0, 10**6)), max_size=9))
    read = draw(st.integers(2, len(source)))
    current = source[:read]
    timeline = [tuple(current)]
    for edit, n in edits:
        at = n % len(current) if current else 0
        if edit == "append":
            current, read = current + source[read : read + 1 + n % 5], read + 1 + n % 5
        elif edit == "replace" and current:
            current[at] = current[at].with_text(current[at].text + " (edited)")
        elif edit == "copy" and current:
            current[at] = copy.copy(current[at])  # equal, another object
        elif edit == "repeat" and current:
            current.append(current[at])  # the same object twice
        elif edit == "shorten":
            current = current[: at + 1]
        elif edit == "other":
            timeline.append(tuple(other))
            continue
        timeline.append(tuple(current))
    done = tuple(edit for edit, _ in edits)
    return Timeline(transcripts=tuple(t for t in timeline if t), edits=done)


@settings(max_examples=80, deadline=None)
@given(timelines(), st.sampled_from((OWNER, OTHER, (None, None))))
def test_the_native_view_from_memos_is_the_view_read_whole(
    timeline: Timeline, owner: tuple[str | None, str | None]
) -> None:
    provider, model = owner
    memos = ScanMemos()
    for transcript in timeline:
        memoised = native_view(transcript, provider=provider, model=model, memos=memos)
        assert memoised == native_view(transcript, provider=provider, model=model)


def _probes(transcript: tuple[Message, ...]) -> Iterator[Message]:
    """Every message of `transcript`, an equal copy of each (another object), a cut copy."""
    for message in transcript:
        yield message
        yield copy.copy(message)
        yield message.with_text(message.text[:3])


@settings(max_examples=80, deadline=None)
@given(timelines(), st.data())
def test_the_numbers_from_memos_are_the_numbers_read_whole(
    timeline: Timeline, data: st.DataObject
) -> None:
    memos = ScanMemos()
    numberings = []
    for transcript in timeline:
        numbers = transcript_numbers(transcript, memos)
        numberings.append((transcript, numbers))
        # Some are asked at once, some only after later transcripts extended their scan.
        if data.draw(st.booleans()):
            expected = Numbering(transcript)
            assert [numbers(m) for m in _probes(transcript)] == [
                expected(m) for m in _probes(transcript)
            ]
    for transcript, numbers in numberings:
        expected = Numbering(transcript)
        assert [numbers(m) for m in _probes(transcript)] == [
            expected(m) for m in _probes(transcript)
        ]


def test_numbers_stay_right_once_a_longer_transcript_extended_their_scan() -> None:
    first, again = Message.user("do it"), Message.assistant("done")
    short = (Message.system("s"), first, again)
    longer = (*short, Message.user("more"), again, copy.copy(first))
    memos = ScanMemos()
    numbers = transcript_numbers(short, memos)
    assert numbers(again) == 3  # read: the scan is kept
    assert transcript_numbers(longer, memos)(again) == 5  # the same scan, extended
    # `again` and `first`'s text now end later in the scan, past the short transcript's end.
    assert [numbers(again), numbers(copy.copy(first)), numbers(first)] == [3, 2, 2]


def test_a_stub_names_the_callers_message_when_a_scan_of_equal_ones_is_taken() -> None:
    # Another conversation equal at its start (made anew: other objects) takes the first's
    # scan by value; the result it stages is numbered as the caller's message (#4), not as
    # the scan's own, which only its text finds (the later equal result, #8).
    config = MicrocompactConfig(trigger_tokens=0)
    big = "def step(x):\n    return x + 1\n" * 400

    def step(index: int, text: str) -> list[Message]:
        call = ToolCall(id=f"call_{index}", name="read_file")
        return [
            Message.assistant(f"Reading {index}.", tool_calls=(call,)),
            Message.tool(call.id, text),
        ]

    first = [Message.system("You are an agent."), Message.user("Fix it."), *step(0, big)]
    second = [copy.copy(m) for m in first] + step(1, "ok") + step(2, big) + step(3, "ok")
    memos = ScanMemos()
    for transcript in (first, second):
        numbers = transcript_numbers(transcript, memos)
        memoised = microcompact(transcript, config, memos=memos, numbering=numbers)
        whole = microcompact(transcript, config, numbering=Numbering(transcript))
        assert memoised == whole
    assert "/history #4," in memoised.messages[3].text


@settings(max_examples=60, deadline=None)
@given(timelines())
def test_the_digest_from_memos_is_the_digest_read_whole(
    timeline: Timeline,
) -> None:
    memos = ScanMemos()
    for transcript in timeline:
        assert history_digest(transcript, memos) == history_digest(transcript)


@dataclass(kw_only=True)
class CompactingProvider(WindowedProvider):
    """A windowed model that reads the compactions of `OWNER`."""

    compaction_provider: str = OWNER[0]
    model: str = OWNER[1]


@settings(max_examples=40, deadline=None)
@given(
    timelines(tuple(kind for kind in EDITS if kind != "repeat")),
    st.integers(2_000, 30_000),
    st.integers(0, 6_000),
    st.booleans(),
)
def test_a_client_sends_what_a_client_that_keeps_nothing_sends(
    timeline: Timeline, window: int, trigger: int, declared: bool
) -> None:
    # Microcompaction stubs, recovery levels (pre-flight or after a rejection), carried
    # instructions, sticky views and the provider's compaction, sent by a client that
    # keeps its scans and by one that keeps none (every scan read whole). Not the same
    # object sent twice: a message's number is the last place of its object, which a later
    # place moves, and microcompaction keeps the stub it made with the earlier number (its
    # docstring says so of copies found by their text).
    config = MicrocompactConfig(trigger_tokens=trigger)
    kept = CompactingProvider(window=window, declares_limits=declared)
    whole = CompactingProvider(window=window, declares_limits=declared)
    memoised = Client(kept, microcompact=config)
    fresh = Client(whole, microcompact=config, memos=ScanMemos(size=0))
    for transcript in timeline:
        outcomes = [_outcome(client, transcript) for client in (memoised, fresh)]
        assert outcomes[0] == outcomes[1]
        assert [r.messages for r in kept.requests] == [r.messages for r in whole.requests]
        assert memoised.sticky_view == fresh.sticky_view


def _outcome(client: Client, transcript: tuple[Message, ...]) -> object:
    try:
        reply = client.send(transcript)
    except Exception as error:
        return type(error), str(error)
    return reply.message, reply.view, reply.events


class HashableArguments(dict[str, Any]):
    """Arguments that hash (a dict does not), to check what a call's hash depends on."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


def test_a_calls_kept_json_is_no_part_of_its_value() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.py", "n": 3})
    fresh = ToolCall(id="c1", name="read_file", arguments={"path": "a.py", "n": 3})
    assert call.arguments_json == '{"path":"a.py","n":3}'
    assert call.arguments_json is call.arguments_json  # made once
    assert call == fresh and repr(call) == repr(fresh)  # one kept, one not: the same value
    hashed = ToolCall(id="c1", name="f", arguments=HashableArguments(q="x"))
    assert hash(hashed) == hash(ToolCall(id="c1", name="f", arguments=HashableArguments(q="x")))
    _ = hashed.arguments_json
    assert hash(hashed) == hash(ToolCall(id="c1", name="f", arguments=HashableArguments(q="x")))
    edited = replace(call, arguments={"path": "b.py"})
    assert edited.arguments_json == '{"path":"b.py"}'  # its own, not the call's
    for same in (pickle.loads(pickle.dumps(call)), copy.deepcopy(call), copy.copy(call)):
        assert same == call and same.arguments_json == call.arguments_json
    message = Message.assistant("reading", tool_calls=(call,))
    assert message_from_dict(message_to_dict(message)) == message
    assert "_arguments_json" not in str(message_to_dict(message))
