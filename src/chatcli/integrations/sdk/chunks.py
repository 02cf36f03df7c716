"""The stream a wrapped `create(..., stream=True)` returns, event by event, in the SDK's types.

The events of the caller's own call (a request that needed no recovery) are passed on as the
SDK made them, except its ending (OpenAI: the chunk with the `finish_reason` and the usage
chunk after it; Anthropic: `message_delta` and `message_stop`), which is held back until the
answer is known to be whole. What recovery adds (an answer to a recovered request, the text a
continuation adds) is written here, in the same wire shapes `chatcli.wire`'s dialects write, and
validated into the SDK's own chunk types; then the ending: the held one when nothing was
added, else one written from the final `Reply`. The stop of an Anthropic text block of the
caller's call is held too while it is the last event: a continuation goes on in that block.

Tool calls are written from the Reply only (a call cut off by the output limit is dropped by
recovery and never reaches the caller), unless the caller's own call already streamed them.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Protocol

from chatcli.recovery import Reply
from chatcli.wire.anthropic import STOP_REASONS, AnthropicDialect
from chatcli.wire.dialect import ClientRequest, Json
from chatcli.wire.openai_chat import FINISH_REASONS, OpenAIDialect

__all__ = ["AnthropicEvents", "Chunks", "OpenAIChunks"]


class Chunks(Protocol):
    """The events of one streamed answer, as wire JSON (validated into SDK types by the
    caller) or the SDK's own event objects (passed on)."""

    def passed(self, event: Any) -> list[Any]: ...

    def text(self, text: str) -> list[Any]: ...

    def ending(self, reply: Reply, *, whole: bool) -> list[Any]: ...


class OpenAIChunks:
    """Chat Completions chunks (`ChatCompletionChunk` wire JSON)."""

    def __init__(self, request: ClientRequest, model: str) -> None:
        self.request, self.model = request, model
        self.head: Json = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        self.began = False  # a chunk with the assistant role was sent
        self.passed_any = False
        self.held: list[Any] = []

    def passed(self, event: Any) -> list[Any]:
        choices = getattr(event, "choices", None) or ()
        if self.held or any(c.finish_reason for c in choices) or not choices:
            self.held.append(event)
            return []
        if not self.passed_any:
            self.head = {**self.head, "id": event.id, "created": event.created}
        self.passed_any = True
        self.began = self.began or any(c.delta.role for c in choices)
        return [event]

    def text(self, text: str) -> list[Any]:
        return [*self._begin(), self._chunk({"content": text})] if text else []

    def ending(self, reply: Reply, *, whole: bool) -> list[Any]:
        if whole:
            return self.held
        out = self._begin()
        body = OpenAIDialect().reply(self.request, reply, model=self.model)
        if not self.passed_any:
            for index, call in enumerate(body["choices"][0]["message"].get("tool_calls") or ()):
                out.append(self._chunk({"tool_calls": [{**call, "index": index}]}))
        out.append(self._chunk({}, FINISH_REASONS[reply.stop_reason]))
        if self.request.include_usage:
            out.append({**self.head, "choices": [], "usage": body["usage"]})
        return out

    def _begin(self) -> list[Json]:
        if self.began:
            return []
        self.began = True
        return [self._chunk({"role": "assistant", "content": ""})]

    def _chunk(self, delta: Json, finish: str | None = None) -> Json:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**self.head, "choices": [choice]}


class AnthropicEvents:
    """Messages stream events (`RawMessageStreamEvent` wire JSON)."""

    def __init__(self, request: ClientRequest, model: str) -> None:
        self.request, self.model = request, model
        self.started = False
        self.passed_any = False
        self.next_index = 0
        self.open_text: int | None = None
        self.text_blocks: set[int] = set()
        # The stop of the caller's call's last text block, held: a continuation goes on in it.
        self.text_stop: Any = None
        self.held: list[Any] = []

    def passed(self, event: Any) -> list[Any]:
        kind = getattr(event, "type", None)
        if self.held or kind in ("message_delta", "message_stop"):
            self.held.append(event)
            return []
        out = self._release_text_stop()
        self.passed_any = True
        self.started = self.started or kind == "message_start"
        if kind == "content_block_start":
            self.next_index = max(self.next_index, int(event.index) + 1)
            if event.content_block.type == "text":
                self.text_blocks.add(int(event.index))
        if kind == "content_block_stop" and int(event.index) in self.text_blocks:
            self.text_stop = event
            return out
        return [*out, event]

    def text(self, text: str) -> list[Any]:
        if not text:
            return []
        out = self._start()
        if self.open_text is None and self.text_stop is not None:
            self.open_text, self.text_stop = int(self.text_stop.index), None
        if self.open_text is None:
            out.append(self._block_start({"type": "text", "text": ""}))
            self.open_text = self.next_index - 1
        delta = {"type": "text_delta", "text": text}
        out.append({"type": "content_block_delta", "index": self.open_text, "delta": delta})
        return out

    def ending(self, reply: Reply, *, whole: bool) -> list[Any]:
        if whole:
            return [*self._release_text_stop(), *self.held]
        out = [*self._start(), *self._release_text_stop(), *self._close_text()]
        body = AnthropicDialect().reply(self.request, reply, model=self.model)
        if not self.passed_any:
            for block in body["content"]:
                if block["type"] == "tool_use":
                    out.extend(self._tool_use(block))
        stop = {"stop_reason": STOP_REASONS[reply.stop_reason], "stop_sequence": None}
        out.append({"type": "message_delta", "delta": stop, "usage": body["usage"]})
        out.append({"type": "message_stop"})
        return out

    def _start(self) -> list[Json]:
        if self.started:
            return []
        self.started = True
        head = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant"}
        message: Json = {
            **head,
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [{"type": "message_start", "message": message}]

    def _block_start(self, block: Json) -> Json:
        index, self.next_index = self.next_index, self.next_index + 1
        return {"type": "content_block_start", "index": index, "content_block": block}

    def _release_text_stop(self) -> list[Any]:
        stop, self.text_stop = self.text_stop, None
        return [] if stop is None else [stop]

    def _close_text(self) -> list[Json]:
        if self.open_text is None:
            return []
        index, self.open_text = self.open_text, None
        return [{"type": "content_block_stop", "index": index}]

    def _tool_use(self, block: Json) -> list[Json]:
        start = self._block_start({**block, "input": {}})
        index = start["index"]
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        return [
            start,
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
