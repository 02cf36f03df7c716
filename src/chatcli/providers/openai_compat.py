"""OpenAI-compatible servers: vLLM, llama.cpp, Ollama, LM Studio, OpenRouter, Groq, DeepSeek...

Chat Completions through the official SDK pointed at `base_url`, on the driver and body of the
OpenAI adapter (`chatcli.providers.openai`), adjusted to what these servers actually do:

- The output limit is sent as `max_tokens`: many servers ignore `max_completion_tokens`
  (llama-cpp-python does, silently).
- The key is optional: `api_key`, else the variable named by `api_key_env`. Without one a
  placeholder is sent, so the SDK never falls back to `OPENAI_API_KEY` and hands the user's
  OpenAI key to another server.
- `context_window` is the context the server runs with (Ollama: `num_ctx`; llama.cpp: `-c`),
  which may be smaller than the model's. With `discover_window` (True, or the
  `WindowDiscovery` of whoever makes the providers) and none declared, it is asked of the
  server (llama.cpp, vLLM, Ollama, LM Studio: `chatcli.providers.discovery`) when the
  provider is made, and again by `refresh_window` while the server states none (a server not
  up yet when the provider was made). `server_window` is what the server stated; with a
  window declared, `identify_server()` asks whether the server is llama.cpp, whose own
  tokenizer then counts the prompts (`chatcli.providers.counting`).
- Overflow that the server does not report as an error is detected: a prompt cut silently
  (Ollama truncates and answers 200; see `TruncationCheck`: a known `context_window` tells a
  cut prompt from a cached one best; without it, only a new turn that did not arrive counts).
  An empty event stream (no event at all: llama-cpp-python's answer to an over-long streamed
  prompt) is asked again without streaming, which gets the server's real answer or its real
  error, numbers included.
- `finish_reason: "length"` when prompt + output filled the whole window (and the output did
  not reach `max_tokens`) means the context ran out, not the output budget: the stop reason is
  `StopReason.CONTEXT_WINDOW` then.
- Settings map as for OpenAI's Chat Completions (stop, seed, response_format as
  `json_object` / `json_schema`, reasoning_effort, tool_choice, parallel_tool_calls), which
  llama.cpp, vLLM and Ollama take; a thinking budget has no common field (an error: use
  `Settings.extra` with the server's own). No `prompt_cache_key` is sent: these servers reuse
  a matching prefix by themselves. `structured_output_supported()` is True only for a server
  the window discovery identified as one that enforces a `json_schema` (llama.cpp, vLLM,
  Ollama, LM Studio: each turns the schema into a grammar); another server may ignore it.
  Being a grammar on the output, the schema leaves the prompt and its cached prefix alone
  (`structured_output_keeps_prompt()`).
- Consecutive user messages are sent as one (`merge_user_turns`): a server's chat template
  may want the roles to alternate, and a recovered view can hold two in a row.
- An assistant message that only calls tools is sent with `content: ""`, not `null`:
  llama-cpp-python (0.3.36) types assistant content as `NotRequired[str]` (llama_types.py,
  `ChatCompletionRequestAssistantMessage`), so `null` is a 422 and a missing key a 500 in its
  chat template; the empty string is valid everywhere.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chatcli.errors import (
    SILENT_TRUNCATION,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    is_window_cap,
    silent_truncation,
)
from chatcli.messages import Message, Role, StopReason, Usage, total_chars
from chatcli.providers._common import api_key_from_env, merge_user_turns
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolCallDelta
from chatcli.providers.discovery import ServerWindow, WindowDiscovery, server_url
from chatcli.providers.discovery import identify_server as identify
from chatcli.providers.openai import OpenAIBase, _sdk_errors
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["OpenAICompatible", "TruncationCheck"]

# Sent when no key is configured; most local servers accept any value or none.
_NO_KEY = "no-key"
# Servers (as `chatcli.providers.discovery` names them) that enforce a `json_schema`
# response_format with a grammar on /v1/chat/completions.
_SCHEMA_SERVERS = frozenset({"llama.cpp", "vLLM", "Ollama", "LM Studio"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncationCheck:
    """Detects an overflow the server did not report (None turns it off); the rule itself is
    `chatcli.errors.silent_truncation`, which judges a low count against the window, or, with
    none known, against the turn sent after the model's last answer (`turn_estimates`).

    The estimate counts message text only (tool schemas add to the reported count, never to
    the estimate), so it errs low: with the default estimator (4 chars per token) and ratio
    0.5, a false alarm needs text that the server's tokenizer packs at over 8 chars per token.
    Prompts under `min_estimate` tokens are never judged by ratio: chat-template overhead
    dominates them.
    """

    min_ratio: float = 0.5
    min_estimate: int = 512
    estimator: TokenEstimator = field(default_factory=TokenEstimator)

    def truncation(
        self,
        usage: Usage,
        estimate: int,
        context_window: int | None,
        *,
        new_turn: int | None = None,
        before: int = 0,
    ) -> str | None:
        """Why a prompt of `estimate` tokens, answered with `usage`, looks truncated, or None
        (`new_turn` and `before`: see `silent_truncation`, and `turn_estimates`)."""
        return silent_truncation(
            usage,
            estimate,
            context_window,
            min_ratio=self.min_ratio,
            min_estimate=self.min_estimate,
            new_turn=new_turn,
            before=before,
        )

    def turn_estimates(self, messages: Sequence[Message]) -> tuple[int, int]:
        """(before, new turn): the estimates of `messages` up to the last assistant message,
        and of the ones after it (all of them when there is none)."""
        _, before, new_turn = self.estimates(messages)
        return before, new_turn

    def estimates(self, messages: Sequence[Message]) -> tuple[int, int, int]:
        """(the whole prompt, before, new turn): `estimator.count` of `messages`, and
        `turn_estimates`. The default estimator counts characters, so their sums before and
        after the last assistant message give all three in one pass over the prompt (the check
        runs at the end of every answer)."""
        last = _last_assistant(messages)
        head, tail = messages[: last + 1], messages[last + 1 :]
        estimator = self.estimator
        if type(estimator) is not TokenEstimator:  # another count: asked of each part
            before = estimator.count(head) if last >= 0 else 0
            return estimator.count(messages), before, estimator.count(tail)
        head_chars, tail_chars = total_chars(head), total_chars(tail)
        return (
            estimator.count_chars(head_chars + tail_chars, len(messages)),
            estimator.count_chars(head_chars, len(head)) if last >= 0 else 0,
            estimator.count_chars(tail_chars, len(tail)),
        )


def _last_assistant(messages: Sequence[Message]) -> int:
    """The index of the last assistant message, -1 when there is none (looked for from the
    end: it is usually one of the last)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role is Role.ASSISTANT:
            return index
    return -1


