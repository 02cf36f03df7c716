"""The proxy's end-of-answer fold (`OpenAIBase.folded`) against the streaming path's own
reading of the same bytes: `_SSE` line by line, each event decoded by `_event` (objects as
`_Fields`) and folded by `_ChatAccumulator.add`, as `astream` reads a Chat Completions
stream. The fold takes short cuts for the usual event (a stream's text events by their text
alone, the others decoded into plain dicts); for every stream here, recorded or built from
recorded ones, cut anywhere between the part piped and the rest, it must give the same shown
text, the same Response and the same exceptions."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatcli.errors import ErrorKind, ProviderError
from chatcli.messages import Message, StopReason
from chatcli.providers import openai as openai_module
from chatcli.providers.base import Request, Response
from chatcli.providers.openai import _SSE, OpenAIBase, PassthroughFold, _event
from chatcli.providers.openai_compat import OpenAICompatible, TruncationCheck
from chatcli.tokens import TokenEstimator
from tests.recorded import DATA, provider_errors, sse_events

REQUEST = Request(messages=(Message.user("Say something."),))
Outcome = tuple[Any, ...]


def adapter() -> OpenAICompatible:
    return OpenAICompatible("http://127.0.0.1:9/v1", "gpt-4o", environ={})


def streamed_fold(
    provider: OpenAIBase, piped: bytes, rest: bytes, request: Request
) -> tuple[str, Response | Exception]:
    """The fold as the streaming path reads: each part line by line (`_SSE` on
    `str.splitlines`), each event's data decoded by `_event` and folded by `add`."""
    fold = provider._fold()

    def feed(stream: bytes) -> None:
        sse = _SSE()
        for line in [*stream.decode().splitlines(), ""]:
            if (data := sse.feed(line)) is not None:
                fold.feed(_event(data, None))

    with provider._errors():
        feed(piped)
    shown = "".join(fold.accumulator.texts)  # type: ignore[attr-defined]
    try:
        with provider._errors():
            feed(rest)
        return shown, provider._checked(fold.finish(), request)
    except Exception as exc:
        return shown, exc


def described(exc: BaseException) -> Outcome:
    """An exception as what a caller can tell of it: type, message, classification, cause."""
    cause = exc.__cause__
    info = exc.info if isinstance(exc, ProviderError) else None
    return (type(exc), str(exc), info, type(cause), str(cause) if cause else None)


def outcome(fold: Callable[[], tuple[str, Response | Exception]]) -> Outcome:
    try:
        shown, result = fold()
    except Exception as exc:
        return ("raised", *described(exc))
    return (shown, result if isinstance(result, Response) else described(result))


def assert_same_fold(stream: bytes, cut: int) -> Outcome:
    piped, rest = stream[:cut], stream[cut:]
    provider = adapter()
    expected = outcome(lambda: streamed_fold(provider, piped, rest, REQUEST))
    assert outcome(lambda: provider.folded(piped, rest, REQUEST)) == expected
    return expected


# --- the streams: recorded, and built from recorded ones -----------------------------------


def recorded_streams() -> dict[str, bytes]:
    """Every recorded Chat Completions stream, as its bytes (the files' comments included)."""
    streams = {p.name: p.read_bytes() for p in sorted((DATA / "sse").glob("openai-chat-*.txt"))}
    llama = json.loads((DATA / "llama-server-stream.json").read_text())
    return {**streams, "llama-server-stream.json": llama["body"].encode()}


def recorded_data() -> dict[str, list[str]]:
    """Each recorded stream's events' data, verbatim."""
    datas = {p.name: [d for _, d in sse_events(p.name)] for p in (DATA / "sse").glob("*chat*")}
    llama = recorded_streams()["llama-server-stream.json"].decode()
    datas["llama-server-stream.json"] = [e[6:] for e in llama.split("\n\n") if e]
    return datas


def error_bodies() -> list[str]:
    """Real error bodies with an `error` object (OpenAI's, llama-server's), as stream events."""
    bodies = [r["body"] for r in provider_errors("openai", "openai-compat")]
    bodies.append(json.loads((DATA / "llama-server-overflow.json").read_text())["body"])
    found = []
    for body in bodies:
        try:
            decoded = json.loads(body)
        except ValueError:
            continue
        if isinstance(decoded, dict) and "error" in decoded:
            found.append(body)
    return found


def wire(datas: list[str], *, line: str = "data: ", end: str = "\n\n") -> bytes:
    return "".join(f"{line}{data}{end}" for data in datas).encode()


