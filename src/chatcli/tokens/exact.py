"""Exact token counts for OpenAI models, offline; the calibrated estimate for everything else.

tiktoken (the `chatcli-recovery[tiktoken]` extra) downloads its BPE files from OpenAI on first use,
which fails offline. The `bpe-openai` package ships the cl100k and o200k files byte for byte,
and tiktoken reads `<cache dir>/<sha1 of the file URL>` after checking the file's sha256
before it would download anything. So the file is copied from `bpe-openai` into tiktoken's own
cache (the directory tiktoken itself would have cached its download in) and tiktoken loads it
from there: no network, and no change to the process environment.

Counts that depend on a server (llama.cpp `/tokenize`, the providers' count-tokens APIs) need
I/O and belong to the provider adapters; they can implement `TokenCounter` too.

`CountingEstimator` puts an exact counter where the recovery policy takes a `TokenEstimator`:
every prediction is then a count, and a count the provider states teaches it only the fixed
tokens the counter cannot see (a chat template's own tokens, the way it renders tools).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatcli.messages import Message
from chatcli.tokens.estimate import MESSAGE_OVERHEAD_TOKENS, TokenEstimator, calibrated_ratio

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "TEXT_COUNT_CACHE_SIZE",
    "TIKTOKEN_FILES",
    "CountingEstimator",
    "TextCounts",
    "TiktokenCounter",
    "TokenCounter",
    "encoding_name_for",
    "load_encoding",
    "seed_tiktoken_cache",
    "token_counter",
]

# The encodings bpe-openai ships: the URL tiktoken fetches each from (its cache key) and the
# sha256 tiktoken checks (both as in tiktoken_ext/openai_public.py).
TIKTOKEN_FILES: Mapping[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}

# Texts whose tiktoken count a counter remembers: a long session's messages, each counted
# once however many views (recovery levels, turns) it is predicted in. The memory refers to
# the messages' own strings (a one-part text is not copied), so it costs little.
TEXT_COUNT_CACHE_SIZE = 4096


class TextCounts:
    """The token counts of the latest `size` texts a counter counted: its own, dropped with it
    (never shared across counters, so no text outlives the session that counted it)."""

    def __init__(self, size: int = TEXT_COUNT_CACHE_SIZE) -> None:
        self.size = size
        self.counts: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, text: str, count: Callable[[str], int]) -> int:
        with self.lock:
            known = self.counts.get(text)
            if known is not None:
                self.counts.move_to_end(text)
                self.hits += 1
                return known
        tokens = count(text)
        with self.lock:
            self.misses += 1
            self.counts[text] = tokens
            if len(self.counts) > self.size:
                self.counts.popitem(last=False)
        return tokens


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the prompt tokens of a conversation (`TokenEstimator` is one)."""

    def count(self, messages: Sequence[Message]) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TiktokenCounter:
    """Exact content tokens with a tiktoken encoding, plus a fixed overhead per message.

    The overhead is the same as `TokenEstimator`'s (OpenAI's cookbook: 3 framing tokens and
    the role per message), so exact and estimated counts are comparable. Tool calls count
    their name and JSON arguments, as `Message.char_count` does for characters.
    """

    encoding: tiktoken.Encoding
    per_message: int = MESSAGE_OVERHEAD_TOKENS
    known: TextCounts = field(default_factory=TextCounts, compare=False, repr=False)

    def count(self, messages: Sequence[Message]) -> int:
        return sum(self._message_tokens(m) for m in messages) + self.per_message * len(messages)

    def count_text(self, text: str) -> int:
        return self.known.get(text, self._ordinary_tokens) if text else 0

    def _ordinary_tokens(self, text: str) -> int:
        # Ordinary: text that looks like a special token ("<|endoftext|>") is just text.
        return len(self.encoding.encode_ordinary(text))

    def _message_tokens(self, message: Message) -> int:
        calls = sum(
            self.count_text(c.name) + self.count_text(c.arguments_json) for c in message.tool_calls
        )
        return self.count_text(message.text) + calls


