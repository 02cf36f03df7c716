"""Hypothesis strategies for random conversations, shared by the whole test suite.

`conversations()` draws the histories that break naive transforms: system messages anywhere,
tool calls with and without results, results duplicated, out of order, displaced after other
messages or before their call, orphan results, call ids reused across assistant messages,
continuation prompts and empty user messages, long texts, and non-ASCII text with emoji
sequences and combining marks. `provider_details` appears on parts, calls, results and
messages, so tests can check that it survives.

Every drawn message is a valid `Message`; the conversation as a whole may be invalid for a
provider (that is the point). Texts never contain lone surrogates (they cannot be encoded).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from chatcli.config import RecoveryConfig
from chatcli.messages import Message, Role, TextPart, ToolCall, ToolResult

__all__ = [
    "CONTINUATION_MESSAGE",
    "GRAPHEME_CLUSTERS",
    "TRICKY_PIECES",
    "agent_sessions",
    "assistant_messages",
    "call_ids",
    "conversations",
    "provider_details",
    "recovery_configs",
    "system_messages",
    "texts",
    "tool_calls",
    "tool_messages",
    "user_messages",
]

# SPEC section 3, verbatim (chatcli.continuation.CONTINUATION_MESSAGE is the same text).
CONTINUATION_MESSAGE = (
    "Your response was cut off at the token limit.\n"
    "Resume DIRECTLY from where you stopped — do not repeat any content.\n"
    "Continue the implementation or explanation from the exact point of interruption."
)

# User-perceived characters made of several code points: a cut inside any of them is a bug.
GRAPHEME_CLUSTERS = (
    "e\u0301",  # e + combining acute
    "a\u0308\u0323",  # a + two combining marks
    "\u0915\u094d\u0937",  # Devanagari conjunct: consonant + virama + consonant
    "👍🏽",  # emoji + skin-tone modifier
    "👨\u200d👩\u200d👧\u200d👦",  # ZWJ family
    "❤\ufe0f",  # emoji presentation selector
    "🇫🇷",  # flag: two regional indicators
    "🇩🇪",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland: tag sequence
    "\r\n",
)
# Pieces that texts are made of besides arbitrary code points.
TRICKY_PIECES = (*GRAPHEME_CLUSTERS, "日本語", "ß", "\n", "\n\n", "\t")


def texts(*, max_pieces: int = 12, long: bool = True) -> st.SearchStrategy[str]:
    """Text mixing arbitrary code points, tricky clusters and line breaks.

    With `long`, some texts are a random piece repeated up to 4,000 times (up to ~100k
    chars): cheap to draw, and long enough to cross every budget.
    """
    piece = st.one_of(st.text(max_size=16), st.sampled_from(TRICKY_PIECES))
    short = st.lists(piece, max_size=max_pieces).map("".join)
    if not long:
        return short
    repeated = st.builds(lambda s, n: s * n, short.filter(bool), st.integers(10, 4000))
    return st.one_of(short, short, repeated)


def provider_details() -> st.SearchStrategy[dict[str, Any] | None]:
    """None most of the time, else an opaque mapping (a signature, a nested value)."""
    details = st.fixed_dictionaries(
        {"signature": st.text(max_size=12)}, optional={"cache": st.booleans()}
    )
    return st.one_of(st.none(), st.none(), details)


def call_ids() -> st.SearchStrategy[str]:
    """Ids from a small pool, so that reuse across assistant messages happens."""
    return st.sampled_from([f"call_{n}" for n in range(8)])


def system_messages() -> st.SearchStrategy[Message]:
    return st.builds(_message, st.just(Role.SYSTEM), _part_texts(long=False), provider_details())


def user_messages() -> st.SearchStrategy[Message]:
    """Real requests mostly; also continuation prompts and empty (not real) user messages."""
    special = st.sampled_from([[CONTINUATION_MESSAGE], [], [" \n"]])
    text = st.one_of(_part_texts(), _part_texts(), special)
    return st.builds(_message, st.just(Role.USER), text, provider_details())


def assistant_messages(*, min_calls: int = 0, max_calls: int = 3) -> st.SearchStrategy[Message]:
    """Assistant text with min_calls..max_calls tool calls (ids unique within the message)."""
    calls = st.lists(
        tool_calls(), min_size=min_calls, max_size=max_calls, unique_by=lambda c: c.id
    ).map(tuple)
    return st.builds(_message, st.just(Role.ASSISTANT), _part_texts(), provider_details(), calls)


def tool_calls() -> st.SearchStrategy[ToolCall]:
    """A call with non-ASCII arguments; sometimes `incomplete` (cut off by max_tokens)."""
    return st.builds(
        ToolCall,
        id=call_ids(),
        name=st.sampled_from(["read_file", "run", "search", "ツール"]),
        arguments=st.dictionaries(st.sampled_from(["path", "q", "n"]), texts(long=False)),
        incomplete=st.sampled_from((False, False, False, True)),
        provider_details=provider_details(),
    )


def tool_messages() -> st.SearchStrategy[Message]:
    """A tool result for a call id from the pool: an error sometimes, long text sometimes."""
    result = st.builds(
        ToolResult,
        call_id=call_ids(),
        content=texts(),
        is_error=st.booleans(),
        provider_details=provider_details(),
    )
    return st.builds(lambda r: Message(role=Role.TOOL, tool_result=r), result)


@st.composite
def conversations(draw: st.DrawFn, *, max_blocks: int = 12, users: bool = True) -> list[Message]:
    """A conversation of up to `max_blocks` blocks (a message, or a tool-call exchange).

    An exchange is an assistant message with calls followed by results, each answered once,
    twice or never, in a shuffled order. Then up to three tool messages are moved anywhere
    (after other messages, or before their call). With `users=False` there is no user
    message at all (an agent transcript cut before its request, a history of tool calls).
    """
    user_block = user_messages().map(lambda m: [m])
    blocks = [
        system_messages().map(lambda m: [m]),
        *((user_block, user_block) if users else ()),
        assistant_messages(max_calls=0).map(lambda m: [m]),
        _tool_exchanges(),
        _tool_exchanges(),
        tool_messages().map(lambda m: [m]),  # orphan, or an answer to some earlier call
    ]
    block = st.one_of(blocks)
    messages = [m for group in draw(st.lists(block, max_size=max_blocks)) for m in group]
    for _ in range(draw(st.integers(0, 3))):
        tools = [i for i, m in enumerate(messages) if m.role is Role.TOOL]
        if tools:
            moved = messages.pop(tools[draw(st.integers(0, len(tools) - 1))])
            messages.insert(draw(st.integers(0, len(messages))), moved)
    return messages


def recovery_configs() -> st.SearchStrategy[RecoveryConfig]:
    """Configs with small limits, so that every budget and truncation path is exercised."""
    return st.builds(
        RecoveryConfig,
        emergency_keep_messages=st.integers(1, 12),
        tool_result_max_chars=st.integers(1, 30_000),
        tool_result_budget_chars=st.integers(1, 60_000),
    )


@st.composite
def _tool_exchanges(draw: st.DrawFn) -> list[Message]:
    call = draw(_EXCHANGE_CALLS)
    results = []
    for tool_call in call.tool_calls:
        copies = draw(_COPIES)
        results += [_answering(draw(_RESULTS), tool_call.id) for _ in range(copies)]
    return [call, *draw(st.permutations(results))]


def _answering(message: Message, call_id: str) -> Message:
    assert message.tool_result is not None
    return replace(message, tool_result=replace(message.tool_result, call_id=call_id))


def _part_texts(*, long: bool = True) -> st.SearchStrategy[list[str]]:
    """The texts of a message's parts: usually one, sometimes none or two."""
    return st.lists(texts(long=long), max_size=2)