class OpenAICompatible(OpenAIBase):
    """A server that speaks OpenAI's Chat Completions at `base_url` (e.g. .../v1)."""

    api_name = "an OpenAI-compatible server"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        api_key_env: str | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        truncation_check: TruncationCheck | None = TruncationCheck(),
        timeout: float = 600.0,
        environ: Mapping[str, str] | None = None,
        discover_window: bool | WindowDiscovery = False,
    ) -> None:
        env = os.environ if environ is None else environ
        names = (api_key_env,) if api_key_env else ()
        key = api_key_from_env(api_key, names, env, required=api_key_env is not None)
        super().__init__(
            model,
            api="chat",
            api_key=key or _NO_KEY,
            base_url=base_url,
            timeout=timeout,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
            max_tokens_param="max_tokens",
        )
        self.truncation_check = truncation_check
        self.server_window: ServerWindow | None = None
        self._discovery = _discovery(discover_window) if context_window is None else None
        self.__probe_key = key
        self.refresh_window()

    def refresh_window(self) -> None:
        """Ask the server its window when none is known and discovery is on (module docstring):
        at once the first time and when found, again once the retry time has passed."""
        if self._discovery is None or self.server_window is not None:
            return
        found = self._discovery.window(self.base_url or "", self.model, api_key=self.__probe_key)
        if found is not None:
            self.server_window = found
            self.context_window = found.tokens

    def params(self, request: Request, *, stream: bool = False) -> dict[str, Any]:
        params = super().params(request, stream=stream)
        if "messages" in params:
            messages = [_with_string_content(m) for m in params["messages"]]
            params["messages"] = merge_user_turns(messages)
        return params

    def identify_server(self) -> ServerWindow | None:
        """Which server this is, where discovery has not asked it (a declared window):
        llama.cpp's `/props` alone (`chatcli.providers.discovery.identify_server`), with this
        provider's key. I/O; a llama.cpp answer is kept as `server_window` (the declared
        window stays); never raises."""
        if self.server_window is None:
            self.server_window = identify(self.base_url or "", self.model, api_key=self.__probe_key)
        return self.server_window

    def structured_output_supported(self) -> bool:
        """Whether the server is known to enforce a `json_schema` response_format: one the
        window discovery identified (see the module docstring); no request is made here."""
        found = self.server_window
        return found is not None and found.server in _SCHEMA_SERVERS

    def structured_output_keeps_prompt(self) -> bool:
        """Whether a `json_schema` answer format leaves the prompt as it is, so a request
        that adds one still reuses the server's cached prefix: where it is enforced at all,
        it is a grammar on the output (see the module docstring)."""
        return self.structured_output_supported()

    def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST `body` to `path` at the server's root, with this provider's key and timeout;
        the decoded JSON answer. The root is `base_url` without a final `/v1`: llama.cpp's
        `/tokenize` and `/apply-template` live there. Failures raise a classified
        ProviderError, as for any call."""
        with _sdk_errors():
            url = server_url(self.base_url or "", path)
            return self._client().post(url, cast_to=object, body=dict(body))

    def _checked(self, response: Response, request: Request) -> Response:
        self._raise_if_truncated(response, self._estimates(request))
        return self._window_stop(response, request)

    def raise_if_truncated(self, response: Response, request: Request) -> None:
        """Raise the overflow a silently cut prompt is (`TruncationCheck`), judged from the
        usage `response` reports for `request`'s messages; nothing without a check."""
        self._raise_if_truncated(response, self._estimates(request))

    def _estimates(self, request: Request) -> tuple[int, int, int] | None:
        """`TruncationCheck.estimates` of the request's messages (None: no check)."""
        check = self.truncation_check
        return None if check is None else check.estimates(request.messages)

    def _raise_if_truncated(
        self, response: Response, estimates: tuple[int, int, int] | None
    ) -> None:
        check = self.truncation_check
        if estimates is None or check is None:
            return
        estimate, before, new_turn = estimates
        why = check.truncation(
            response.usage, estimate, self.context_window, new_turn=new_turn, before=before
        )
        if why is not None:
            message = f"prompt silently truncated by the server (detected from usage): {why}"
            limit = self.context_window or _stated_window(response.usage.prompt_tokens)
            raise _overflow(message, prompt_tokens=estimate, limit=limit, reason=SILENT_TRUNCATION)

    def _window_stop(self, response: Response, request: Request) -> Response:
        if response.stop_reason is not StopReason.MAX_TOKENS or self.context_window is None:
            return response
        usage = response.usage
        filled = usage.prompt_tokens + usage.output_tokens >= self.context_window
        below_limit = request.max_tokens is None or usage.output_tokens < request.max_tokens
        if filled and below_limit:
            return replace(response, stop_reason=StopReason.CONTEXT_WINDOW)
        return response

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        chunks = super().stream(request)
        try:
            first = next(chunks)
        except _EmptyStream:
            yield from _as_chunks(self._complete_after_empty_stream(request))
            return
        yield first
        yield from chunks

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        chunks = super().astream(request)
        try:
            first = await anext(chunks)
        except _EmptyStream:
            for chunk in _as_chunks(await self._acomplete_after_empty_stream(request)):
                yield chunk
            return
        yield first
        async for chunk in chunks:
            yield chunk

    # The server may close the connection after its empty answer without saying so; the next
    # request on that pooled connection then fails at once ("Server disconnected"). One more
    # try opens a new connection; anything else is the real answer or error.
    def _complete_after_empty_stream(self, request: Request) -> Response:
        try:
            return self.complete(request)
        except ProviderError as exc:
            if exc.info.kind is not ErrorKind.TRANSIENT:
                raise
        return self.complete(request)

    async def _acomplete_after_empty_stream(self, request: Request) -> Response:
        try:
            return await self.acomplete(request)
        except ProviderError as exc:
            if exc.info.kind is not ErrorKind.TRANSIENT:
                raise
        return await self.acomplete(request)

    def _unterminated(self, *, empty: bool) -> ProviderError:
        if empty:
            return _EmptyStream(super()._unterminated(empty=True).info)
        return super()._unterminated(empty=False)


