"""A scripted test provider for the chatcli command, loaded with
`--provider python:tests.cli_provider:windowed` (the registry's test-provider hook).

It is `tests.fakes.WindowedProvider` (a real window that raises a real corpus overflow error,
a real stop at max_tokens) plus streaming, so the CLI is driven exactly as with a real
adapter. Settings come from the environment, because the CLI runs in a child process:

- CHATCLI_TEST_WINDOW: the context window in tokens (default 100,000), unless the CLI
  passes one (--context-window);
- CHATCLI_TEST_DELAY: seconds per chunk of 8 chars of answer (default 0), streamed or not,
  to cancel mid-answer or mid-compaction;
- CHATCLI_TEST_CANCEL_AFTER: the user presses Ctrl-C (KeyboardInterrupt) once a streamed
  answer has sent this many chars, before the stream reports any usage (default: never).

A request containing "long" gets an answer of about 1,200 chars (300 output tokens: " part0
part1 ... part149"), so a small --max-tokens makes it stop at the limit and continue.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatcli.messages import Message
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta
from tests.fakes import WindowedProvider, latest_request_text

CHUNK_CHARS = 8
# Not periodic: a repeated phrase would look like a repeat at the seam of a continuation.
LONG_TAIL = "".join(f" part{i}" for i in range(150))


def answer_for(messages: Sequence[Message]) -> str:
    request = latest_request_text(messages)
    tail = LONG_TAIL if "long" in request else ""
    return f"Answer to: {request}{tail}"


@dataclass(kw_only=True)
class StreamingWindowed(WindowedProvider):
    model: str = "test-model"
    delay: float = 0.0
    cancel_after: int | None = None

    def complete(self, request: Request) -> Response:
        response = super().complete(request)
        time.sleep(self.delay * math.ceil(len(response.message.text) / CHUNK_CHARS))
        return response

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        response = super().complete(request)
        text = response.message.text
        for start in range(0, len(text), CHUNK_CHARS):
            if self.cancel_after is not None and start >= self.cancel_after:
                raise KeyboardInterrupt
            time.sleep(self.delay)
            yield TextDelta(text=text[start : start + CHUNK_CHARS])
        yield response


def windowed(
    *, model: str | None, base_url: str | None, environ: Mapping[str, str], **opts: Any
) -> StreamingWindowed:
    window = opts.get("context_window") or int(environ.get("CHATCLI_TEST_WINDOW", "100000"))
    cancel = environ.get("CHATCLI_TEST_CANCEL_AFTER")
    return StreamingWindowed(
        window=window,
        delay=float(environ.get("CHATCLI_TEST_DELAY", "0")),
        cancel_after=int(cancel) if cancel else None,
        model=model or "test-model",
        answer=answer_for,
    )
