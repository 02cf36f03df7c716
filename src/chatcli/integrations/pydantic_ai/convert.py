"""pydantic-ai `ModelMessage`s <-> chatcli `Message`s: the one place that converts them.

`to_chatcli` turns each request part into one chatcli message (system prompt, user prompt,
tool return or retry prompt), and each `ModelResponse` into one assistant message (its text
parts, its tool calls). Every chatcli part, call, result and message carries the pydantic-ai
object it came from in `provider_details["pydantic_ai"]`, so `to_pydantic_ai` gives back the
very same objects for whatever recovery left unchanged (timestamps, ids, metadata, thinking,
files, native tool parts, part order), and only a cut part is rebuilt (`dataclasses.replace`
of its original, with the cut text). Messages chatcli made itself (the compaction notice, a
result for an interrupted call, a continuation request) become new parts.

The agent's instructions (and its tools' definitions) are sent by the model classes but are
not part of the message history: `to_chatcli` prepends them as a system message marked
`INSTRUCTIONS` (so the window estimate counts them, and recovery keeps them as it keeps every
system message), and `to_pydantic_ai` leaves it out again.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai import messages as pai

from chatcli.messages import Message, Role, TextPart, ToolCall, ToolResult

__all__ = ["INSTRUCTIONS", "KEY", "assistant_message", "to_chatcli", "to_pydantic_ai"]

# The `provider_details` key under which each chatcli value keeps its pydantic-ai original.
KEY = "pydantic_ai"
# The request parts whose `content` is the text the model sees (a user prompt's may be a list).
_TEXT_PARTS = (
    pai.SystemPromptPart,
    pai.UserPromptPart,
    pai.ToolReturnPart,
    pai.RetryFeedbackPart,
    pai.RetryPromptPart,
)
# The mark of the system message that stands for the agent's instructions.
INSTRUCTIONS = "instructions"


def to_chatcli(
    messages: Sequence[pai.ModelMessage], instructions: str | None = None
) -> tuple[Message, ...]:
    """`messages` as chatcli messages, `instructions` (what else the model is sent, if
    anything) first as a system message."""
    head = () if not instructions else (_instructions_message(instructions),)
    converted: list[Message] = list(head)
    for message in messages:
        if isinstance(message, pai.ModelRequest):
            converted.extend(_request_messages(message))
        else:
            converted.append(assistant_message(message))
    return tuple(converted)


def to_pydantic_ai(messages: Sequence[Message]) -> list[pai.ModelMessage]:
    """`messages` (a view made from `to_chatcli`'s output) back as pydantic-ai messages: the
    originals where unchanged, consecutive non-assistant messages grouped into one request."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    converted: list[pai.ModelMessage] = []
    group: list[Message] = []
    for message in messages:
        source = _source(message)
        if source == INSTRUCTIONS:
            continue
        if message.role is Role.ASSISTANT or _starts_request(group, source):
            converted.extend(_request(group, names))
            group = []
        if message.role is Role.ASSISTANT:
            converted.append(_response(message))
        else:
            group.append(message)
    converted.extend(_request(group, names))
    return converted


def _starts_request(group: Sequence[Message], source: Any) -> bool:
    """A message from another original request than the group's starts a request of its own
    (two requests in a row stay two)."""
    if not isinstance(source, pai.ModelRequest):
        return False
    return any(isinstance(s, pai.ModelRequest) and s is not source for s in map(_source, group))


# -- pydantic-ai -> chatcli -----------------------------------------------------------------


def _instructions_message(text: str) -> Message:
    return Message(
        role=Role.SYSTEM, parts=(TextPart(text=text),), provider_details={KEY: INSTRUCTIONS}
    )


def _request_messages(request: pai.ModelRequest) -> Iterator[Message]:
    details = {KEY: request}
    if not request.parts:  # kept as a message, so the round trip gives it back
        yield Message(role=Role.USER, provider_details=details)
    for part in request.parts:
        role, text = _request_part_text(part)
        if role is Role.TOOL:
            assert isinstance(part, pai.ToolReturnPart | pai.RetryPromptPart)  # as the role says
            result = ToolResult(
                call_id=part.tool_call_id,
                content=text,
                is_error=_is_error(part),
                provider_details={KEY: part},
            )
            yield Message(role=Role.TOOL, tool_result=result, provider_details=details)
        else:
            parts = (TextPart(text=text, provider_details={KEY: part}),)
            yield Message(role=role, parts=parts, provider_details=details)


def _request_part_text(part: pai.ModelRequestPart) -> tuple[Role, str]:
    """The role a request part is sent with, and the text the model sees of it."""
    if isinstance(part, pai.SystemPromptPart):
        return Role.SYSTEM, part.content
    if isinstance(part, pai.UserPromptPart):
        return Role.USER, _user_text(part.content)
    if isinstance(part, pai.ToolReturnPart):
        return Role.TOOL, part.model_response_str()
    if isinstance(part, pai.RetryFeedbackPart):
        return Role.USER, part.model_response()
    if isinstance(part, pai.RetryPromptPart):  # deprecated, still in stored histories
        return (Role.USER if part.tool_name is None else Role.TOOL), part.model_response()
    return Role.USER, ""  # another kind of part (e.g. speech): carried along, not counted


def _user_text(content: str | Sequence[pai.UserContent]) -> str:
    if isinstance(content, str):
        return content
    return "".join(item for item in content if isinstance(item, str))


def _is_error(part: pai.ModelRequestPart) -> bool:
    outcome = getattr(part, "outcome", None)
    return isinstance(part, pai.RetryPromptPart) or outcome in ("failed", "retried")


def assistant_message(response: pai.ModelResponse) -> Message:
    """One `ModelResponse` as one assistant message: its text parts (other parts, such as
    thinking or native tool parts, ride along with no text) and its tool calls."""
    parts: list[TextPart] = []
    calls: list[ToolCall] = []
    for part in response.parts:
        if isinstance(part, pai.ToolCallPart):
            calls.append(
                ToolCall(
                    id=part.tool_call_id,
                    name=part.tool_name,
                    arguments=part.args_as_dict(),
                    provider_details={KEY: part},
                )
            )
        else:
            text = part.content if isinstance(part, pai.TextPart) else ""
            parts.append(TextPart(text=text, provider_details={KEY: part}))
    return Message(
        role=Role.ASSISTANT,
        parts=tuple(parts),
        tool_calls=tuple(calls),
        provider_details={KEY: response},
    )


# -- chatcli -> pydantic-ai -----------------------------------------------------------------


def _source(value: Message | TextPart | ToolCall | ToolResult) -> Any:
    details: Mapping[str, Any] | None = value.provider_details
    return None if details is None else details.get(KEY)


def _request(group: Sequence[Message], names: Mapping[str, str]) -> list[pai.ModelMessage]:
    """The request a run of non-assistant messages is sent as: the original request when its
    parts all came back unchanged, else the first original with its parts replaced."""
    if not group:
        return []
    parts = [part for message in group if (part := _request_part(message, names)) is not None]
    sources = [s for m in group if isinstance(s := _source(m), pai.ModelRequest)]
    if not sources:
        return [pai.ModelRequest(parts=parts)]
    first = sources[0]
    if len(parts) == len(first.parts) and all(map(operator.is_, parts, first.parts)):
        return [first]
    return [replace(first, parts=parts)]


def _request_part(message: Message, names: Mapping[str, str]) -> pai.ModelRequestPart | None:
    original = _original_part(message)
    if original is not None:
        _, text = _request_part_text(original)
        return original if text == message.text else _with_text(original, message.text)
    if message.tool_result is not None:
        result = message.tool_result
        return pai.ToolReturnPart(
            tool_name=names.get(result.call_id, ""),
            content=result.content,
            tool_call_id=result.call_id,
            outcome="failed" if result.is_error else "success",
        )
    if not message.text and _source(message) is not None:
        return None  # the stand-in for an empty request
    if message.role is Role.SYSTEM:
        return pai.SystemPromptPart(content=message.text)
    return pai.UserPromptPart(content=message.text)


def _original_part(message: Message) -> Any:
    if message.tool_result is not None:
        return _source(message.tool_result)
    return _source(message.parts[0]) if message.parts else None


def _with_text(part: pai.ModelRequestPart, text: str) -> pai.ModelRequestPart:
    """`part`, cut by recovery to `text`: what the model sees of it is replaced by `text`
    (a user prompt keeps its non-text items, such as images)."""
    if isinstance(part, pai.UserPromptPart) and not isinstance(part.content, str):
        others = [item for item in part.content if not isinstance(item, str)]
        return replace(part, content=[text, *others])
    if isinstance(part, _TEXT_PARTS):
        cut: pai.ModelRequestPart = replace(part, content=text)  # type: ignore[arg-type]
        return cut
    return part  # a part with no text (speech, ...) has nothing to cut


def _response(message: Message) -> pai.ModelResponse:
    source = _source(message)
    if isinstance(source, pai.ModelResponse) and message == assistant_message(source):
        return source
    parts: list[pai.ModelResponsePart] = []
    for part in message.parts:
        if (converted := _response_part(part)) is not None:
            parts.append(converted)
    parts.extend(_tool_call_part(call) for call in message.tool_calls)
    if isinstance(source, pai.ModelResponse):
        return replace(source, parts=parts)
    return pai.ModelResponse(parts=parts)


def _response_part(part: TextPart) -> pai.ModelResponsePart | None:
    original: pai.ModelResponsePart | None = _source(part)
    if isinstance(original, pai.TextPart):
        return original if original.content == part.text else replace(original, content=part.text)
    if original is not None and not part.text:
        return original  # thinking, a file, a native tool part: carried as it was
    return pai.TextPart(content=part.text) if part.text else None


def _tool_call_part(call: ToolCall) -> pai.ToolCallPart:
    original = _source(call)
    if isinstance(original, pai.ToolCallPart):
        if original.args_as_dict() == dict(call.arguments):
            return original
        return replace(original, args=dict(call.arguments))
    return pai.ToolCallPart(tool_name=call.name, args=dict(call.arguments), tool_call_id=call.id)
