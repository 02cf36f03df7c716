"""The embedded LlamaCpp provider, running the tiny model in-process with llama-cpp-python.

Tests that need llama-cpp-python are skipped where it is not installed
(scripts/install-llama-cpp-python.sh installs it); the message mapping tests always run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatcli.errors import ErrorKind, ProviderError
from chatcli.messages import Message, StopReason, ToolCall
from chatcli.providers.base import Request, Response, StreamingProvider, TextDelta
from chatcli.providers.llama_cpp import LlamaCpp, chat_messages

pytest_plugins = ("tests.servers",)

N_CTX = 256
HELLO = (Message.user("Say something."),)
# About 700 prompt tokens with the tiny model's tokenizer: well past the window.
TOO_LONG = (Message.user("The context window fills up. " * 36),)


@pytest.fixture(scope="module")
def provider(tiny_model: Path) -> LlamaCpp:
    pytest.importorskip(
        "llama_cpp",
        reason="llama-cpp-python is not installed; run scripts/install-llama-cpp-python.sh",
    )
    return LlamaCpp(tiny_model, n_ctx=N_CTX, seed=1, n_threads=1)


def _printable(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


@pytest.mark.llama_cpp_python
def test_is_a_streaming_provider_with_its_window(provider: LlamaCpp) -> None:
    assert isinstance(provider, StreamingProvider)
    assert provider.context_window == N_CTX
    assert repr(provider) == f"LlamaCpp('tiny.gguf', n_ctx={N_CTX})"


@pytest.mark.llama_cpp_python
def test_complete_stops_at_max_tokens(provider: LlamaCpp) -> None:
    response = provider.complete(Request(messages=HELLO, max_tokens=8))
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert response.usage.output_tokens == 8
    assert response.usage.input_tokens > 0
    assert response.message.text and _printable(response.message.text)


@pytest.mark.llama_cpp_python
def test_overflow_is_a_classified_provider_error(provider: LlamaCpp) -> None:
    with pytest.raises(ProviderError) as caught:
        provider.complete(Request(messages=TOO_LONG, max_tokens=8))
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError)
    assert f"exceed context window of {N_CTX}" in str(cause)
    info = caught.value.info
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.limit == N_CTX
    assert info.prompt_tokens is not None and info.prompt_tokens > N_CTX


@pytest.mark.llama_cpp_python
def test_stream_yields_deltas_then_the_whole_answer(provider: LlamaCpp) -> None:
    chunks = list(provider.stream(Request(messages=HELLO, max_tokens=8)))
    deltas, final = chunks[:-1], chunks[-1]
    assert len(deltas) > 1 and all(isinstance(d, TextDelta) for d in deltas)
    assert isinstance(final, Response)
    assert final.message.text == "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert final.stop_reason is StopReason.MAX_TOKENS
    assert (
        final.model
        == provider.model
        == provider.complete(Request(messages=HELLO, max_tokens=1)).model
    )
    assert _printable(final.message.text)


@pytest.mark.llama_cpp_python
def test_stream_overflow_raises_instead_of_ending_empty(provider: LlamaCpp) -> None:
    chunks: Iterator[object] = provider.stream(Request(messages=TOO_LONG, max_tokens=8))
    with pytest.raises(ProviderError) as caught:
        next(chunks)
    assert caught.value.info.kind is ErrorKind.CONTEXT_OVERFLOW


@pytest.mark.llama_cpp_python
async def test_async_methods_give_the_same_kinds_of_answers(provider: LlamaCpp) -> None:
    response = await provider.acomplete(Request(messages=HELLO, max_tokens=4))
    assert response.stop_reason is StopReason.MAX_TOKENS
    chunks = [c async for c in provider.astream(Request(messages=HELLO, max_tokens=4))]
    assert isinstance(chunks[-1], Response)
    assert chunks[-1].stop_reason is StopReason.MAX_TOKENS
    with pytest.raises(ProviderError):
        await provider.acomplete(Request(messages=TOO_LONG, max_tokens=4))


@pytest.mark.llama_cpp_python
def test_a_conversation_with_tool_traffic_runs(provider: LlamaCpp) -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    messages = (
        Message.system("You are terse."),
        Message.user("Read a.txt"),
        Message.assistant("Reading.", tool_calls=(call,)),
        Message.tool("c1", "hello"),
    )
    response = provider.complete(Request(messages=messages, max_tokens=4))
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert (
        response.usage.input_tokens
        > provider.complete(Request(messages=HELLO, max_tokens=1)).usage.input_tokens
    )


def _streamed(provider: LlamaCpp, request: Request) -> Response:
    final = list(provider.stream(request))[-1]
    assert isinstance(final, Response)
    return final


@pytest.mark.llama_cpp_python
def test_a_stream_counts_its_tokens_as_the_engine_does(provider: LlamaCpp) -> None:
    # llama-cpp-python reports no usage in a stream; the non-streamed call's usage is the
    # engine's own count (the tokens it evaluated and sampled), and the stream's must match.
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    messages = (
        Message.system("You are terse."),
        Message.user("Read a.txt, then say what is in it."),
        Message.assistant("Reading.", tool_calls=(call,)),
        Message.tool("c1", "hello, world: ünïcödé ✓"),
    )
    engine = provider.complete(Request(messages=messages, max_tokens=8)).usage
    streamed = _streamed(provider, Request(messages=messages, max_tokens=8))
    assert streamed.stop_reason is StopReason.MAX_TOKENS
    assert streamed.usage.input_tokens == engine.input_tokens > 0
    assert streamed.usage.output_tokens == engine.output_tokens == 8
    assert _streamed(provider, Request(messages=HELLO, max_tokens=3)).usage.output_tokens == 3


@pytest.mark.llama_cpp_python
def test_every_system_message_reaches_the_model(provider: LlamaCpp) -> None:
    # The level-3 notice is a second system message; llama-cpp-python's own ChatML formatter
    # would keep only the first (the prompt would not grow).
    one = (Message.system("Be brief."), Message.user("Say something."))
    two = (one[0], Message.system("Context was compacted."), one[1])
    counts = [provider.complete(Request(messages=m, max_tokens=1)).usage.input_tokens
              for m in (one, two)]  # fmt: skip
    assert counts[1] > counts[0]
    assert _streamed(provider, Request(messages=two, max_tokens=1)).usage.input_tokens == counts[1]


def test_tool_calls_and_results_travel_as_text() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    wire = chat_messages(
        (
            Message.assistant("Reading.", tool_calls=(call,)),
            Message.tool("c1", "hello"),
            Message.tool("c2", "no such file", is_error=True),
        )
    )
    assert wire == [
        {
            "role": "assistant",
            "content": "Reading.\n<tool_call>\n"
            '{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>',
        },
        {  # one user turn: the template may want the roles to alternate
            "role": "user",
            "content": "<tool_response>\nhello\n</tool_response>\n\n"
            "<tool_response>\nError: no such file\n</tool_response>",
        },
    ]


def test_plain_messages_keep_their_roles() -> None:
    wire = chat_messages((Message.system("s"), Message.user("u"), Message.assistant("a")))
    assert wire == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
    ]


def test_missing_llama_cpp_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(ImportError, match=r"chatcli\[local\]"):
        LlamaCpp(tmp_path / "model.gguf")