def _message(
    role: Role,
    part_texts: list[str],
    details: dict[str, Any] | None,
    calls: tuple[ToolCall, ...] = (),
) -> Message:
    parts = tuple(TextPart(text=t, provider_details=details) for t in part_texts if t)
    return Message(role=role, parts=parts, tool_calls=calls, provider_details=details)


# Built once: building strategies inside a draw makes hypothesis re-validate them every time.
_EXCHANGE_CALLS = assistant_messages(min_calls=1, max_calls=4)
_RESULTS = tool_messages()
_COPIES = st.sampled_from((1, 1, 1, 0, 2))  # a call is answered, or not, or twice


# Tool results of an agent: mostly large (a short random piece repeated: random 3,000-char
# texts would exhaust hypothesis), some small.
_RESULT_TEXTS = st.one_of(
    st.builds(lambda piece, n: piece * n, st.text(min_size=1, max_size=12), st.integers(1, 2500)),
    st.text(max_size=30),
)


@st.composite
def agent_sessions(draw: st.DrawFn, *, max_steps: int = 24) -> list[Message]:
    """Well-paired agent transcripts: a system prompt and a request, then steps of (an
    assistant message with one or two calls, their results), with a user message now and
    then; tool results of up to ~30,000 chars."""
    messages = [Message.system("You are an agent."), Message.user("Do the task.")]
    for step in range(draw(st.integers(0, max_steps))):
        calls = tuple(
            ToolCall(id=f"s{step}c{i}", name=draw(st.sampled_from(["read", "grep", "run"])))
            for i in range(draw(st.integers(1, 2)))
        )
        messages.append(Message.assistant(draw(st.text(max_size=8)), tool_calls=calls))
        for call in calls:
            is_error = draw(st.booleans())
            messages.append(Message.tool(call.id, draw(_RESULT_TEXTS), is_error=is_error))
        if draw(st.integers(0, 4)) == 0:
            messages.append(Message.user(draw(st.text(max_size=8))))
    return messages