class _EmptyStream(ProviderError):
    """A 200 with no event at all: it says nothing, so the request is asked again without
    streaming (llama-cpp-python's server answers an over-long streamed prompt this way, and
    the same prompt unstreamed gets its real `context_length_exceeded` error with the numbers).
    """


def _as_chunks(response: Response) -> Iterator[StreamChunk]:
    if response.message.text:
        yield TextDelta(text=response.message.text)
    for index, call in enumerate(response.message.tool_calls):
        yield ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments_json)
    yield response


def _discovery(asked: bool | WindowDiscovery) -> WindowDiscovery | None:
    """The discovery a provider asks through: the one given, its own, or none."""
    if isinstance(asked, WindowDiscovery):
        return asked
    return WindowDiscovery() if asked else None


def _with_string_content(message: dict[str, Any]) -> dict[str, Any]:
    """`message` with `content: ""` where it is `null` (see the module docstring)."""
    if message.get("role") == "assistant" and message.get("content") is None:
        return {**message, "content": ""}
    return message


def _stated_window(reported: int) -> int | None:
    """The window a silent cut states with the window unknown: the count it left, when that is
    a window cap; else none (a server that dropped a turn for another reason states none)."""
    return reported if is_window_cap(reported) else None


def _overflow(message: str, *, prompt_tokens: int, limit: int | None, reason: str) -> ProviderError:
    """An overflow chatcli detected itself: there is no provider error to classify."""
    info = ErrorInfo(
        kind=ErrorKind.CONTEXT_OVERFLOW,
        message=message,
        prompt_tokens=prompt_tokens,
        limit=limit,
        reason=reason,
    )
    return ProviderError(info)