@dataclass(frozen=True, slots=True, kw_only=True)
class CountingEstimator(TokenEstimator):
    """A `TokenEstimator` whose predictions are `counter`'s counts, plus `offset`.

    What the recovery policy and `Client` take where an exact count exists. A count the
    provider states (`calibrated`) sets `offset` to what it adds to the counter's count for
    the same messages: tool schemas and a template's fixed tokens, the same for every view.
    The chars-per-token ratio is calibrated too, for the few predictions made from a size in
    characters (a summary not yet written). Predictions are `trusted`: they are counts.
    """

    counter: TokenCounter
    offset: int = 0

    @property
    def trusted(self) -> bool:
        return True

    def count(self, messages: Sequence[Message]) -> int:
        return max(0, self.counter.count(messages) + self.offset)

    def calibrated(self, messages: Sequence[Message], actual_tokens: int) -> CountingEstimator:
        if actual_tokens <= 0 or not messages:
            return self
        ratio = calibrated_ratio(messages, actual_tokens, self.per_message)
        offset = actual_tokens - self.counter.count(messages)
        return replace(self, offset=offset, chars_per_token=ratio or self.chars_per_token)


def token_counter(model: str | None, *, fallback: TokenCounter | None = None) -> TokenCounter:
    """An exact counter for `model` when one is available offline, else `fallback`.

    `fallback` defaults to a fresh `TokenEstimator` (the calibrated estimate).
    """
    name = encoding_name_for(model) if model else None
    encoding = load_encoding(name) if name else None
    if encoding is not None:
        return TiktokenCounter(encoding=encoding)
    return fallback if fallback is not None else TokenEstimator()


def encoding_name_for(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model, if it is one shipped offline, else None.

    o200k_base for gpt-4o, gpt-4.1, gpt-5 and the o-series; cl100k_base for gpt-4 and
    gpt-3.5 (tiktoken's own table). A provider prefix (`openai/`, `openai:`) is ignored.
    """
    try:
        from tiktoken.model import encoding_name_for_model
    except ImportError:
        return None
    bare = model.strip().lower().rsplit("/", 1)[-1].removeprefix("openai:")
    try:
        name = encoding_name_for_model(bare)
    except KeyError:
        return None
    return name if name in TIKTOKEN_FILES else None


@cache
def load_encoding(name: str) -> tiktoken.Encoding | None:
    """tiktoken's encoding `name`, loaded from a cache seeded offline; None if impossible.

    None when tiktoken or bpe-openai is missing, the encoding is not one bpe-openai ships, or
    the cache cannot be written. Never downloads.
    """
    try:
        import tiktoken
    except ImportError:
        return None
    if seed_tiktoken_cache(name) is None:
        return None
    return tiktoken.get_encoding(name)


def seed_tiktoken_cache(name: str) -> Path | None:
    """Copy bpe-openai's file for encoding `name` to where tiktoken looks for it.

    Returns the path, or None when it cannot be done. A file already there is kept when its
    sha256 is right and replaced otherwise (tiktoken would delete it and download).
    """
    if name not in TIKTOKEN_FILES:
        return None
    url, sha256 = TIKTOKEN_FILES[name]
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return None
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if _has_hash(target, sha256):
        return target
    data = _shipped_file(name)
    if data is None or hashlib.sha256(data).hexdigest() != sha256:
        return None
    try:
        _write_atomically(target, data)
    except OSError:
        return None
    return target


def _tiktoken_cache_dir() -> Path | None:
    """The directory tiktoken reads its cache from, resolved exactly as tiktoken/load.py does.

    This reads `os.environ`, not an injected mapping, because it must agree with tiktoken,
    which reads `os.environ`. An empty setting disables tiktoken's cache: None.
    """
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _has_hash(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _shipped_file(name: str) -> bytes | None:
    """bpe-openai's copy of the file, found without importing bpe-openai (its import builds
    its own tokenizers, which is slow and not needed here)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    packed = Path(spec.submodule_search_locations[0]) / "data" / f"{name}.tiktoken.gz"
    try:
        return gzip.decompress(packed.read_bytes())
    except OSError:
        return None


def _write_atomically(target: Path, data: bytes) -> None:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
