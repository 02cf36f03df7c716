"""The embedded LlamaCpp provider: the tiny model run in-process by llama.cpp, prebuilt in the
xllamacpp wheel (`chatcli.providers.llama_engine`), and what the engine module decides before
it loads anything (platform, CPU, options, the model file).

Tests that run the engine are skipped where xllamacpp is not installed (`pip install
'chatcli-recovery[local]'`); the mapping and the checks always run.
"""

from __future__ import annotations

import stat
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from chatcli.errors import ConfigError, ErrorKind, ProviderError
from chatcli.messages import Message, StopReason, ToolCall
from chatcli.providers.base import Request, Response, StreamingProvider, TextDelta
from chatcli.providers.llama_cpp import LlamaCpp, chat_messages
from chatcli.providers.llama_engine import (
    REQUIRED_CPU_FLAGS,
    XLLAMACPP_VERSION,
    EngineUnavailable,
    engine_problem,
    missing_cpu_flags,
    require_engine,
    served_platform,
)

pytest_plugins = ("tests.servers",)

ROOT = Path(__file__).resolve().parent.parent
N_CTX = 256
HELLO = (Message.user("Say something."),)
# About 700 prompt tokens with the tiny model's tokenizer: well past the window.
TOO_LONG = (Message.user("The context window fills up. " * 36),)


@pytest.fixture(scope="module")
def provider(tiny_model: Path) -> Iterator[LlamaCpp]:
    pytest.importorskip(
        "xllamacpp", reason="xllamacpp is not installed: pip install 'chatcli-recovery[local]'"
    )
    engine = LlamaCpp(tiny_model, n_ctx=N_CTX, seed=1, n_threads=1)
    yield engine
    engine.close()


