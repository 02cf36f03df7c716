"""Exact prompt-token counts from the APIs and servers that know them, for pre-flight.

Where an exact count comes from:

- an OpenAI model (by name, whatever serves it): tiktoken, offline (`chatcli.tokens.exact`);
- `Anthropic`: `messages.count_tokens` (`Anthropic.count_tokens`), a round trip;
- `Gemini`: `models.count_tokens` (`Gemini.count_tokens`), a round trip;
- llama.cpp's `llama-server`: `/apply-template` + `/tokenize` (`LlamaServerTokens`), two
  round trips (cheap ones: no inference);
- anything else: the calibrated estimate (`TokenEstimator`).

The installed OpenAI SDK also has the Responses API's `responses.input_tokens.count`, which
would count the per-message framing exactly too; it is not used: tiktoken counts the text
exactly with no round trip, and the framing it estimates is a few tokens per message.

**Pre-flight's default: `default_estimator(provider)`.** The recovery policy predicts every
recovery level's view with a `TokenEstimator`. Where an exact count costs no more than a
local call, the default estimator counts exactly (`CountingEstimator`): tiktoken for an
OpenAI model (by name, whatever serves it), the engine's own tokenizer for `LlamaCpp`, and
`/apply-template` + `/tokenize` for a llama.cpp server (one that `chatcli.providers.discovery`
found to be llama.cpp). Everything else, Anthropic and Gemini included (their counts are
remote, rate-limited round trips), gets `MarginEstimator`: the calibrated estimate, grown by
the margin it learns from what the provider states::

    client = Client(provider, estimator=default_estimator(provider))

`calibrate_estimator(counter, history)` is the other way, for a counter with a round trip:
one count of the conversation calibrates the estimate, and the predictions scale that ratio.

**Many requests to one provider** (a proxy's upstream, each request its own `Client`):
`PreflightCounts` holds the provider's local exact counter (and its caches) for all of them.
A request whose estimate is at least `EXACT_FROM` of the window is counted exactly once,
before it is sent, tools included as the server renders them (llama.cpp's template may leave
them out), and its estimate is calibrated on that count: the pre-flight decision is the exact
count's, and recovery's further predictions (each level's view, each message a level keeps)
scale it, with no more counts (no round trip each, on llama.cpp). A request far below the
window is not counted: no tokenizer packs text `1 / EXACT_FROM` times denser than the
estimate says. An OpenAI-compatible server whose window was declared (so discovery never
asked it) is asked once, then, whether it is llama.cpp (`OpenAICompatible.identify_server`).

**Round trips.** Only the untemplated llama.cpp count (see `LlamaServerTokens`) is a sum per
message, so only it is cached per message. The other counts cover the whole prompt (a chat
template, a system prompt and role markers are not a sum of per-message counts), so
`RemoteCounter` remembers the last whole-conversation counts: it is meant for pre-flight of
large prompts, not for counting every keystroke.

**Failures never break a send.** A count that fails (network, rate limit, a server without
the endpoint, an odd answer) makes `RemoteCounter.count` return its fallback estimate and
`calibrate_estimator` return the estimator unchanged; both log a warning under "chatcli" that
says the estimate is used.

Counts cover the messages they are given. The recovery policy counts a request's tool
definitions too, as one more message of their JSON (`chatcli.policy.prediction.tool_definitions`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Generic, Protocol, TypeVar, runtime_checkable

from chatcli.errors import ProviderError
from chatcli.history.running import request_shape
from chatcli.history.scan import ScanMemos
from chatcli.messages import Message
from chatcli.policy.prediction import tool_definitions
from chatcli.providers.base import Request, ToolSpec
from chatcli.providers.llama_cpp import LlamaCpp
from chatcli.providers.llama_engine import templated_prompt_tokens
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.serialize import message_to_dict
from chatcli.tokens.estimate import MESSAGE_OVERHEAD_TOKENS, MarginEstimator, TokenEstimator
from chatcli.tokens.exact import (
    CountingEstimator,
    TiktokenCounter,
    TokenCounter,
    encoding_name_for,
    load_encoding,
)

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "EXACT_FROM",
    "CountSource",
    "LlamaServerTokens",
    "PreflightCounts",
    "RemoteCounter",
    "ServerCounted",
    "calibrate_estimator",
    "conversation_key",
    "counter_for",
    "default_estimator",
    "local_exact_counter",
    "prompt_tokens",
]

logger = logging.getLogger("chatcli")

# Counts remembered per counter: a session's recent views, not its whole history.
DEFAULT_CACHE_SIZE = 64
# The share of the window from which `PreflightCounts` counts a request exactly.
EXACT_FROM = 0.25


@runtime_checkable
class CountSource(Protocol):
    """Counts a conversation's prompt tokens exactly, with I/O; may raise.

    `Anthropic`, `Gemini` and `LlamaServerTokens` are sources; `RemoteCounter` makes one a
    `TokenCounter` that never raises.
    """

    def count_tokens(self, messages: Sequence[Message]) -> int: ...


class RemoteCounter:
    """A `TokenCounter` over a `CountSource`: remembers counts and never raises.

    The last `cache_size` conversations counted are remembered by `conversation_key`, so a
    view counted again costs no round trip. A count that fails is logged and answered by
    `fallback` (a fresh `TokenEstimator` by default); a failure is not remembered.
    """

    def __init__(
        self,
        source: CountSource,
        *,
        fallback: TokenCounter | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.source = source
        self.fallback: TokenCounter = fallback if fallback is not None else TokenEstimator()
        self._counts = _Lru[int](cache_size)

    def __repr__(self) -> str:
        return f"RemoteCounter({self.source!r})"

    def count(self, messages: Sequence[Message]) -> int:
        exact = self.exact(messages)
        return exact if exact is not None else self.fallback.count(messages)

    def exact(self, messages: Sequence[Message]) -> int | None:
        """The source's count (remembered), or None when it failed (logged)."""
        if not messages:
            return 0
        key = conversation_key(messages)
        remembered = self._counts.get(key)
        if remembered is not None:
            return remembered
        try:
            counted = self.source.count_tokens(messages)
        except Exception as exc:  # a count must never break a send: the estimate stands in
            _log_failure(self.source, exc)
            return None
        self._counts.put(key, counted)
        return counted


