"""The context window a local server runs with, asked of the server before any overflow.

A local OpenAI-compatible server knows its window, but Chat Completions never says it: without
it, pre-flight cannot predict anything and the first overflow costs a rejected call. Four
servers state it elsewhere, each in its own place:

- llama.cpp's `llama-server`: `GET /props?model=...`, `default_generation_settings.n_ctx`
  (the context of one slot: `-c` divided by `--parallel`, which is what one request gets;
  server-context.cpp, `get_res_props`, in the tree vendored by llama-cpp-python 0.3.36), or
  a top-level `n_ctx` (older servers). A server in router mode (many models) answers for the
  model named in `?model=` and states 0 for itself; a single-model server ignores the query;
- vLLM: `GET /v1/models`, the model's `max_model_len`;
- Ollama: `POST /api/show`, a `num_ctx` among the model's `parameters` (what it runs with when
  the Modelfile sets one), else `model_info["<architecture>.context_length"]` (the model's own
  maximum: Ollama's server default, `OLLAMA_CONTEXT_LENGTH`, may be smaller, and a prompt over
  it is truncated silently, which `TruncationCheck` detects);
- LM Studio: `GET /api/v0/models`, the model's `loaded_context_length` (the loaded instance)
  else `max_context_length`.

`discover_window` tries them in that order and stops at the first that states a window: one
request on llama.cpp, at most four elsewhere, each bounded by a short timeout. Nothing here
ever raises: an unreachable server, a 404, an error page or an odd body means "not stated"
(logged at debug level) and the window stays unknown, as before. A window the user declares
is never replaced: callers ask only without one.

`WindowDiscovery` remembers the answers for its owner (the provider that asked, or whoever
makes several providers for the same servers), never for the process: the latest
`KNOWN_SERVERS` (server, model) pairs; a window found is kept, and a server that stated none
(not up yet, say) is asked again once `RETRY_S` has passed, so a proxy started before its
upstream learns the window when the upstream is up.

With a declared window, `identify_server` asks llama.cpp's `/props` alone: not for the window,
but to know whether the server is llama.cpp, whose own tokenizer counts prompts exactly
(`chatcli.providers.counting`); the provider that asked keeps the answer
(`OpenAICompatible.server_window`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from chatcli.providers._common import require_module
from chatcli.redact import redact_url

__all__ = [
    "DEFAULT_PROBE_TIMEOUT",
    "KNOWN_SERVERS",
    "PROBES",
    "RETRY_S",
    "Probe",
    "ServerWindow",
    "WindowDiscovery",
    "discover_window",
    "identify_server",
    "window_from_llama_props",
    "window_from_lmstudio_models",
    "window_from_ollama_show",
    "window_from_vllm_models",
]

logger = logging.getLogger("chatcli")

# Seconds per probe request: a local server answers these in milliseconds; a host that does
# not answer must not hold up the start of a chat.
DEFAULT_PROBE_TIMEOUT = 3.0
RETRY_S = 30.0  # a server that stated no window is asked again after this
KNOWN_SERVERS = 64  # (server, model) answers a WindowDiscovery keeps, the latest used

Reader = Callable[[Any, str], "int | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerWindow:
    """A window a server stated: `tokens`, which `server` said it, and where (`source`)."""

    tokens: int
    server: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One place a server states its window: a request and the reader of its answer.

    `path` is relative to the server's root (the base URL without a final `/v1`); `post`
    sends `{"model": ...}` as the JSON body, `model_query` sends `?model=...`.
    """

    server: str
    path: str
    read: Reader
    source: str
    post: bool = False
    model_query: bool = False


def window_from_llama_props(body: Any, model: str) -> int | None:
    """llama.cpp `/props`: the slot's `n_ctx`, else the top-level one (older servers)."""
    settings = body.get("default_generation_settings") if isinstance(body, dict) else None
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
        return int(settings["n_ctx"])
    return _window(body, "n_ctx")