def refusing(datas: list[str]) -> list[str]:
    """The stream with its texts as refusal deltas."""
    out = []
    for data in datas:
        event = json.loads(data) if data != "[DONE]" else None
        choices = event.get("choices") if isinstance(event, dict) else None
        if choices and "content" in choices[0].get("delta", {}):
            delta = choices[0]["delta"]
            delta["refusal"] = delta.pop("content")
            data = json.dumps(event)
        out.append(data)
    return out


def built_streams() -> Iterator[tuple[str, bytes]]:
    """Streams built from the recorded ones: other framings (CRLF, comments, `event:` lines,
    no space after `data:`, data on several lines, no last blank line), events cut short or
    followed by more after [DONE], error events, refusals, usage-only events, odd values."""
    errors = error_bodies()
    for name, datas in sorted(recorded_data().items()):
        body = [d for d in datas if d != "[DONE]"]
        done = [*body, "[DONE]"]
        yield f"{name} wire", wire(done)
        yield f"{name} crlf", wire(done, end="\r\n\r\n")
        yield f"{name} cr", wire(done, end="\r\r")
        yield f"{name} no space", wire(done, line="data:")
        yield f"{name} event lines", wire(done, line="event: message\ndata: ")
        yield f"{name} comments", wire(done, line=": keep-alive\n\ndata: ")
        yield f"{name} a comment line", wire(done, line=": ping\ndata: ")
        yield f"{name} blank lines", wire(done, end="\n\n\n")
        multi = [json.dumps(json.loads(d), indent=1).replace("\n", "\ndata: ") for d in body]
        yield f"{name} several data lines", wire([*multi, "[DONE]"])
        yield f"{name} no last blank", wire(body)[:-2]
        yield f"{name} without DONE", wire(body)
        yield f"{name} unterminated", wire(body[: len(body) // 2])
        yield f"{name} after DONE", wire([*done, "{not json", body[0]])
        yield f"{name} refused", wire(refusing(done))
        yield f"{name} malformed", wire([*body[:2], body[2][:-3], *body[3:]])
        yield f"{name} leading blank", wire([" " + d for d in done])
        for i, error in enumerate(errors):
            yield f"{name} error {i}", wire([*body[:2], error, *body[2:]])
        for odd in (
            "[1]",
            '"text"',
            "null",
            "",
            '{"error": null, "choices": []}',
            '{"error": {}, "choices": []}',
            '{"usage": {"prompt_tokens": 3, "completion_tokens": 2}}',
            '{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}',
            '{"choices": [{"index": 1, "delta": {"content": "other"}}]}',
            '{"choices": [{"index": 1}]}',
            '{"choices": [{"index": 0, "delta": {"refusal": {}}}]}',
            '{"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 0, "delta": {}}]}',
            '{"choices": [{"index": 0}]}',
            '{"choices": [{"index": 0, "delta": {"content": 5}}]}',
            '{"choices": [{"index": 0, "delta": {"content": "a", "tool_calls": []}}]}',
            '{"choices": [{"index": 0, "delta": {"tool_calls": {}}}]}',
            '{"choices": [{"index": 0, "delta": {}, "finish_reason": {}}]}',
            '{"model": {}, "choices": []}',
            '{"id": ["x"], "choices": "abc"}',
            '{"choices": {"index": 0}}',
            '{"choices": [{"index": 0, "delta": {"content": "a\u2028b"}}]}',
            '{"choices": [{"index": false, "delta": {"content": "f"}}]}',
            '{"choices": [[0]]}',
            '{"choices": []} x',
            '{"choices": []} ',
            '{"model": {"name": "m"}, "choices": []}',
            '{"id": {}, "choices": [{"index": 0, "delta": {}, "finish_reason": {}}]}',
        ):
            yield f"{name} odd {odd}", wire([*body[:3], odd, *body[3:], "[DONE]"])
            yield f"{name} odd {odd} last", wire([*body, odd, "[DONE]"])


STREAMS = {**recorded_streams(), **dict(built_streams())}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_fold_is_the_streaming_path_s_at_every_event_boundary(name: str) -> None:
    stream = STREAMS[name]
    cuts = {0, len(stream)} | {i + 2 for i in range(len(stream)) if stream[i : i + 2] == b"\n\n"}
    for cut in sorted(cuts):
        assert_same_fold(stream, cut)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(STREAMS)), st.data())
