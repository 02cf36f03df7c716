"""`chatcli.wrap(client)`: chatcli's recovery inside an existing OpenAI or Anthropic SDK app.

    client = chatcli.wrap(OpenAI())          # the one changed line

The wrapper has the client's whole API (every attribute it does not override is the
client's own); `chat.completions.create` and `responses.create` (OpenAI, `AsyncOpenAI`),
`messages.create` and the `messages.stream(...)` helper (Anthropic, `AsyncAnthropic`), whole
or `stream=True`, recover: an overflowing conversation is cut to fit (the recovery levels)
and sent again, a window known beforehand is fitted before the call, an answer cut at the
output limit is continued and returned as one answer. The answer is the SDK's own type
(`ChatCompletion`, `Response`, `Message`, their stream chunks and events). The caller's
arguments are never changed, and a request that needs no recovery is sent exactly as the bare
SDK sends it. See `chatcli.integrations.sdk.calls` for the details.

Modules: `upstream` (the adapters on the caller's SDK client), `calls` (one wrapped method),
`chunks` (the stream events recovery writes), `responses` (the Responses API's stream; the
dialect itself is `chatcli.wire.responses`), `endpoints` (the wrapped
methods). They are imported when a client is wrapped (importing chatcli loads none of them);
the SDKs come with the `openai` and `anthropic` extras.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.events import Event

if TYPE_CHECKING:
    from chatcli.integrations.sdk.calls import Options

__all__ = ["Wrapped", "wrap"]


class Wrapped:
    """An object with all of `target`'s attributes, except the ones given here."""

    def __init__(self, target: Any, **overrides: Any) -> None:
        self.__dict__.update(overrides)
        self.__dict__["_target"] = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_target"], name)

    def __repr__(self) -> str:
        return f"chatcli.wrap({self.__dict__['_target']!r})"

    # `with` and `async with` look these up on the type, never through `__getattr__`.
    def __enter__(self) -> Any:
        self.__dict__["_target"].__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.__dict__["_target"].__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self.__dict__["_target"].__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.__dict__["_target"].__aexit__(*exc)


def wrap(
    client: Any,
    *,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    config: RecoveryConfig | None = None,
    on_event: Callable[[Event], None] | None = None,
    microcompact: MicrocompactConfig | None = None,
) -> Any:
    """`client` (an `openai.OpenAI`, `openai.AsyncOpenAI`, `anthropic.Anthropic` or
    `anthropic.AsyncAnthropic`) with chatcli's recovery (see the module docstring).

    `context_window` / `max_output_tokens`: the model's limits (tokens) when the offline
    catalog does not know them (a local server, a fine-tune), for the pre-flight; otherwise
    the window is learned from the first overflow that states it and kept by the wrapper
    (`wrapped.learned_windows`, by model). `config`: the recovery settings
    (`RecoveryConfig.from_env()` reads the CHATCLI_* variables). `on_event` receives every
    recovery event as it happens; they are also logged under "chatcli". `microcompact`:
    microcompaction of old tool results in what is sent (off unless given).
    """
    from chatcli.integrations.sdk.calls import Options

    options = Options(
        config=config,
        context_window=_positive("context_window", context_window),
        max_output_tokens=_positive("max_output_tokens", max_output_tokens),
        hooks=(on_event,) if on_event is not None else (),
        microcompact=microcompact,
    )
    return _wrapped(client, options)


def _wrapped(client: Any, options: Options) -> Wrapped:
    """`client` with its create methods recovered; a copy made with `with_options` shares
    `options` (and so the windows learned)."""
    from chatcli.integrations.sdk import calls, endpoints

    kind = _kind(client)
    method = calls.AsyncRecovering if kind.startswith("async") else calls.Recovering
    if kind.endswith("openai"):
        create = method(endpoints.OPENAI_CHAT, client, client.chat.completions.create, options)
        completions = Wrapped(client.chat.completions, create=create)
        respond = method(endpoints.OPENAI_RESPONSES, client, client.responses.create, options)
        overrides: dict[str, Any] = {
            "chat": Wrapped(client.chat, completions=completions),
            "responses": Wrapped(client.responses, create=respond),
        }
    else:
        create = method(endpoints.ANTHROPIC_MESSAGES, client, client.messages.create, options)
        stream = endpoints.message_stream(create, client.messages.stream)
        overrides = {"messages": Wrapped(client.messages, create=create, stream=stream)}

    def with_options(*args: Any, **kwargs: Any) -> Wrapped:
        return _wrapped(client.with_options(*args, **kwargs), options)

    return Wrapped(
        client,
        **overrides,
        with_options=with_options,
        copy=with_options,
        learned_windows=options.learned_windows,
        unwrapped=client,
    )


_KINDS: Mapping[tuple[str, str], str] = {
    ("openai", "AsyncOpenAI"): "async openai",
    ("openai", "OpenAI"): "openai",
    ("anthropic", "AsyncAnthropic"): "async anthropic",
    ("anthropic", "Anthropic"): "anthropic",
}


def _kind(client: Any) -> str:
    """Which SDK client `client` is (a subclass, such as `AzureOpenAI`, counts)."""
    for (module_name, class_name), kind in _KINDS.items():
        module = sys.modules.get(module_name)
        cls = getattr(module, class_name, None) if module is not None else None
        if cls is not None and isinstance(client, cls):
            return kind
    raise TypeError(
        "chatcli.wrap takes an openai.OpenAI, openai.AsyncOpenAI, anthropic.Anthropic or "
        f"anthropic.AsyncAnthropic client, not {type(client).__name__}"
    )


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"chatcli.wrap: {name} must be a positive integer, got {value!r}")
    return value
