"""The tiny GGUF model: deterministic, small, fast, and with the metadata llama.cpp needs.

How the model behaves when run (answers end at max_tokens, printable text) is asserted against
the real engines in test_llama_server.py and test_llama_cpp_embedded.py; here we check the file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.chat.tinymodel import CHATML_TEMPLATE, SPECIAL_TOKENS, train_bpe, write_tiny_model

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = write_tiny_model(tmp_path_factory.mktemp("m") / "tiny.gguf", context_length=1536)
    return gguf.GGUFReader(path)


def _value(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


def test_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    a = write_tiny_model(tmp_path / "a.gguf").read_bytes()
    b = write_tiny_model(tmp_path / "b.gguf").read_bytes()
    assert a == b


def test_small_and_written_in_under_a_second(tmp_path: Path) -> None:
    write_tiny_model(tmp_path / "warm.gguf")  # imports gguf and numpy once
    start = time.perf_counter()
    path = write_tiny_model(tmp_path / "tiny.gguf")
    assert time.perf_counter() - start < 1.0
    assert path.stat().st_size < 1_000_000


def test_llama_hyperparameters(reader: Any) -> None:
    assert _value(reader, "general.architecture") == "llama"
    assert _value(reader, "llama.context_length") == 1536
    assert _value(reader, "llama.block_count") == 2
    assert _value(reader, "llama.embedding_length") == 64
    assert _value(reader, "llama.attention.head_count") == 4
    names = {t.name for t in reader.tensors}
    for block in range(2):
        for part in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down"):
            assert f"blk.{block}.{part}.weight" in names
    assert {"token_embd.weight", "output_norm.weight", "output.weight"} <= names


def test_byte_level_bpe_vocabulary(reader: Any) -> None:
    tokens = _value(reader, "tokenizer.ggml.tokens")
    assert _value(reader, "tokenizer.ggml.model") == "gpt2"
    assert len(tokens) == len(set(tokens)) == _value(reader, "llama.vocab_size")
    assert len(tokens) > 256 + len(SPECIAL_TOKENS)  # the paragraph taught it some merges
    assert tokens[ord("a")] == "a" and tokens[ord(" ")] == "Ġ"  # GPT-2's byte alphabet
    merges = _value(reader, "tokenizer.ggml.merges")
    assert all(m.replace(" ", "", 1) in tokens for m in merges)
    eos = tokens[_value(reader, "tokenizer.ggml.eos_token_id")]
    assert eos == "<|im_end|>"
    assert _value(reader, "tokenizer.chat_template") == CHATML_TEMPLATE


def test_generation_can_never_pick_special_or_unprintable_tokens(reader: Any) -> None:
    tokens = _value(reader, "tokenizer.ggml.tokens")
    tensors = {t.name: t.data for t in reader.tensors}
    embedding, output = tensors["token_embd.weight"], tensors["output.weight"]
    # The anchor dimension is constant in every embedding and no layer writes to it ...
    assert (embedding[:, 0] == embedding[0, 0]).all() and embedding[0, 0] > 0
    for block in range(2):
        assert not tensors[f"blk.{block}.attn_output.weight"][0].any()
        assert not tensors[f"blk.{block}.ffn_down.weight"][0].any()
    # ... so a very negative output weight there bans a token.
    banned = {tokens[i] for i in range(len(tokens)) if output[i, 0] < -10}
    assert set(SPECIAL_TOKENS) <= banned
    assert "Ċ" in banned and "a" not in banned and "Ġthe" not in banned  # "\n" vs text


def test_bpe_learns_the_most_frequent_pair_first() -> None:
    merges = train_bpe("abab abab abab xy", max_merges=2)
    assert merges[0] == ("a", "b")
    assert merges[1] == ("ab", "ab")


def test_bpe_stops_when_no_pair_repeats() -> None:
    assert train_bpe("abcdef") == ()
    assert len(train_bpe("the the the then", max_merges=100)) < 100


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=200))
def test_bpe_merges_build_on_known_symbols(text: str) -> None:
    """Each merge joins two symbols that already exist: bytes or earlier merges."""
    merges = train_bpe(text, max_merges=40)
    known = {chr(c) for c in range(33, 127)} | {"Ġ"}
    for left, right in merges:
        assert left in known and right in known
        known.add(left + right)
    assert len(set(merges)) == len(merges)
    assert merges == train_bpe(text, max_merges=40)