def test_the_fold_is_the_streaming_path_s_cut_anywhere(name: str, data: st.DataObject) -> None:
    stream = STREAMS[name]
    assert_same_fold(stream, data.draw(st.integers(0, len(stream)), label="cut"))


# --- streams of drawn texts, on recorded events ---------------------------------------------


def text_events() -> list[dict[str, Any]]:
    """A text event of each recorded stream, decoded (the shape its text events share)."""
    found = []
    for datas in recorded_data().values():
        for data in datas[1:]:
            event = json.loads(data) if data != "[DONE]" else {}
            choices = event.get("choices") or [{}]
            if isinstance(choices[0].get("delta", {}).get("content"), str):
                found.append(event)
                break
    return found


TEXT_EVENTS = text_events()
# Events that are not text events of the stream's shape, among its text events.
ODD_EVENTS = [
    '{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
    '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    '{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}',
    '{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}',
    '{"choices":[{"index":0,"delta":{"refusal":"no"},"finish_reason":null}]}',
    '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":'
    '{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}',
    '{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],"x":{"content":"y"}}',
    '{"error":{"message":"overloaded","type":"server_error"}}',
    '{"choices":[{"index":0,"delta":{"content":"cut',
    ": a comment",
]


@st.composite
def drawn_event(draw: st.DrawFn, base: dict[str, Any]) -> str:
    """A text event of `base`'s shape with a drawn text, spelled as a server may, or an odd one."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(ODD_EVENTS))
    event = copy.deepcopy(base)
    event["choices"][0]["index"] = draw(st.sampled_from([0, 0, 0, 1]))  # 1: never read
    event["choices"][0]["delta"]["content"] = draw(
        st.one_of(st.text(), st.sampled_from(['"content": "', "\\", '"', "\u2028", "é", ""]))
    )
    if draw(st.integers(0, 3)) == 0:  # a field after the text, another "content" in it
        event["x"] = {"content": draw(st.sampled_from(["a", "b"]))}
    spaced = draw(st.booleans())
    return json.dumps(
        event,
        ensure_ascii=draw(st.booleans()),
        separators=(", ", ": ") if spaced else (",", ":"),
    )


@st.composite
def drawn_streams(draw: st.DrawFn) -> bytes:
    base = draw(st.sampled_from(TEXT_EVENTS))
    datas = draw(st.lists(drawn_event(base), max_size=12))
    if draw(st.booleans()):
        datas.append(draw(st.sampled_from(ODD_EVENTS[1:4])))
    if draw(st.booleans()):
        datas.append("[DONE]")
    end = draw(st.sampled_from(["\n\n", "\n\n", "\r\n\r\n", "\n\n\n"]))
    stream = "".join(
        f"{data}{end}" if data.startswith(":") else f"data: {data}{end}" for data in datas
    )
    return stream.encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn_streams(), st.data())
def test_the_fold_of_drawn_texts_is_the_streaming_path_s(
    stream: bytes, data: st.DataObject
) -> None:
    assert_same_fold(stream, data.draw(st.integers(0, len(stream)), label="cut"))


def test_a_content_after_the_text_is_not_taken_for_it() -> None:
    """The events' last `"content"` string is not their text (a field after it): folded as
    decoded, each its own text, not the first event's shape with another string there."""
    events = [
        {"choices": [{"index": 0, "delta": {"content": "same"}}], "x": {"content": f"n{i}"}}
        for i in range(4)
    ]
    finish = '{"choices":[{"index":0,"finish_reason":"stop","delta":{}}]}'
    stream = wire([*(json.dumps(e) for e in events), finish])
    result = assert_same_fold(stream, len(stream))[1]
    assert isinstance(result, Response) and result.message.text == "same" * 4


@pytest.mark.parametrize("base", TEXT_EVENTS, ids=lambda e: str(e.get("model")))
def test_more_than_a_text_between_the_shape_s_ends_is_not_taken_for_it(
    base: dict[str, Any],
) -> None:
    """An event with the shape's head and tail but more than one string between them (a
    refusal after the text) is decoded whole: its refusal is not lost."""
    first, second = copy.deepcopy(base), copy.deepcopy(base)
    first["choices"][0]["delta"]["content"] = "a"
    second["choices"][0]["delta"].update(content="b", refusal="c")
    finish = '{"choices":[{"index":0,"finish_reason":"stop","delta":{}}]}'
    stream = wire([json.dumps(first), json.dumps(second), finish])
    result = assert_same_fold(stream, len(stream))[1]
    assert isinstance(result, Response) and result.stop_reason is StopReason.REFUSAL


