"""LiteLLM's exceptions, classified by chatcli, and `chatcli.integrations.litellm`'s errors.

The exceptions are real: `litellm.completion` is driven against the local replay server,
which answers with the recorded provider bodies of tests/data/provider-errors.json. Each
record goes through the litellm route that speaks its provider's wire (`anthropic/`,
`gemini/`; every other record through `openai/`, litellm's OpenAI-compatible route), and what
litellm raises must be classified as the body itself is: the same kind, the same numbers.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: no download at import

import litellm

from chatcli.errors import ChatcliError, ContextRecoveryError, ErrorKind, classify_error
from chatcli.integrations.litellm import completion
from tests.recorded import replayed_error
from tests.replay import ReplayServer, replay_server

# litellm's own modules warn as they load (its pydantic TypedDicts): not chatcli's code.
LITELLM_WARNINGS = [
    pytest.mark.filterwarnings(
        "ignore:Items? .+ using the `ReadOnly` qualifier:UserWarning:pydantic"
    ),
    # litellm's stream handler reads a pydantic attribute the deprecated way.
    pytest.mark.filterwarnings(
        "ignore:Accessing the '[a-z_]+' attribute on the instance is deprecated:DeprecationWarning"
    ),
]
pytestmark = [*LITELLM_WARNINGS, pytest.mark.usefixtures("thread_loop")]


@pytest.fixture
def thread_loop() -> Iterator[None]:
    """An event loop for the thread, closed after the test. litellm's sync `completion` asks
    for the thread's loop (`asyncio.get_event_loop()`, to run its logging hooks), which makes
    one and leaves it open; unclosed, it is a ResourceWarning wherever it is collected."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


litellm.suppress_debug_info = True

RECORDS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "provider-errors.json").read_text()
)
# The records that are errors (a status >= 400), by the kind chatcli gives them.
ERROR_KINDS = {
    "context_overflow": ErrorKind.CONTEXT_OVERFLOW,
    "output_cap_error": ErrorKind.OUTPUT_CAP,
    "not_overflow": None,  # look-alikes: whatever the body says, never overflow
}
NUMBERS = ("prompt_tokens", "limit", "max_tokens", "output_limit", "requested_tokens")
USER = [{"role": "user", "content": "hi"}]


def route(record: dict[str, Any], url: str) -> dict[str, Any]:
    """litellm's arguments for the route that speaks the record's provider's wire."""
    provider = record["provider"]
    if provider == "anthropic":
        return {"model": "anthropic/claude-sonnet-4-5", "api_base": url}
    if provider in ("google-gemini", "google-gemini-code-assist"):
        return {"model": "gemini/gemini-2.5-flash", "api_base": url}
    return {"model": "openai/m", "api_base": f"{url}/v1"}


def routed_records() -> list[Any]:
    return [
        pytest.param(r, id=f"{r['id']}-{r['provider']}")
        for r in RECORDS
        if r["kind"] in ERROR_KINDS and (r["http_status"] or 0) >= 400
    ]


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    with replay_server() as replay:
        yield replay


def raised(call: Callable[[], Any]) -> Exception:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


@pytest.mark.parametrize("record", routed_records())
def test_litellm_exceptions_are_classified_like_the_body(
    server: ReplayServer, record: dict[str, Any]
) -> None:
    server.add(replayed_error(record))
    args = route(record, server.url)
    error = raised(
        lambda: litellm.completion(messages=USER, max_tokens=8, api_key="k", num_retries=0, **args)
    )
    assert type(error).__module__ == "litellm.exceptions", type(error)
    got, body = classify_error(error), classify_error(record["body"], status=record["http_status"])
    assert got.kind is body.kind, (type(error).__name__, got, body)
    assert {n: getattr(got, n) for n in NUMBERS} == {n: getattr(body, n) for n in NUMBERS}
    expected = ERROR_KINDS[record["kind"]]
    if expected is None:
        assert not got.is_overflow
    else:
        assert got.kind is expected


def test_the_table_covers_every_route() -> None:
    routes = {route(r.values[0], "u")["model"].split("/")[0] for r in routed_records()}
    assert routes == {"openai", "anthropic", "gemini"}
    assert len(routed_records()) == 87  # every error record of the corpus


def error_from_port(port: int, **more: Any) -> Exception:
    """What litellm raises calling a local port, without retries."""
    return raised(
        lambda: litellm.completion(
            model="openai/m",
            messages=USER,
            api_base=f"http://127.0.0.1:{port}/v1",
            api_key="k",
            num_retries=0,
            max_retries=0,
            **more,
        )
    )


def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the call: nobody listens
    error = error_from_port(port)
    # litellm raises it as an InternalServerError ("Connection error.") on this route.
    assert type(error).__module__ == "litellm.exceptions", type(error)
    assert classify_error(error).kind is ErrorKind.TRANSIENT


def test_a_timeout_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)  # accepts (in the backlog) and never answers
        error = error_from_port(sock.getsockname()[1], timeout=0.5)
    assert isinstance(error, litellm.Timeout)
    assert classify_error(error).kind is ErrorKind.TRANSIENT


# OpenAI's 401 body, as the API sends it (the corpus has no 401: it records look-alikes of
# overflow, and an authentication error is none).
OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided: sk-abc***. You can find your API key at"
        " https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


