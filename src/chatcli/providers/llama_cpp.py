"""Embedded llama.cpp: a local GGUF model run in-process by llama-cpp-python (extra `local`).

`LlamaCpp(model_path, n_ctx=512)` needs no server and no API key: it is what a user with a GGUF
file chats with, and the engine of the offline demo. Its answers come from
`llama_cpp.Llama.create_chat_completion`, which returns OpenAI Chat Completions shaped dicts.

Mapping notes:

- The prompt is formatted by the model's own chat template (from the GGUF), rendered by
  llama-cpp-python's `Jinja2ChatFormatter` with the arguments the library itself gives it for
  a GGUF template. `LlamaCpp` installs that handler itself rather than let the library pick:
  for a few templates it knows (ChatML among them) the library would use a hand-written
  formatter instead, and that one keeps only the first system message (a level-3 notice or a
  second instruction would vanish). Holding the formatter also lets a stream count its prompt
  (see Usage). A `chat_format` or `chat_handler` given in `llama_options` wins.
- Templates differ in tool support, and plain ChatML (the tiny test model's) has none, so tool
  traffic travels as text in the Hermes/Qwen convention: an assistant's tool calls are
  appended to its text as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, and a
  tool result becomes a user message `<tool_response>...</tool_response>`. Tool definitions
  (`Request.tools`) are not sent and answers are not parsed for tool calls: this provider is
  for chat, not for agents. Consecutive user messages (tool responses among them) are sent
  as one: a template may want the roles to alternate.
- Overflow: llama-cpp-python refuses a prompt that does not fit before generating, with
  `ValueError("Requested tokens (630) exceed context window of 256")`; like every failure of
  the library it is raised as a classified `ProviderError`, chained to the original.
- Usage: llama-cpp-python reports none in a stream, so a streamed `Response` counts its own
  with the engine's tokenizer: the prompt exactly as the chat handler tokenizes it (the same
  formatter, the same `Llama.tokenize` call), the answer by tokenizing its text (the tokens
  sampled can, rarely, tokenize differently: a token or so). With a `chat_format` or
  `chat_handler` of the caller's, the prompt cannot be rebuilt, and its count is 0 as before.
- One `Llama` context serves one call at a time: calls are serialised by a lock, and the async
  methods run the blocking library calls in a worker thread.
- Settings: temperature, top_p, seed and stop are the engine's own arguments; response_format
  is llama-cpp-python's `{"type": "json_object"}` (with `schema`: a grammar built from it);
  `settings.extra` adds arguments. Tools are not sent, so the tool settings have nothing to
  act on; a reasoning effort or thinking budget is an error.
- `Request.options` are passed to `create_chat_completion` as they are, last (they win).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from chatcli.errors import ProviderError, classify_error
from chatcli.messages import Message, StopReason, ToolCall, ToolResult, Usage
from chatcli.providers._common import (
    merge_user_turns,
    raise_classified,
    require_module,
    unsupported,
)
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta
from chatcli.request_settings import Settings

__all__ = ["LlamaCpp", "chat_messages", "response_from_completion"]

Json = dict[str, Any]

# `finish_reason` values llama-cpp-python produces (llama_cpp/llama_types.py).
_STOP = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
}


class LlamaCpp:
    """A GGUF model run in-process. `llama_options` go to `llama_cpp.Llama` (n_threads, seed,
    n_gpu_layers, chat_format, ...); `context_window` is `n_ctx`."""

    def __init__(
        self, model_path: str | os.PathLike[str], *, n_ctx: int = 512, **llama_options: Any
    ):
        llama_cpp = require_module("llama_cpp", "local")
        options = {"verbose": False, **llama_options}
        self.model = os.fspath(model_path)  # what llama-cpp-python reports as the model, too
        self._llama = llama_cpp.Llama(model_path=self.model, n_ctx=n_ctx, **options)
        chosen = "chat_format" in options or "chat_handler" in options
        self._formatter = None if chosen else _gguf_formatter(self._llama)
        if self._formatter is not None:
            self._llama.chat_handler = self._formatter.to_chat_handler()
        self._lock = threading.Lock()
        self.context_window: int | None = n_ctx
        self.max_output_tokens: int | None = None  # only the context window bounds the output

    def __repr__(self) -> str:
        return f"LlamaCpp({os.path.basename(self.model)!r}, n_ctx={self.context_window})"

    def structured_output_keeps_prompt(self) -> bool:
        """A schema (`structured_output_supported`) constrains the output only: the prompt,
        and the prefix the engine keeps evaluated from the previous call, stay as they are."""
        return True

    def structured_output_supported(self) -> bool:
        """A JSON schema as the answer's format is enforced (llama-cpp-python turns it into a
        grammar)."""
        return True

    def complete(self, request: Request) -> Response:
        with self._lock, _classified_errors():
            completion = self._llama.create_chat_completion(**self._params(request))
        return response_from_completion(completion)

    async def acomplete(self, request: Request) -> Response:
        return await asyncio.to_thread(self.complete, request)

    def stream(self, request: Request) -> Generator[StreamChunk, None, None]:
        parts: list[str] = []
        finish: str | None = None
        params = self._params(request)
        with self._lock, _classified_errors():
            prompt_tokens = self._count_prompt(params["messages"])
            # The library checks the prompt size lazily: overflow raises on the first chunk.
            for chunk in self._llama.create_chat_completion(**params, stream=True):
                choice = chunk["choices"][0]
                finish = choice.get("finish_reason") or finish
                if text := choice["delta"].get("content"):
                    parts.append(text)
                    yield TextDelta(text=text)
            text = "".join(parts)
            usage = Usage(input_tokens=prompt_tokens, output_tokens=self._count_text(text))
        if finish is None:
            raise ProviderError(classify_error("llama.cpp stream ended without a finish reason"))
        message = Message.assistant(text)
        yield Response(
            message=message, stop_reason=_stop_reason(finish), usage=usage, model=self.model
        )

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        chunks = self.stream(request)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                yield chunk
        finally:
            chunks.close()  # releases the lock if the caller stops early

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """The prompt tokens of `messages`, exactly as a request tokenizes them (pre-flight's
        exact count: `chatcli.providers.counting`). Raises when the caller chose the chat
        format: the prompt cannot be rebuilt then."""
        if self._formatter is None:
            raise ValueError(f"{self!r} cannot count prompts made by the caller's chat format")
        with self._lock:
            return self._count_prompt(chat_messages(messages))

    def _count_prompt(self, messages: list[Json]) -> int:
        """The prompt's tokens as the chat handler makes them (llama_chat_format's
        `chat_formatter_to_chat_completion_handler`): 0 when the formatter is the caller's."""
        if self._formatter is None:
            return 0
        formatted = self._formatter(messages=messages)
        encoded = formatted.prompt.encode("utf-8")
        return len(self._llama.tokenize(encoded, add_bos=not formatted.added_special, special=True))

    def _count_text(self, text: str) -> int:
        """Tokens of generated text (no BOS; special-token text counts as plain text, as the
        answer's text was produced without special tokens)."""
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False)) if text else 0

    def _params(self, request: Request) -> Json:
        params: Json = {"messages": chat_messages(request.messages)}
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return {**params, **settings_params(request.settings), **request.options}


