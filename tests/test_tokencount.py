"""Tests for exact offline token counts (tiktoken seeded from bpe-openai) and the fallback.

Every test runs under the suite's network guard: a download attempt by tiktoken would fail.
"""

from __future__ import annotations

import hashlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.registry
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.messages import Message, ToolCall
from chatcli.tokens.estimate import MESSAGE_OVERHEAD_TOKENS, TokenEstimator
from chatcli.tokens.exact import (
    TIKTOKEN_FILES,
    TiktokenCounter,
    TokenCounter,
    encoding_name_for,
    load_encoding,
    seed_tiktoken_cache,
    token_counter,
)


@pytest.fixture(scope="module")
def reference() -> Any:
    """bpe-openai's own tokenizer (Rust, independent of tiktoken) as the reference."""
    with warnings.catch_warnings():
        # bpe-openai's import calls importlib.resources.open_binary, deprecated since 3.11.
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai
    return bpe_openai


def _cache_file(cache_dir: Path, name: str) -> Path:
    url, _ = TIKTOKEN_FILES[name]
    return cache_dir / hashlib.sha1(url.encode()).hexdigest()


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiktoken-cache")


@pytest.fixture(autouse=True)
def _own_cache(module_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed a cache of this module's, never the machine's shared tiktoken cache."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(module_cache))


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty tiktoken cache, and no encoding already loaded in this process."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    for name in TIKTOKEN_FILES:
        monkeypatch.delitem(tiktoken.registry.ENCODINGS, name, raising=False)
    load_encoding.cache_clear()
    yield tmp_path
    load_encoding.cache_clear()


@pytest.mark.parametrize(
    ("name", "text", "tokens"),
    [
        # Token ids as OpenAI's tokenizers give them (cross-checked with bpe-openai below).
        ("o200k_base", "hello world", [24912, 2375]),
        ("cl100k_base", "hello world", [15339, 1917]),
    ],
)
def test_loads_from_a_seeded_cache_without_network(
    empty_cache: Path, name: str, text: str, tokens: list[int]
) -> None:
    encoding = load_encoding(name)
    assert encoding is not None
    assert encoding.encode(text) == tokens
    assert _cache_file(empty_cache, name).is_file()


def test_corrupt_cached_file_is_replaced(empty_cache: Path) -> None:
    path = _cache_file(empty_cache, "o200k_base")
    path.write_bytes(b"not a bpe file")
    assert seed_tiktoken_cache("o200k_base") == path
    _, sha256 = TIKTOKEN_FILES["o200k_base"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256


def test_good_cached_file_is_kept(empty_cache: Path) -> None:
    path = seed_tiktoken_cache("cl100k_base")
    assert path is not None
    before = path.stat().st_mtime_ns
    assert seed_tiktoken_cache("cl100k_base") == path
    assert path.stat().st_mtime_ns == before


def test_disabled_cache_gives_no_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    load_encoding.cache_clear()
    try:
        assert seed_tiktoken_cache("o200k_base") is None
        assert load_encoding("o200k_base") is None
    finally:
        load_encoding.cache_clear()


def test_unwritable_cache_gives_no_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocker / "cache"))  # parent is a file
    assert seed_tiktoken_cache("o200k_base") is None


def test_unknown_encoding_is_not_seeded() -> None:
    assert seed_tiktoken_cache("p50k_base") is None


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-2025-08-07", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("openai:GPT-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-davinci-003", None),  # p50k: not shipped offline
        ("claude-sonnet-4-5", None),
        ("llama3.1:8b", None),
    ],
)
def test_encoding_name_for(model: str, expected: str | None) -> None:
    assert encoding_name_for(model) == expected


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)


@given(text=_texts)
@settings(max_examples=60, deadline=None)
def test_counts_match_an_independent_tokenizer(reference: Any, text: str) -> None:
    """tiktoken (seeded) and bpe-openai's own Rust tokenizer agree on every text."""
    for name in TIKTOKEN_FILES:
        ours = load_encoding(name)
        assert ours is not None
        theirs = reference.get_encoding(name)
        assert len(ours.encode_ordinary(text)) == len(theirs.encode_ordinary(text))


def test_counter_counts_text_tool_calls_and_overhead(reference: Any) -> None:
    counter = token_counter("gpt-4o")
    assert isinstance(counter, TiktokenCounter)
    call = ToolCall(id="c1", name="read_file", arguments={"path": "src/main.py"})
    messages = (
        Message.system("You are terse."),
        Message.user("hello world"),
        Message.assistant("", (call,)),
        Message.tool("c1", "print('hi')"),
    )
    theirs = reference.get_encoding("o200k_base")
    content = sum(
        len(theirs.encode_ordinary(text))
        for text in (
            "You are terse.",
            "hello world",
            "read_file",
            call.arguments_json,
            "print('hi')",
        )
    )
    assert counter.count(messages) == content + 4 * MESSAGE_OVERHEAD_TOKENS


def test_special_token_text_is_ordinary_text() -> None:
    counter = token_counter("gpt-4")
    assert isinstance(counter, TiktokenCounter)
    assert counter.count_text("<|endoftext|>") > 1


def test_non_openai_model_falls_back_to_the_estimate() -> None:
    estimator = TokenEstimator(chars_per_token=3.0)
    assert token_counter("claude-sonnet-4-5", fallback=estimator) is estimator
    assert token_counter(None, fallback=estimator) is estimator
    assert isinstance(token_counter("llama3.1:8b"), TokenEstimator)


def test_without_tiktoken_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "tiktoken.model", None)
    load_encoding.cache_clear()
    try:
        assert encoding_name_for("gpt-4o") is None
        assert load_encoding("o200k_base") is None
        assert isinstance(token_counter("gpt-4o"), TokenEstimator)
    finally:
        load_encoding.cache_clear()


def test_both_counters_satisfy_the_protocol() -> None:
    counters: list[TokenCounter] = [TokenEstimator(), token_counter("gpt-4o")]
    for counter in counters:
        assert isinstance(counter, TokenCounter)
        assert counter.count((Message.user("hi"),)) > 0
