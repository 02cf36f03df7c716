"""Embedded llama.cpp: a local GGUF model run in this process (extra `local`).

`LlamaCpp(model_path, n_ctx=512)` needs no server, no API key and no compiler: it is what a
user with a GGUF file chats with (`chatcli --local`, `--provider llama-cpp`), and the engine
of the offline demo. The engine is llama.cpp's own server code, prebuilt in the xllamacpp
wheel and started in-process (`chatcli.providers.llama_engine`); a request is a Chat
Completions dict handed to `Server.handle_chat_completions`, and the answer is the dict
llama-server would send over HTTP. So this provider behaves as `OpenAICompatible` in front
of llama-server does:

- Overflow: the engine refuses a prompt that does not fit before generating, with
  llama-server's own body, `{"error": {"code": 400, "type": "exceed_context_size_error",
  "n_prompt_tokens": ..., "n_ctx": ...}}`, classified by `classify_error` as that body is
  when it arrives over HTTP (its numbers included). Every error the engine answers is raised
  as a classified `ProviderError`; a streamed request's overflow is raised before any text.
- The prompt is rendered by llama.cpp from the GGUF's chat template (every system message
  reaches the model: a level-3 notice is a second one). Usage is the engine's own count, in a
  stream too (`stream_options.include_usage`); cached prompt tokens are `cache_read_tokens`,
  as `OpenAICompatible` reads the same field.
- `finish_reason: "length"` when prompt + output filled the whole window before `max_tokens`
  is `StopReason.CONTEXT_WINDOW`, as for a llama.cpp server.
- Tool traffic travels as text in the Hermes/Qwen convention (most small models' templates
  have no tool support): an assistant's tool calls are appended to its text as
  `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, and a tool result becomes a user
  message `<tool_response>...</tool_response>`. Tool definitions (`Request.tools`) are not
  sent and answers are not parsed for tool calls: this provider is for chat, not for agents.
  Consecutive user messages (tool responses among them) are sent as one: a template may want
  the roles to alternate.
- Counting: `count_tokens` asks the engine's own `/apply-template` and `/tokenize`, as
  `chatcli.providers.counting.LlamaServerTokens` asks llama-server, on the private Unix
  socket the engine listens on; the count equals the `prompt_tokens` a completion reports.
- The engine queues concurrent requests itself (one slot: one at a time); the async methods
  run the blocking calls in a worker thread. A stream closed early tells the engine to stop.
- Settings: temperature, top_p, seed and stop are llama-server's fields; `response_format` is
  its `{"type": "json_object"}` (with `schema`: constrained to it); `settings.extra` adds
  fields; a JSON schema is enforced (`structured_output_supported`). Tools are not sent, so the
  tool settings have nothing to act on; a reasoning effort or thinking budget is an error.
  `Request.options` are added to the body last (they win).
- `engine_options` start the engine (`EngineOptions`: n_threads, seed, temperature, top_p,
  n_gpu_layers, stop, grammar, alias, n_parallel): sampling given there is the default of
  every request.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Generator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from chatcli.errors import ProviderError, classify_error
from chatcli.messages import Message, StopReason, ToolCall, ToolResult, Usage
from chatcli.providers._common import (
    incomplete_answer,
    merge_user_turns,
    require_module,
    unsupported,
)
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta
from chatcli.providers.llama_engine import (
    engine_options,
    start_engine,
    templated_prompt_tokens,
)
from chatcli.request_settings import Settings

__all__ = ["LlamaCpp", "chat_messages", "response_from_completion"]

Json = dict[str, Any]

# `finish_reason` values llama.cpp's server produces.
_STOP = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
}
_SOCKET = "engine.sock"
_END = object()  # the end of a stream, put on its queue by the engine's thread


class LlamaCpp:
    """A GGUF model run in-process. `engine_options` start the engine (see the module
    docstring); `context_window` is `n_ctx` as the engine runs it (rounded up to a multiple
    of 256 tokens)."""

    def __init__(
        self, model_path: str | os.PathLike[str], *, n_ctx: int = 512, **engine_options_: Any
    ):
        self._httpx = require_module("httpx", "local")
        self.model = os.fspath(model_path)  # what the engine reports as the model, too
        options = engine_options(n_ctx, engine_options_)
        # The engine's HTTP API, on a socket only this user can reach (mkdtemp: mode 0700),
        # removed with the provider.
        directory = tempfile.mkdtemp(prefix="chatcli-engine-")
        self._remove_socket = weakref.finalize(self, shutil.rmtree, directory, True)
        self._socket = str(Path(directory) / _SOCKET)
        try:
            self._engine = start_engine(self.model, replace(options, host=self._socket))
        except BaseException:
            self._remove_socket()
            raise
        # What the engine runs with: llama.cpp rounds `n_ctx` up to a multiple of 256.
        self.context_window: int | None = self._slot_context(n_ctx)
        self.max_output_tokens: int | None = None  # only the context window bounds the output

    def __repr__(self) -> str:
        return f"LlamaCpp({os.path.basename(self.model)!r}, n_ctx={self.context_window})"

    def structured_output_keeps_prompt(self) -> bool:
        """A schema (`structured_output_supported`) constrains the output only: the prompt,
        and the prefix the engine keeps evaluated from the previous call, stay as they are."""
        return True

    def structured_output_supported(self) -> bool:
        """A JSON schema as the answer's format is enforced (the engine constrains the
        answer to it)."""
        return True

    @property
    def api_address(self) -> str:
        """Where the engine's own HTTP API listens: `unix://` and a socket in a directory
        only this user can open (llama-server's routes: /props, /tokenize, /metrics, ...)."""
        address: str = self._engine.listening_address
        return address

    def close(self) -> None:
        """Stop the engine and free the model (the object is unusable afterwards)."""
        self._engine = None  # xllamacpp stops the engine when its Server is freed
        self._remove_socket()

    def complete(self, request: Request) -> Response:
        completion = self._engine.handle_chat_completions(self.params(request))
        _raise_if_error(completion)
        return self._window_stop(response_from_completion(completion), request)

    async def acomplete(self, request: Request) -> Response:
        return await asyncio.to_thread(self.complete, request)

    def stream(self, request: Request) -> Generator[StreamChunk, None, None]:
        body = {**self.params(request), "stream": True, "stream_options": {"include_usage": True}}
        chunks: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()
        worker = threading.Thread(
            target=self._run_stream, args=(body, chunks, stop), daemon=True, name="llama.cpp"
        )
        worker.start()
        parts: list[str] = []
        finish: str | None = None
        usage = Usage()
        try:
            while (chunk := chunks.get()) is not _END:
                _raise_if_error(chunk)
                usage = _usage(chunk["usage"]) if chunk.get("usage") else usage
                for choice in chunk.get("choices", ()):
                    finish = choice.get("finish_reason") or finish
                    if text := choice["delta"].get("content"):
                        parts.append(text)
                        yield TextDelta(text=text)
        finally:
            stop.set()  # the engine stops at its next token when the caller stopped early
        if finish is None:
            raise incomplete_answer("llama.cpp stream ended without a finish reason")
        response = Response(
            message=Message.assistant("".join(parts)),
            stop_reason=_stop_reason(finish),
            usage=usage,
            model=self.model,
        )
        yield self._window_stop(response, request)

    def _run_stream(self, body: Json, chunks: queue.Queue[Any], stop: threading.Event) -> None:
        """The engine's side of a stream, in its own thread: each chunk onto the queue; the
        callback's True tells the engine to stop generating."""

        def on_chunk(chunk: Json) -> bool:
            chunks.put(chunk)
            return stop.is_set()

        try:
            self._engine.handle_chat_completions(body, on_chunk)
        finally:
            chunks.put(_END)

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        chunks = self.stream(request)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                yield chunk
        finally:
            chunks.close()  # stops the engine if the caller stops early

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """The prompt tokens of `messages`, exactly as a request tokenizes them (pre-flight's
        exact count: `chatcli.providers.counting`)."""
        return templated_prompt_tokens(self.post_json, chat_messages(messages))

    def params(self, request: Request) -> Json:
        """The Chat Completions body `request` is sent as."""
        body: Json = {"messages": chat_messages(request.messages)}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return {**body, **settings_params(request.settings), **request.options}

    def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST `body` to `path` of the engine's own HTTP API (llama-server's routes:
        `/apply-template`, `/tokenize`, ...); the decoded answer. An error answer raises a
        classified ProviderError."""
        answer = self._api("POST", path, body)
        decoded = answer.json()
        if answer.is_error:
            raise ProviderError(classify_error(decoded, status=answer.status_code))
        return decoded

    def _slot_context(self, asked: int) -> int:
        """The context one request gets, as the engine states it (`GET /props`, as
        llama-server's window is discovered: `chatcli.providers.discovery`)."""
        props = self._api("GET", "/props").json()
        settings = props.get("default_generation_settings") or {}
        stated = settings.get("n_ctx")
        return stated if isinstance(stated, int) and stated > 0 else asked

    def _api(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One request to the engine's HTTP API (a connection of its own: nothing is left
        open between calls, which are rare and cost microseconds on a Unix socket)."""
        transport = self._httpx.HTTPTransport(uds=self._socket)
        with self._httpx.Client(transport=transport, base_url="http://engine") as client:
            payload = None if body is None else dict(body)
            return client.request(method, path, json=payload, timeout=60.0)

    def _window_stop(self, response: Response, request: Request) -> Response:
        """`length` with the window full before `max_tokens`: the context ran out."""
        usage, window = response.usage, self.context_window
        if response.stop_reason is not StopReason.MAX_TOKENS or window is None:
            return response
        filled = usage.prompt_tokens + usage.output_tokens >= window
        if filled and (request.max_tokens is None or usage.output_tokens < request.max_tokens):
            return replace(response, stop_reason=StopReason.CONTEXT_WINDOW)
        return response


def settings_params(settings: Settings) -> Json:
    """Chat Completions fields for `settings`; see the module docstring."""
    for name in ("reasoning_effort", "thinking_budget"):
        if settings.is_set(name):
            raise unsupported("llama.cpp (embedded)", name, "the engine has no reasoning control")
    params: Json = {
        name: getattr(settings, name)
        for name in ("temperature", "top_p", "seed")
        if settings.is_set(name)
    }
    if settings.stop is not None:
        params["stop"] = list(settings.stop)
    if settings.response_format is not None:
        schema = settings.response_format
        params["response_format"] = (
            {"type": "json_object", "schema": dict(schema)}
            if isinstance(schema, Mapping)
            else {"type": "json_object"}
        )
    return {**params, **settings.extra}


def _raise_if_error(answer: Mapping[str, Any]) -> None:
    """The engine answers a failure with llama-server's error body, not an exception."""
    error = answer.get("error")
    if isinstance(error, Mapping):
        status = error.get("code")
        raise ProviderError(
            classify_error(dict(answer), status=status if isinstance(status, int) else None)
        )


def chat_messages(messages: Sequence[Message]) -> list[Json]:
    """Neutral messages as plain role/content chat messages, tool traffic as text, and
    consecutive user messages as one (`merge_user_turns`: a GGUF's template may want the roles
    to alternate)."""
    return merge_user_turns([_chat_message(m) for m in messages])


def _chat_message(message: Message) -> Json:
    if message.tool_result is not None:
        return {"role": "user", "content": _tool_response(message.tool_result)}
    texts = [message.text, *(_tool_call(call) for call in message.tool_calls)]
    return {"role": message.role.value, "content": "\n".join(t for t in texts if t)}


def _tool_call(call: ToolCall) -> str:
    payload = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"<tool_call>\n{payload}\n</tool_call>"


def _tool_response(result: ToolResult) -> str:
    content = f"Error: {result.content}" if result.is_error else result.content
    return f"<tool_response>\n{content}\n</tool_response>"


def response_from_completion(completion: Mapping[str, Any]) -> Response:
    """A Response from a llama.cpp Chat Completions answer (a dict)."""
    choice = completion["choices"][0]
    return Response(
        message=Message.assistant(choice["message"].get("content") or ""),
        stop_reason=_stop_reason(choice.get("finish_reason")),
        usage=_usage(completion.get("usage") or {}),
        model=completion.get("model"),
    )


def _usage(usage: Mapping[str, Any]) -> Usage:
    """llama.cpp's usage; cached prompt tokens apart, as OpenAI's fields are read."""
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(
        input_tokens=max(int(usage.get("prompt_tokens") or 0) - cached, 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _stop_reason(finish_reason: str | None) -> StopReason:
    return _STOP.get(finish_reason or "", StopReason.OTHER)
