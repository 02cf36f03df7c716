"""A tiny random-weight llama model in GGUF, written on demand for the tests and the offline demo.

The model is real enough for llama.cpp (the C++ `llama-server` and llama-cpp-python) to load,
tokenize, apply its chat template and generate with it, and small enough to write in well under
a second: 2 layers, 64 wide, a byte-level BPE tokenizer trained on one paragraph, a ChatML chat
template, under 1 MB. Its answers are random text, shaped so that tests can rely on them:

- generation never ends on its own: the end-of-generation tokens get a hugely negative logit,
  so every answer stops at `max_tokens` (`finish_reason: length`);
- generated text is printable ASCII (no control bytes, no partial UTF-8 sequences), so every
  streamed chunk is valid UTF-8;
- the same arguments always give the same bytes (fixed seed, deterministic BPE training).

Both logit rules come from one trick: hidden dimension 0 of the residual stream is a constant
(every token embedding holds `_ANCHOR` there and no layer writes to it), so after the final
norm it is a large positive number at every position; an output row with a very negative
weight in that dimension is then a token the model can never pick.

Needs the `gguf` package (extra `chatcli-recovery[local]`), imported only when a model is written.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from chatcli.providers._common import require_module

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "train_bpe", "write_tiny_model"]

# The paragraph the tokenizer is trained on. Plain ASCII; any English text would do.
TRAINING_TEXT = (
    "A conversation with a language model grows with every turn: the user asks, the model "
    "answers, tools return their results, and all of it is sent again on the next request. "
    "Sooner or later the prompt no longer fits the context window and the server refuses it. "
    "A careful client notices the error, trims the oldest turns and the longest tool results, "
    "keeps the system prompt and the latest request, and tries again. When an answer stops at "
    "the output limit, it asks the model to continue from the exact point where it stopped, "
    "and joins the pieces into one reply. Nothing is lost: the full transcript stays on disk, "
    "and the user is told what was done, and why, in plain words."
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# The usual ChatML template, character for character as Qwen ships it, so that both
# llama.cpp and llama-cpp-python recognise it as ChatML.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_N_EMBD = 64
_N_LAYER = 2
_N_HEAD = 4
_N_FF = 128
_MAX_MERGES = 256
_SEED = 20240531
_ANCHOR = 1.0  # the constant in hidden dimension 0 (see the module docstring)
_BANNED_WEIGHT = -100.0  # output weight in dimension 0 of a token that must never be generated
# Printable ASCII except "<", so the text can never spell a ChatML marker such as "<|im_end|>"
# (llama-cpp-python stops on that string).
_ALLOWED_BYTES = frozenset(range(0x20, 0x7F)) - {ord("<")}
# GPT-2's pre-tokenizer ("gpt-2" in llama.cpp), restricted to ASCII letters and digits, which
# is all the training paragraph contains.
_PRETOKENIZE = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+")
_TOKEN_NORMAL = 1
_TOKEN_CONTROL = 3
# A numpy array. numpy and gguf are optional (extra `local`), so they are not needed to
# type-check this module.
Array = Any


@cache
def byte_alphabet() -> tuple[str, ...]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte value.

    Printable Latin-1 bytes stand for themselves; the others are mapped, in order, to code
    points from 256 on (space becomes "Ġ"), so every token is a string without spaces.
    """
    direct = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    mapped = {b: chr(b) for b in direct}
    extra = (b for b in range(256) if b not in mapped)
    mapped.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return tuple(mapped[b] for b in range(256))


def _symbols(word: str) -> tuple[str, ...]:
    alphabet = byte_alphabet()
    return tuple(alphabet[b] for b in word.encode())


def train_bpe(text: str, max_merges: int = _MAX_MERGES) -> tuple[tuple[str, str], ...]:
    """Byte-level BPE merges learnt from `text`, most frequent pair first.

    Ties are broken by the pair itself, so the result depends only on the arguments. Stops at
    `max_merges` or when no pair occurs twice.
    """
    words = Counter(_symbols(w) for w in _PRETOKENIZE.findall(text))
    merges: list[tuple[str, str]] = []
    while len(merges) < max_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            for pair in pairwise(word):
                pairs[pair] += count
        if not pairs:
            break
        best, count = max(pairs.items(), key=lambda item: (item[1], item[0]))
        if count < 2:
            break
        merges.append(best)
        words = Counter({_merge(word, best): n for word, n in words.items()})
    return tuple(merges)