class LlamaServerTokens:
    """llama.cpp's `llama-server` counting with its own tokenizer and chat template.

    A `CountSource` over an `OpenAICompatible` provider pointed at the server (same key and
    timeout). The endpoints are those of llama.cpp's tools/server (README, and the routes in
    server.cpp, of the tree vendored in llama-cpp-python 0.3.36):

    - `/apply-template` renders the messages with the server's chat template, exactly as for
      a chat completion; `/tokenize` with `add_special` tokenizes that prompt as the server
      does a chat prompt (BOS where the model wants one). The count equals the
      `prompt_tokens` the server reports for the same messages.
    - A server without `/apply-template` (it answers 404; remembered in `templated`): each
      message's text is tokenized and `per_message` tokens are added for its role markers.
      That sum is additive, so each message's count is remembered by content hash: a grown
      conversation costs one call per new message.
    - `tools`, a request's tool definitions, go to `/apply-template` as a request sends
      them, so the count is what the server's template makes of them (nothing, for a
      template without tools); without the endpoint, their JSON is counted as text.

    (The same tree also serves `/v1/chat/completions/input_tokens`, which does both steps in
    one call; older servers lack it, and every server since the template endpoint has the
    two used here.)
    """

    def __init__(
        self,
        provider: OpenAICompatible,
        *,
        per_message: int = MESSAGE_OVERHEAD_TOKENS,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.provider = provider
        self.per_message = per_message
        self.templated = True  # until the server answers 404 to /apply-template
        self._text_counts = _Lru[int](cache_size)

    def __repr__(self) -> str:
        return f"LlamaServerTokens({self.provider!r})"

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
        if self.templated:
            try:
                return self._count_templated(messages, tools)
            except ProviderError as exc:
                if exc.info.status != HTTPStatus.NOT_FOUND:
                    raise
            self.templated = False
            logger.info(
                "%r has no /apply-template: counting message texts plus %d tokens each",
                self.provider,
                self.per_message,
            )
        counted = (*tool_definitions(tools), *messages)
        return sum(self._count_text(_counted_text(m)) + self.per_message for m in counted)

    def _count_templated(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        # The adapter's own wire mapping, so what is counted is what a request sends.
        params = self.provider.params(Request(messages=tuple(messages), tools=tuple(tools)))
        post = self.provider.post_json
        return templated_prompt_tokens(post, params["messages"], params.get("tools"))

    def _count_text(self, text: str) -> int:
        key = hashlib.sha256(text.encode()).hexdigest()
        remembered = self._text_counts.get(key)
        if remembered is None:
            remembered = self._tokenize(text, add_special=False)
            self._text_counts.put(key, remembered)
        return remembered

    def _tokenize(self, text: str, *, add_special: bool) -> int:
        answer = self.provider.post_json("/tokenize", {"content": text, "add_special": add_special})
        return len(answer["tokens"])


def counter_for(provider: object, *, fallback: TokenCounter | None = None) -> TokenCounter:
    """The most exact counter for `provider`, never raising.

    A provider that counts (`count_tokens`: `Anthropic`, `Gemini`, a `LlamaServerTokens`)
    gets a `RemoteCounter`; an `OpenAICompatible` server discovery found to be llama.cpp, its
    tokenizer (`local_exact_counter`); an OpenAI model name, tiktoken's offline count;
    anything else `fallback` (default: a fresh `TokenEstimator`).
    """
    if isinstance(provider, CountSource):
        return RemoteCounter(provider, fallback=fallback)
    local = local_exact_counter(provider, fallback=fallback)
    if local is not None:
        return local
    return fallback if fallback is not None else TokenEstimator()


def default_estimator(provider: object) -> TokenEstimator:
    """The estimator pre-flight should use for `provider` (see the module docstring): exact
    counts where they are local, else the calibrated estimate with a learned margin. Does no
    I/O itself (a llama.cpp server is recognised from what discovery already learned)."""
    counter = local_exact_counter(provider)
    if counter is None:
        return MarginEstimator()
    return CountingEstimator(counter=counter)


def local_exact_counter(
    provider: object, *, fallback: TokenCounter | None = None
) -> TokenCounter | None:
    """An exact counter for `provider` that needs no remote API: a llama.cpp server's own
    tokenizer, the embedded engine's, or tiktoken for an OpenAI model name; else None.

    The server and engine counts are `RemoteCounter`s: a failed count falls back to
    `fallback` (default: the estimate; logged), never breaking a send.
    """
    if isinstance(provider, LlamaCpp):
        return RemoteCounter(provider, fallback=fallback)
    model = getattr(provider, "model", None)
    if not isinstance(model, str):
        return None
    if isinstance(provider, OpenAICompatible):
        found = provider.server_window
        if found is not None and found.server == "llama.cpp":
            return RemoteCounter(LlamaServerTokens(provider), fallback=fallback)
    name = encoding_name_for(model)
    encoding = load_encoding(name) if name else None
    return TiktokenCounter(encoding=encoding) if encoding is not None else None


def prompt_tokens(
    counter: TokenCounter, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
) -> int:
    """The tokens of a prompt of `messages` that offers `tools`: their definitions counted as
    pre-flight counts them (`tool_definitions`), then the messages."""
    return counter.count((*tool_definitions(tools), *messages))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerCounted(MarginEstimator):
    """The estimate, calibrated on the upstream's counts, with the upstream's own count of a
    whole request at hand (`exact`: `source`, the request's tools included): recovery checks
    a level it would skip against it (`chatcli.policy.ladder.Ladder.counted_exactly`)."""

    source: Callable[[Sequence[Message]], int | None] = field(
        default=lambda _messages: None, compare=False, repr=False
    )

    def exact(self, messages: Sequence[Message]) -> int | None:
        return self.source(messages)


class PreflightCounts:
    """Pre-flight estimators for the requests to one provider (see the module docstring):
    from its local exact counter (`local_exact_counter`); for an OpenAI-compatible server
    discovery has not asked (its window was declared), whether it is llama.cpp is asked
    once (`identify_server`), when a request first comes near the window."""

    def __init__(self, provider: object) -> None:
        self.provider = provider
        self.counter = local_exact_counter(provider)
        self.unknown = (  # a server not asked yet which it is
            self.counter is None
            and isinstance(provider, OpenAICompatible)
            and bool(provider.base_url)
            and provider.server_window is None
        )

    def worth_counting(
        self, prompt: Sequence[Message], window: int | None, memos: ScanMemos | None = None
    ) -> bool:
        """Whether `prompt` (a request's tool definitions and messages, as the policy counts
        them) is counted exactly: near enough to a known `window` for the count to decide.
        Its estimate is the running sum the policy keeps in `memos`
        (`chatcli.history.running`): what is new since the conversation's last request."""
        if window is None or (self.counter is None and not self.unknown):
            return False
        estimate = MarginEstimator().count_shape(request_shape(prompt, memos), len(prompt))
        return estimate >= window * EXACT_FROM

    def estimator(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> TokenEstimator:
        """The estimate calibrated on the upstream's count of a request of `messages` and
        `tools` (I/O on a server's tokenizer); the estimate alone when there is no count or
        it failed (logged)."""
        if self.unknown:
            self._identify()
        prompt = (*tool_definitions(tools), *messages)  # what the policy counts
        exact = self._exact(messages, tools, prompt)
        if exact is None:
            return MarginEstimator()

        def count(view: Sequence[Message]) -> int | None:
            return self._exact(view, tools, (*tool_definitions(tools), *view))

        return ServerCounted(source=count).calibrated(prompt, exact)

    def _identify(self) -> None:
        """Ask the server which it is, once; a llama.cpp server's tokenizer counts from then."""
        if isinstance(self.provider, OpenAICompatible):
            self.provider.identify_server()
            self.counter = local_exact_counter(self.provider)
        self.unknown = False

    def _exact(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], prompt: Sequence[Message]
    ) -> int | None:
        """The upstream's count: a llama.cpp server renders the tools with its own template
        (which may leave them out); the embedded engine is sent none; tiktoken counts their
        JSON, as the policy does."""
        counter = self.counter
        source = counter.source if isinstance(counter, RemoteCounter) else None
        if isinstance(source, LlamaServerTokens):
            try:
                return source.count_tokens(messages, tools)
            except Exception as exc:  # a count must never break a send: the estimate stands in
                _log_failure(source, exc)
                return None
        if counter is None:
            return None
        return _exact_count(counter, messages if isinstance(source, LlamaCpp) else prompt)


def calibrate_estimator(
    counter: TokenCounter,
    messages: Sequence[Message],
    *,
    estimator: TokenEstimator | None = None,
) -> TokenEstimator:
    """`estimator` (default: a fresh one) calibrated on one exact count of `messages`.

    Returns the estimator unchanged when nothing exact was learned: `counter` is itself an
    estimator, or the count failed (logged).
    """
    base = estimator if estimator is not None else TokenEstimator()
    exact = _exact_count(counter, messages)
    return base if exact is None else base.calibrated(messages, exact)


def conversation_key(messages: Sequence[Message]) -> str:
    """A digest of everything in `messages` (provider data included): equal conversations,
    equal keys."""
    dumped = json.dumps([message_to_dict(m) for m in messages], sort_keys=True, default=str)
    return hashlib.sha256(dumped.encode()).hexdigest()


def _exact_count(counter: TokenCounter, messages: Sequence[Message]) -> int | None:
    if isinstance(counter, TokenEstimator):
        return None  # calibrating an estimate on itself teaches nothing
    if isinstance(counter, RemoteCounter):
        return counter.exact(messages)  # not its fallback: an estimate is no calibration
    try:
        return counter.count(messages)
    except Exception as exc:  # as in RemoteCounter: the estimate stands in
        _log_failure(counter, exc)
        return None


def _counted_text(message: Message) -> str:
    """What a message puts into the prompt besides role markers: text, tool names and
    JSON arguments (as `Message.char_count` counts them)."""
    calls = (f"{call.name}\n{call.arguments_json}" for call in message.tool_calls)
    return "\n".join(text for text in (message.text, *calls) if text)


def _log_failure(source: object, exc: Exception) -> None:
    logger.warning(
        "exact token count by %r failed, using the estimate instead: %s: %s",
        source,
        type(exc).__name__,
        exc,
    )


V = TypeVar("V")


class _Lru(Generic[V]):
    """A small least-recently-used map; a lock keeps it whole when threads share a counter."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"cache_size must be at least 1, got {size}")
        self._size = size
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