def settings_params(settings: Settings) -> Json:
    """`create_chat_completion` arguments for `settings`; see the module docstring."""
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


def _gguf_formatter(llama: Any) -> Any:
    """The formatter of the GGUF's own chat template, built with the arguments
    `llama_cpp.Llama.__init__` gives it (eos/bos token text, eos as the stop token); None
    when the file has no template (the library then falls back to a format of its own)."""
    template = llama.metadata.get("tokenizer.chat_template")
    if template is None:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos, bos = llama.token_eos(), llama.token_bos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=_token_text(llama, eos),
        bos_token=_token_text(llama, bos),
        stop_token_ids=[eos],
    )


def _token_text(llama: Any, token: int) -> str:
    if token == -1:  # the model has no such token
        return ""
    return bytes(llama.detokenize([token], special=True)).decode("utf-8", errors="replace")


@contextmanager
def _classified_errors() -> Iterator[None]:
    """llama-cpp-python signals failures (overflow included) with ValueError/RuntimeError."""
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        raise_classified(exc)


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
    """A Response from a llama-cpp-python chat completion dict."""
    choice = completion["choices"][0]
    usage = completion.get("usage") or {}
    return Response(
        message=Message.assistant(choice["message"].get("content") or ""),
        stop_reason=_stop_reason(choice.get("finish_reason")),
        usage=Usage(
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
        ),
        model=completion.get("model"),
    )


def _stop_reason(finish_reason: str | None) -> StopReason:
    return _STOP.get(finish_reason or "", StopReason.OTHER)