def _merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(word):
        if word[i : i + 2] == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _vocabulary(merges: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """Bytes, then one token per merge, then the special tokens."""
    return (*byte_alphabet(), *(a + b for a, b in merges), *SPECIAL_TOKENS)


def _banned_tokens(tokens: Sequence[str]) -> list[int]:
    """Ids of the tokens the model must never generate: specials and non-printable bytes."""
    decode = {ch: b for b, ch in enumerate(byte_alphabet())}
    return [
        i
        for i, token in enumerate(tokens)
        if token in SPECIAL_TOKENS or any(decode[ch] not in _ALLOWED_BYTES for ch in token)
    ]


def _weights(n_vocab: int, banned: Iterable[int]) -> dict[str, Array]:
    """Random llama weights (numpy shape = (out, in), as gguf-py's converters write them)."""
    np = require_module("numpy", "local")

    rng = np.random.default_rng(_SEED)

    def normal(*shape: int, scale: float = 0.02) -> Array:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ones(n: int) -> Array:
        return np.ones(n, dtype=np.float32)

    embd = normal(n_vocab, _N_EMBD)
    embd[:, 0] = _ANCHOR
    output = normal(n_vocab, _N_EMBD, scale=1.0)
    output[:, 0] = 0.0
    output[list(banned), 0] = _BANNED_WEIGHT
    tensors = {"token_embd.weight": embd, "output_norm.weight": ones(_N_EMBD)}
    tensors["output.weight"] = output
    for i in range(_N_LAYER):
        layer = {
            "attn_norm": ones(_N_EMBD),
            "attn_q": normal(_N_EMBD, _N_EMBD),
            "attn_k": normal(_N_EMBD, _N_EMBD),
            "attn_v": normal(_N_EMBD, _N_EMBD),
            "attn_output": normal(_N_EMBD, _N_EMBD),
            "ffn_norm": ones(_N_EMBD),
            "ffn_gate": normal(_N_FF, _N_EMBD),
            "ffn_up": normal(_N_FF, _N_EMBD),
            "ffn_down": normal(_N_EMBD, _N_FF),
        }
        # No layer writes hidden dimension 0, which keeps the anchor constant.
        layer["attn_output"][0, :] = 0.0
        layer["ffn_down"][0, :] = 0.0
        tensors.update({f"blk.{i}.{name}.weight": w for name, w in layer.items()})
    return tensors


def write_tiny_model(path: str | Path, *, context_length: int = 4096) -> Path:
    """Write the tiny model to `path` (overwriting it) and return the path.

    `context_length` is the model's trained context (`llama.context_length`); llama-server
    caps each slot's context at it, so make it at least the server's `-c`.
    """
    gguf = require_module("gguf", "local")
    merges = train_bpe(TRAINING_TEXT)
    tokens = _vocabulary(merges)
    path = Path(path)
    writer = gguf.GGUFWriter(path, "llama")
    _add_hyperparameters(writer, context_length=context_length, n_vocab=len(tokens))
    _add_tokenizer(writer, tokens, merges)
    for name, tensor in _weights(len(tokens), _banned_tokens(tokens)).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_hyperparameters(writer: Any, *, context_length: int, n_vocab: int) -> None:
    writer.add_name("chatcli-tiny")
    writer.add_context_length(context_length)
    writer.add_embedding_length(_N_EMBD)
    writer.add_block_count(_N_LAYER)
    writer.add_feed_forward_length(_N_FF)
    writer.add_head_count(_N_HEAD)
    writer.add_head_count_kv(_N_HEAD)
    writer.add_rope_dimension_count(_N_EMBD // _N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(0)  # all F32


def _add_tokenizer(writer: Any, tokens: Sequence[str], merges: Sequence[tuple[str, str]]) -> None:
    """A GPT-2 style byte-level BPE vocabulary, as gguf-py's `SpecialVocab`/BPE vocab writes it."""
    ids = {token: i for i, token in enumerate(tokens)}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(list(tokens))
    writer.add_token_types(
        [_TOKEN_CONTROL if t in SPECIAL_TOKENS else _TOKEN_NORMAL for t in tokens]
    )
    writer.add_token_merges([f"{a} {b}" for a, b in merges])
    writer.add_bos_token_id(ids["<|endoftext|>"])
    writer.add_eos_token_id(ids["<|im_end|>"])
    writer.add_pad_token_id(ids["<|endoftext|>"])
    writer.add_add_bos_token(False)  # ChatML models (Qwen and the like) start without BOS
    writer.add_chat_template(CHATML_TEMPLATE)