def window_from_vllm_models(body: Any, model: str) -> int | None:
    """vLLM `/v1/models`: `max_model_len` of the entry named `model` (or of the only one:
    vLLM serves one model, under any `--served-model-name`)."""
    entry = _entry(body, model)
    return None if entry is None else _window(entry, "max_model_len")


def window_from_ollama_show(body: Any, model: str) -> int | None:
    """Ollama `/api/show`: `num_ctx` in `parameters`, else the architecture's context length."""
    if not isinstance(body, dict):
        return None
    num_ctx = _num_ctx(body.get("parameters"))
    if num_ctx is not None:
        return num_ctx
    info = body.get("model_info")
    if not isinstance(info, dict):
        return None
    architecture = info.get("general.architecture")
    if isinstance(architecture, str):
        return _window(info, f"{architecture}.context_length")
    return None


def window_from_lmstudio_models(body: Any, model: str) -> int | None:
    """LM Studio `/api/v0/models`: the loaded context of the entry named `model`, else its
    maximum."""
    entry = _entry(body, model, only_one=False)
    if entry is None:
        return None
    return _window(entry, "loaded_context_length") or _window(entry, "max_context_length")


PROBES: tuple[Probe, ...] = (
    Probe(
        server="llama.cpp",
        path="/props",
        read=window_from_llama_props,
        source="GET /props n_ctx",
        model_query=True,
    ),
    Probe(
        server="vLLM",
        path="/v1/models",
        read=window_from_vllm_models,
        source="GET /v1/models max_model_len",
    ),
    Probe(
        server="Ollama",
        path="/api/show",
        read=window_from_ollama_show,
        source="POST /api/show num_ctx or context_length",
        post=True,
    ),
    Probe(
        server="LM Studio",
        path="/api/v0/models",
        read=window_from_lmstudio_models,
        source="GET /api/v0/models loaded_context_length or max_context_length",
    ),
)


def discover_window(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = DEFAULT_PROBE_TIMEOUT,
    probes: tuple[Probe, ...] = PROBES,
) -> ServerWindow | None:
    """The window the server at `base_url` states for `model`, asked now, or None (see the
    module docstring); never raising. `WindowDiscovery` remembers the answers."""
    return _probe(_key(base_url, model)[0], model, api_key, timeout, probes)


def identify_server(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = DEFAULT_PROBE_TIMEOUT,
) -> ServerWindow | None:
    """Whether the server at `base_url` is llama.cpp, asked now (one request: its probe alone;
    see the module docstring): its window, or None; never raising."""
    llama = tuple(probe for probe in PROBES if probe.server == "llama.cpp")
    return _probe(_key(base_url, model)[0], model, api_key, timeout, llama)


@dataclass(frozen=True, slots=True)
class _Answer:
    window: ServerWindow | None
    at: float  # when it was asked (the clock's)


class WindowDiscovery:
    """The windows servers stated, remembered by an owner (module docstring): bounded, a
    window found kept, "none stated" asked again after `retry_after` seconds. Thread-safe,
    one probe per (server, model) at a time: a caller that comes while one runs gets the
    answer known before it, without waiting."""

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
        probes: tuple[Probe, ...] = PROBES,
        retry_after: float = RETRY_S,
        size: int = KNOWN_SERVERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.probes = probes
        self.retry_after = retry_after
        self.size = size
        self._clock = clock
        self._answers: OrderedDict[tuple[str, str], _Answer] = OrderedDict()
        self._asking: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def window(
        self, base_url: str, model: str, *, api_key: str | None = None
    ) -> ServerWindow | None:
        """The window the server at `base_url` states for `model`: remembered, or asked now
        (first time, or "none stated" longer than `retry_after` ago)."""
        key = _key(base_url, model)
        with self._lock:
            known = self._answers.get(key)
            if key in self._asking or (known is not None and self._current(known)):
                return self._known(key)
            self._asking.add(key)
        try:
            found = _probe(key[0], model, api_key, self.timeout, self.probes)
        finally:
            with self._lock:
                self._asking.discard(key)
        with self._lock:
            self._answers[key] = _Answer(found, self._clock())
            self._answers.move_to_end(key)
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)
        return found

    def known(self, base_url: str, model: str) -> ServerWindow | None:
        """What was learned for (`base_url`, `model`), without asking."""
        with self._lock:
            return self._known(_key(base_url, model))

    def forget(self) -> None:
        """Forget every answer (a server restarted with another window)."""
        with self._lock:
            self._answers.clear()

    def _known(self, key: tuple[str, str]) -> ServerWindow | None:
        known = self._answers.get(key)
        if known is None:
            return None
        self._answers.move_to_end(key)
        return known.window

    def _current(self, answer: _Answer) -> bool:
        return answer.window is not None or self._clock() - answer.at < self.retry_after