def test_an_authentication_error_is_auth(server: ReplayServer) -> None:
    server.add(replayed_error({"http_status": 401, "body": json.dumps(OPENAI_401)}))
    error = raised(
        lambda: litellm.completion(
            model="openai/m", messages=USER, api_base=f"{server.url}/v1", api_key="k"
        )
    )
    assert isinstance(error, litellm.AuthenticationError)
    assert classify_error(error).kind is ErrorKind.AUTH


# -- the helper's errors ----------------------------------------------------------------------


def record_of(kind: str, status: int) -> dict[str, Any]:
    return next(r for r in RECORDS if r["kind"] == kind and r["http_status"] == status)


def openai_overflow() -> dict[str, Any]:
    return next(
        r
        for r in RECORDS
        if r["kind"] == "context_overflow" and r["provider"] == "openai" and r["http_status"]
    )


def test_an_error_it_does_not_recover_is_litellms_own(server: ReplayServer) -> None:
    """A rate limit reaches the caller as the exception litellm raised (not chatcli's), so
    `except litellm.RateLimitError` keeps working; litellm's own context chain is kept."""
    server.add(replayed_error(record_of("not_overflow", 429)))
    error = raised(
        lambda: completion(
            "openai/m", USER, api_base=f"{server.url}/v1", api_key="k", num_retries=0
        )
    )
    assert isinstance(error, litellm.RateLimitError)
    # The error litellm translated (its chain as litellm gave it), not chatcli's wrapper.
    assert error.__context__ is not None
    assert not isinstance(error.__context__, ChatcliError), repr(error.__context__)


def test_a_streams_error_it_does_not_recover_is_litellms_own(server: ReplayServer) -> None:
    server.add(replayed_error(record_of("not_overflow", 429)))
    stream = completion(
        "openai/m", USER, api_base=f"{server.url}/v1", api_key="k", num_retries=0, stream=True
    )
    with stream:
        error = raised(lambda: next(stream))
    assert isinstance(error, litellm.RateLimitError)
    assert error.__context__ is not None
    assert not isinstance(error.__context__, ChatcliError), repr(error.__context__)


def test_a_conversation_that_cannot_fit_raises_context_recovery_error(
    server: ReplayServer,
) -> None:
    overflow = openai_overflow()
    server.queue.clear()
    server.add(*[replayed_error(overflow)] * 8)
    history = [{"role": "user", "content": f"question {i}"} for i in range(3)]
    error = raised(
        lambda: completion(
            "openai/m", history, api_base=f"{server.url}/v1", api_key="k", num_retries=0
        )
    )
    server.queue.clear()
    assert isinstance(error, ContextRecoveryError)
    assert isinstance(error.__cause__, litellm.BadRequestError)  # litellm's, chained
    assert error.info.is_overflow
    assert history == [{"role": "user", "content": f"question {i}"} for i in range(3)]


def test_the_recovery_settings_come_from_the_environment(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATCLI_MAX_RECOVERY_ATTEMPTS", "0")
    overflow = openai_overflow()
    server.queue.clear()
    server.add(*[replayed_error(overflow)] * 4)
    sent = len(server.requests)
    error = raised(lambda: completion("openai/m", USER, api_base=f"{server.url}/v1", api_key="k"))
    server.queue.clear()
    assert isinstance(error, ContextRecoveryError)
    assert error.attempts == ()  # recovery is off: no level was tried
    assert len(server.requests) == sent + 1


def test_importing_the_integration_does_not_import_litellm() -> None:
    code = (
        "import sys, chatcli.errors, chatcli.integrations.litellm;"
        " assert 'litellm' not in sys.modules, 'litellm imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_aiohttp_transport_errors_are_transient() -> None:
    """litellm's async transport (and google-genai's, with aiohttp installed) is aiohttp: a
    refused connection, a dropped one and a body cut mid-stream are worth a retry."""
    import aiohttp

    cut = aiohttp.ClientPayloadError(
        "Response payload is not completed: <TransferEncodingError: 400, message='Not enough"
        " data to satisfy transfer length header.'>"
    )
    for error in (cut, aiohttp.ServerDisconnectedError(), aiohttp.ClientConnectionError()):
        assert classify_error(error).kind is ErrorKind.TRANSIENT, error


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(r, id=r["id"])
        for r in RECORDS
        if r["kind"] in ("not_overflow", "output_cap_error")
        # The body says what it is (not only the HTTP family: pe-168's generic
        # "invalid_request_error" says less than litellm's class name would).
        and classify_error(r["body"], status=r["http_status"]).reason != "code:invalid"
    ],
)
def test_litellms_context_window_guess_does_not_decide(record: dict[str, Any]) -> None:
    """litellm names its exception ContextWindowExceededError from substrings of the message;
    a look-alike (rate limit, quota, byte cap, output cap) wrapped so is classified by what
    the provider said, as its body is."""
    error = litellm.ContextWindowExceededError(
        message=record["body"], model="m", llm_provider="openai"
    )
    body = classify_error(record["body"], status=record["http_status"])
    assert classify_error(error).kind is body.kind
    assert not body.is_overflow


def test_litellms_context_window_class_alone_is_overflow() -> None:
    error = litellm.ContextWindowExceededError(
        message="the request failed", model="m", llm_provider="openai"
    )
    assert classify_error(error).kind is ErrorKind.CONTEXT_OVERFLOW
