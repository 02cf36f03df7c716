"""The other ways to fit a conversation into a window, as the recovery benchmark runs them.

Each takes the history, a budget in tokens (the room: window minus the requested output)
and the benchmark's counter (the real tokenizer of the cell), and returns the view it would
send:

- `langchain_trim`: LangChain's `trim_messages` (the real langchain-core package), with the
  settings its how-to guide gives for chat history (keep the last messages, start on a human
  message, end on a human or tool message, keep the system message, no partial messages)
  and the cell's tokenizer as `token_counter`.
- `litellm_trim`: LiteLLM's `litellm.utils.trim_messages` (the real package), given the
  budget as `max_tokens`. It counts with its own tokenizer (`litellm.token_counter` for the
  model named), as it does for its users.
- `middle_out`: OpenRouter's `middle-out` transform, RE-IMPLEMENTED here from its
  documentation ("removing or truncating messages from the middle of the prompt, until the
  prompt fits within the model's context window"): the system messages stay, messages are
  removed from the middle until the rest fits, then the middle of the largest remaining
  message is cut. The documentation says nothing about tool calls, so this keeps no pairs
  together. OpenRouter's own code is not public; this is its documented behaviour only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from chatcli.messages import Message, Role, ToolCall

# LiteLLM fetches its model price map (and may fetch tokenizers) from the network unless
# told not to: the benchmark runs offline, on what the package ships.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

# A rival bound to its counter or model: (history, budget in tokens) -> the view it sends.
Trim = Callable[[Sequence[Message], int], list[Message]]
MIDDLE_OUT_MARKER = "\n...\n"
MIDDLE_OUT_MAX_CUTS = 20


class MessageCounter(Protocol):
    def count(self, messages: Sequence[Message]) -> int: ...

    def message_tokens(self, message: Message) -> int: ...


# -- LangChain -----------------------------------------------------------------------------


def langchain_trim(
    messages: Sequence[Message], budget: int, counter: MessageCounter
) -> list[Message]:
    from langchain_core.messages import trim_messages

    converted = [to_langchain(m) for m in messages]
    original = {id(lc): m for lc, m in zip(converted, messages, strict=True)}

    def token_counter(batch: Sequence[Any]) -> int:
        return sum(counter.message_tokens(original[id(lc)]) for lc in batch)

    kept = trim_messages(
        converted,
        max_tokens=budget,
        token_counter=token_counter,
        strategy="last",
        start_on="human",
        end_on=("human", "tool"),
        include_system=True,
        allow_partial=False,
    )
    return [original[id(lc)] for lc in kept]


def to_langchain(message: Message) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    if message.role is Role.SYSTEM:
        return SystemMessage(content=message.text)
    if message.role is Role.USER:
        return HumanMessage(content=message.text)
    if message.role is Role.TOOL:
        assert message.tool_result is not None
        return ToolMessage(content=message.text, tool_call_id=message.tool_result.call_id)
    calls = [{"name": c.name, "args": dict(c.arguments), "id": c.id} for c in message.tool_calls]
    return AIMessage(content=message.text, tool_calls=calls)


# -- LiteLLM -------------------------------------------------------------------------------


def litellm_trim(messages: Sequence[Message], budget: int, model: str) -> list[Message]:
    from litellm.utils import trim_messages

    wire = [to_openai(m) for m in messages]
    with summed_litellm_counts(wire, model):
        trimmed = trim_messages(wire, model=model, max_tokens=budget)
    return [from_openai(m) for m in trimmed]


@contextmanager
def summed_litellm_counts(wire: list[dict[str, Any]], model: str) -> Iterator[None]:
    """LiteLLM's trim counts the whole kept list again for each message it considers, which
    is quadratic in tokenization (minutes per cell here). Its count of a list is the sum of
    its messages' counts less a constant (the reply priming), so while this is active each
    message is counted once by LiteLLM's own `token_counter` and the sums are used: the same
    numbers, checked against LiteLLM's count of the whole history before it is used."""
    from litellm import utils

    original = utils.get_token_count
    memo: dict[tuple[int, str], int] = {}

    def single(message: dict[str, Any]) -> int:
        key = (id(message), str(message.get("content")))
        if key not in memo:
            memo[key] = original(messages=[message], model=model)
        return memo[key]

    pair = wire[:2]
    shared = sum(single(m) for m in pair) - original(messages=pair, model=model)

    def summed(messages: Sequence[dict[str, Any]], model: str) -> int:
        if not messages:
            return int(original(messages=[], model=model))
        return sum(single(m) for m in messages) - shared * (len(messages) - 1)

    if summed(wire, model) != original(messages=wire, model=model):
        raise AssertionError("LiteLLM's count is not a sum over messages: cannot speed it up")
    utils.get_token_count = summed
    try:
        yield
    finally:
        utils.get_token_count = original


def to_openai(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": str(message.role), "content": message.text}
    if message.tool_result is not None:
        wire["tool_call_id"] = message.tool_result.call_id
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json},
            }
            for c in message.tool_calls
        ]
    return wire


def from_openai(wire: dict[str, Any]) -> Message:
    role, text = wire["role"], wire.get("content") or ""
    if role == "system":
        return Message.system(text)
    if role == "user":
        return Message.user(text)
    if role == "tool":
        return Message.tool(wire["tool_call_id"], text)
    calls = tuple(
        ToolCall(
            id=c["id"],
            name=c["function"]["name"],
            arguments=json.loads(c["function"]["arguments"]),
        )
        for c in wire.get("tool_calls") or ()
    )
    return Message.assistant(text, tool_calls=calls)


# -- OpenRouter's middle-out (re-implemented from its documentation) -------------------------


def middle_out(messages: Sequence[Message], budget: int, counter: MessageCounter) -> list[Message]:
    system = [m for m in messages if m.role is Role.SYSTEM]
    rest = [m for m in messages if m.role is not Role.SYSTEM]
    sizes = [counter.message_tokens(m) for m in rest]
    fixed = counter.count(system)
    while fixed + sum(sizes) > budget and len(rest) > 2:
        middle = len(rest) // 2
        del rest[middle], sizes[middle]
    for _ in range(MIDDLE_OUT_MAX_CUTS):  # then truncate: the largest message, in its middle
        excess = fixed + sum(sizes) - budget
        if excess <= 0 or not rest:
            break
        largest = max(range(len(rest)), key=sizes.__getitem__)
        rest[largest] = _cut_middle(rest[largest], sizes[largest], excess)
        sizes[largest] = counter.message_tokens(rest[largest])
    return system + rest


def _cut_middle(message: Message, tokens: int, excess: int) -> Message:
    """`message` with the middle of its text cut, by the share of tokens to lose (a little
    more, so that a few rounds converge)."""
    text = message.text
    share = min(1.0, (excess + 16) / max(tokens, 1))
    keep = max(0, int(len(text) * (1 - share)) - len(MIDDLE_OUT_MARKER))
    return message.with_text(text[: keep // 2] + MIDDLE_OUT_MARKER + text[len(text) - keep // 2 :])