def _printable(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


@pytest.mark.llama_server
def test_is_a_streaming_provider_with_its_window(provider: LlamaCpp) -> None:
    assert isinstance(provider, StreamingProvider)
    assert provider.context_window == N_CTX
    assert repr(provider) == f"LlamaCpp('tiny.gguf', n_ctx={N_CTX})"


@pytest.mark.llama_server
def test_the_window_is_the_one_the_engine_runs(tiny_model: Path) -> None:
    pytest.importorskip("xllamacpp")
    engine = LlamaCpp(tiny_model, n_ctx=300, n_threads=1)  # llama.cpp pads it to 256s
    try:
        assert engine.context_window == 512
        with pytest.raises(ProviderError) as caught:
            engine.complete(Request(messages=(Message.user("fills up " * 200),), max_tokens=4))
        assert caught.value.info.limit == 512
    finally:
        engine.close()


@pytest.mark.llama_server
def test_complete_stops_at_max_tokens(provider: LlamaCpp) -> None:
    response = provider.complete(Request(messages=HELLO, max_tokens=8))
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert response.usage.output_tokens == 8
    assert response.usage.prompt_tokens > 0
    assert response.message.text and _printable(response.message.text)
    assert response.model == provider.model


@pytest.mark.llama_server
def test_an_answer_that_fills_the_window_is_a_window_stop(provider: LlamaCpp) -> None:
    # No max_tokens: the tiny model never stops, so it writes until the window is full.
    response = provider.complete(Request(messages=HELLO))
    assert response.usage.prompt_tokens + response.usage.output_tokens == N_CTX
    assert response.stop_reason is StopReason.CONTEXT_WINDOW


@pytest.mark.llama_server
def test_overflow_is_llama_servers_error_classified(provider: LlamaCpp) -> None:
    with pytest.raises(ProviderError) as caught:
        provider.complete(Request(messages=TOO_LONG, max_tokens=8))
    info = caught.value.info
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.code == "exceed_context_size_error" and info.status == 400
    assert info.limit == N_CTX
    assert info.prompt_tokens == provider.count_tokens(TOO_LONG) > N_CTX


@pytest.mark.llama_server
def test_stream_yields_deltas_then_the_whole_answer(provider: LlamaCpp) -> None:
    chunks = list(provider.stream(Request(messages=HELLO, max_tokens=8)))
    deltas, final = chunks[:-1], chunks[-1]
    assert len(deltas) > 1 and all(isinstance(d, TextDelta) for d in deltas)
    assert isinstance(final, Response)
    assert final.message.text == "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert final.stop_reason is StopReason.MAX_TOKENS
    assert final.model == provider.model
    assert _printable(final.message.text)


@pytest.mark.llama_server
def test_stream_overflow_raises_before_any_text(provider: LlamaCpp) -> None:
    chunks: Iterator[object] = provider.stream(Request(messages=TOO_LONG, max_tokens=8))
    with pytest.raises(ProviderError) as caught:
        next(chunks)
    assert caught.value.info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert caught.value.info.limit == N_CTX


@pytest.mark.llama_server
def test_a_stream_closed_early_leaves_the_engine_free(provider: LlamaCpp) -> None:
    chunks = provider.stream(Request(messages=HELLO, max_tokens=200))
    assert isinstance(next(chunks), TextDelta)
    chunks.close()  # the engine stops at its next token
    after = provider.complete(Request(messages=HELLO, max_tokens=2))
    assert after.usage.output_tokens == 2


@pytest.mark.llama_server
async def test_async_methods_give_the_same_kinds_of_answers(provider: LlamaCpp) -> None:
    response = await provider.acomplete(Request(messages=HELLO, max_tokens=4))
    assert response.stop_reason is StopReason.MAX_TOKENS
    chunks = [c async for c in provider.astream(Request(messages=HELLO, max_tokens=4))]
    assert isinstance(chunks[-1], Response)
    assert chunks[-1].stop_reason is StopReason.MAX_TOKENS
    with pytest.raises(ProviderError):
        await provider.acomplete(Request(messages=TOO_LONG, max_tokens=4))


@pytest.mark.llama_server
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
    assert response.usage.prompt_tokens > provider.count_tokens(HELLO)


def _streamed(provider: LlamaCpp, request: Request) -> Response:
    final = list(provider.stream(request))[-1]
    assert isinstance(final, Response)
    return final


@pytest.mark.llama_server
def test_counts_and_usage_are_the_engines_own_streamed_or_not(provider: LlamaCpp) -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"})
    messages = (
        Message.system("You are terse."),
        Message.user("Read a.txt, then say what is in it."),
        Message.assistant("Reading.", tool_calls=(call,)),
        Message.tool("c1", "hello, world: ünïcödé ✓"),
    )
    whole = provider.complete(Request(messages=messages, max_tokens=8)).usage
    streamed = _streamed(provider, Request(messages=messages, max_tokens=8))
    assert streamed.stop_reason is StopReason.MAX_TOKENS
    # The second request reuses the first's prompt: cached tokens are counted apart.
    assert streamed.usage.cache_read_tokens > 0
    assert streamed.usage.prompt_tokens == whole.prompt_tokens == provider.count_tokens(messages)
    assert streamed.usage.output_tokens == whole.output_tokens == 8


@pytest.mark.llama_server
def test_every_system_message_reaches_the_model(provider: LlamaCpp) -> None:
    # The level-3 notice is a second system message: the prompt grows by it.
    one = (Message.system("Be brief."), Message.user("Say something."))
    two = (one[0], Message.system("Context was compacted."), one[1])
    assert provider.count_tokens(two) > provider.count_tokens(one)
    assert _streamed(provider, Request(messages=two, max_tokens=1)).usage.prompt_tokens == (
        provider.count_tokens(two)
    )


@pytest.mark.llama_server
def test_the_engines_api_is_on_a_private_socket_not_a_port(provider: LlamaCpp) -> None:
    address = provider.api_address
    assert address.startswith("unix://")
    directory = Path(address.removeprefix("unix://")).parent
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert provider.post_json("/tokenize", {"content": "hello"})["tokens"]


def test_unknown_engine_options_are_named(tiny_model: Path) -> None:
    pytest.importorskip("httpx")
    with pytest.raises(TypeError, match=r"unknown engine option\(s\) \['n_batch'\]"):
        LlamaCpp(tiny_model, n_batch=8)


def test_a_file_that_is_not_gguf_is_refused_before_loading(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    with pytest.raises(ConfigError, match="is not a GGUF model file"):
        LlamaCpp(text)
    with pytest.raises(ConfigError, match="no model file at"):
        LlamaCpp(tmp_path / "missing.gguf")


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


# --- where the prebuilt engine cannot run -------------------------------------------------


def test_missing_xllamacpp_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # makes `import xllamacpp` fail
    with pytest.raises(ImportError, match=r"pip install 'chatcli-recovery\[local\]'"):
        LlamaCpp(tmp_path / "model.gguf")


# /proc/cpuinfo's `flags` lines: a Haswell-class CPU (this wheel's floor) and a Sandy Bridge
# one (AVX, no AVX2, FMA, BMI2), in the kernel's own spelling (x86/kernel/cpu/capflags).
HASWELL = "processor\t: 0\nflags\t\t: fpu sse sse2 pni ssse3 fma sse4_2 avx f16c avx2 bmi2\n"
SANDY_BRIDGE = "processor\t: 0\nflags\t\t: fpu sse sse2 pni ssse3 sse4_2 avx\n"


def test_the_cpu_check_names_the_missing_instruction_sets() -> None:
    assert missing_cpu_flags(HASWELL) == ()
    assert missing_cpu_flags(SANDY_BRIDGE) == ("avx2", "fma", "f16c", "bmi2")
    assert missing_cpu_flags("no flags here") == ()


def test_an_old_cpu_is_told_the_ways_out_before_the_library_loads(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SANDY_BRIDGE)
    problem = engine_problem("linux", "x86_64", cpuinfo)
    assert problem is not None and "lacks AVX2, FMA, F16C, BMI2" in problem
    cpuinfo.write_text(HASWELL)
    assert engine_problem("linux", "x86_64", cpuinfo) is None


def test_an_unserved_platform_is_told_the_ways_out(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "no prebuilt wheel for linux aarch64" in (engine_problem("linux", "aarch64") or "")
    monkeypatch.setattr("chatcli.providers.llama_engine.engine_problem", lambda: "no wheel.")
    with pytest.raises(EngineUnavailable) as caught:
        require_engine()
    message = str(caught.value)
    assert "--provider openai-compatible" in message
    assert f"pip install --no-binary xllamacpp xllamacpp=={XLLAMACPP_VERSION}" in message


@pytest.mark.parametrize(
    ("system", "machine"),
    [
        ("linux", "x86_64"),
        ("linux", "aarch64"),
        ("win32", "AMD64"),
        ("win32", "ARM64"),
        ("darwin", "arm64"),
        ("darwin", "x86_64"),
        ("freebsd14", "amd64"),
    ],
)
def test_the_served_platforms_are_the_local_extras_marker(system: str, machine: str) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (engine,) = [
        Requirement(line)
        for line in extras["optional-dependencies"]["local"]
        if line.startswith("xllamacpp")
    ]
    assert str(engine.specifier) == f"=={XLLAMACPP_VERSION}"
    marker: Marker | None = engine.marker
    assert marker is not None
    environment = {"sys_platform": system, "platform_machine": machine}
    assert marker.evaluate(environment) is served_platform(system, machine)


@pytest.mark.llama_server
def test_the_wheels_instruction_sets_are_the_ones_checked() -> None:
    xllamacpp = pytest.importorskip("xllamacpp")
    built = {
        name.strip().lower()
        for name, _, on in (part.partition("=") for part in xllamacpp.get_system_info().split("|"))
        if on.strip() == "1"
    }
    x86 = {"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx_vnni", "amx_int8"}
    assert built & x86 == set(REQUIRED_CPU_FLAGS)