def _probe(
    root: str, model: str, api_key: str | None, timeout: float, probes: tuple[Probe, ...]
) -> ServerWindow | None:
    # The openai SDK's own client, through its documented calls to undocumented endpoints
    # (`client.get(path, cast_to=object)`): present wherever OpenAICompatible is (the `openai`
    # extra), no second HTTP library. No retries: an unanswered probe means "not stated".
    # Such calls carry no credentials of their own: the key goes in the header, and without
    # one the header is left out (the SDK's `omit`).
    openai = require_module("openai", "openai")
    headers = {"Authorization": f"Bearer {api_key}" if api_key else openai.omit}
    with openai.OpenAI(
        api_key=api_key or "no-key", base_url=root, timeout=timeout, max_retries=0
    ) as client:
        for probe in probes:  # bounded: at most one request per probe
            tokens = _ask(client, root, model, probe, headers)
            if tokens is not None:
                found = ServerWindow(tokens=tokens, server=probe.server, source=probe.source)
                shown = redact_url(root)
                logger.info(
                    "%s at %s runs %s with a %d-token window", probe.server, shown, model, tokens
                )
                return found
    return None


def _ask(
    client: Any, root: str, model: str, probe: Probe, headers: Mapping[str, Any]
) -> int | None:
    url = server_url(root, probe.path)
    shown = redact_url(url)  # a base_url can carry credentials: never logged
    try:
        # An absolute URL is sent as it is (the root's query string kept); a body that is not
        # JSON comes back as text, which no reader takes; an HTTP error status raises.
        if probe.post:
            options = {"headers": headers}
            body = client.post(url, cast_to=object, body={"model": model}, options=options)
        else:
            query = {"params": {"model": model}} if probe.model_query else {}
            body = client.get(url, cast_to=object, options={"headers": headers, **query})
        return probe.read(body, model)
    except Exception as exc:  # a probe must never break anything: the window stays unknown
        why = str(exc).replace(url, str(shown))
        logger.debug("window probe %s failed: %s: %s", shown, type(exc).__name__, why)
        return None


def server_url(base_url: str, path: str) -> str:
    """`path` at the server's root: `base_url` without a final `/` or `/v1` (llama.cpp's
    `/props` and `/tokenize`, Ollama's `/api/show` live there), its query string kept after the
    new path (some gateways take their key as `?api-key=...`)."""
    parts = urlsplit(base_url)
    root = parts.path.rstrip("/").removesuffix("/v1")
    return urlunsplit(parts._replace(path=root + path))


def _key(base_url: str, model: str) -> tuple[str, str]:
    """The server's root (no trailing `/` or `/v1`: the probes' paths start there)."""
    return server_url(base_url, ""), model


def _entry(body: Any, model: str, *, only_one: bool = True) -> Mapping[str, Any] | None:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model]
    if named:
        return named[0]
    return entries[0] if only_one and len(entries) == 1 else None


def _num_ctx(parameters: Any) -> int | None:
    """`num_ctx` in Ollama's `parameters` text: one `name value` pair per line."""
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and value.strip().isdigit() and int(value) > 0:
            return int(value)
    return None


def _window(mapping: Any, name: str) -> int | None:
    value = mapping.get(name) if isinstance(mapping, Mapping) else None
    return value if isinstance(value, int) and _positive(value) else None


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