# --- the short cuts are taken ---------------------------------------------------------------


def test_a_usual_answer_decodes_its_text_events_by_their_text_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 150-event answer in OpenAI's shape: its events decoded whole only where they differ
    (the first, the finish, the usage; the usage event alone by `_event`)."""
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stub"}
    texts = [f"t{i} " for i in range(150)]
    events = [
        {**head, "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]}
        for t in texts
    ]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({**head, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 150}})
    stream = wire([*map(json.dumps, events), "[DONE]"])
    decoded: list[str] = []
    whole: list[str] = []
    plain, event = openai_module._plain_object, openai_module._event
    monkeypatch.setattr(openai_module, "_plain_object", lambda d: whole.append(d) or plain(d))
    monkeypatch.setattr(openai_module, "_event", lambda d, r: decoded.append(d) or event(d, r))
    cut = stream.index(b"data: ", len(stream) // 2)
    shown, result = adapter().folded(stream[:cut], stream[cut:], REQUEST)
    assert isinstance(result, Response) and result.message.text == "".join(texts)
    assert result.usage.output_tokens == 150 and result.model == "stub"
    assert shown == result.message.text[: len(shown)] and shown
    assert decoded == [json.dumps(events[-1])]
    assert len(whole) <= 8  # each part: its first event (and its shape's check), finish, usage


def test_a_stream_whose_events_all_differ_looks_for_its_shape_a_few_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Events each with a field of their own (OpenAI's `obfuscation`): no shape fits the
    next event, and the fold stops looking for one after `_SHAPE_TRIES` tries."""
    events = [
        {"choices": [{"index": 0, "delta": {"content": f"w{i} "}}], "obfuscation": "x" * i}
        for i in range(20)
    ]
    finish = '{"choices":[{"index":0,"finish_reason":"stop","delta":{}}]}'
    stream = wire([*(json.dumps(e) for e in events), finish])
    tried: list[str] = []
    shape_of = openai_module._TextEvents.of
    monkeypatch.setattr(
        openai_module._TextEvents, "of", lambda d, c: tried.append(d) or shape_of(d, c)
    )
    result = assert_same_fold(stream, len(stream))[1]
    assert isinstance(result, Response) and result.message.text.startswith("w0 w1 ")
    assert len(tried) == openai_module._SHAPE_TRIES


@dataclass(frozen=True, slots=True, kw_only=True)
class CountingEstimator(TokenEstimator):
    """The default estimate, each count of messages noted."""

    counted: list[int] = field(default_factory=list)

    def count(self, messages: Sequence[Message]) -> int:
        self.counted.append(len(messages))
        return TokenEstimator.count(self, messages)


@pytest.mark.parametrize(("window", "cut_prompt"), [(4_096, True), (None, False)])
def test_the_piped_fold_estimates_the_prompt_as_it_begins_and_checks_at_its_end(
    window: int | None, cut_prompt: bool
) -> None:
    """`PassthroughFold` makes the adapter's check ready when it begins (an OpenAI-compatible
    server's prompt estimates, a pass over every message), so the answer's end counts
    nothing; its outcome is the check's all the same: the recorded stream reports 14 prompt
    tokens for a prompt of ~5,000, in a 4,096-token window a silently cut prompt."""
    stream = wire([data for _, data in sse_events("openai-chat-text.txt")])
    cut = stream.index(b"data: ", len(stream) // 2)
    request = Request(messages=(Message.user("lorem ipsum " * 1_700),))
    estimator = CountingEstimator()
    provider = OpenAICompatible(
        "http://127.0.0.1:9/v1",
        "gpt-4o",
        environ={},
        context_window=window,
        truncation_check=TruncationCheck(estimator=estimator),
    )
    fold = PassthroughFold(provider, request)
    counted = list(estimator.counted)
    assert sum(counted) >= len(request.messages)  # every message estimated, once begun
    fold.piped(stream[:cut])
    ended = outcome(lambda: fold.ended(stream[cut:]))
    assert estimator.counted == counted  # nothing counted at the end
    assert ended == outcome(lambda: provider.folded(stream[:cut], stream[cut:], request))
    shown, result = ended
    if cut_prompt:
        assert result[0] is ProviderError and "detected from usage" in result[1]
        assert result[2].kind is ErrorKind.CONTEXT_OVERFLOW
    else:
        assert isinstance(result, Response) and result.message.text.startswith(shown)
