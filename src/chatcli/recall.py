"""The recall tool: an agent reads a message again that recovery or compaction took out of view.

Levels, microcompaction and compaction cut and drop messages from the working view. The
recovery levels' markers name the transcript's message numbers (as /history numbers them,
from 1): a cut message's ("the transcript keeps the whole message #12"), level 3's notice the
span it stands for ("messages #1-#40"), and each carried instruction its source; a
microcompaction stub names its tool call. An app that sends a view it keeps apart from the
whole conversation passes that conversation as `Client.send(transcript=...)`, so that the
numbers are the transcript's. An app that keeps the transcript can register
`recall_tool(transcript)`: a tool the model calls with a message number (and optionally a
character range) and that answers with that message's original text. It is off unless an app
registers it.

    tool = chatcli.recall_tool(transcript)
    reply = client.send(messages, tools=[tool.spec])         # or tool.openai / .anthropic / .gemini
    for call in reply.message.tool_calls:
        if call.name == tool.name:
            messages += [reply.message, tool.result(call)]   # a tool message with the text

The definition is the same for every provider; `openai`, `anthropic` and `gemini` give it in
each API's own shape (built by the adapters' own converters), for apps that call an SDK
directly. The handler reads only the transcript it was given: it never runs anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatcli.messages import Message, ToolCall
from chatcli.providers.anthropic import _wire_tool
from chatcli.providers.base import ToolSpec
from chatcli.providers.gemini import _declaration
from chatcli.providers.openai import _chat_tool

__all__ = ["RECALL_MAX_CHARS", "RecallTool", "recall_tool"]

# The most characters one call returns: a slice of a long message is asked for with `start`.
RECALL_MAX_CHARS = 8_000
_NAME = "recall_message"
_DESCRIPTION = (
    "Read again the original text of an earlier message of this conversation that is no "
    "longer shown in full (a marker such as 'message #12' or 'messages #3-#40' names it). "
    f"Returns at most {RECALL_MAX_CHARS:,} characters from `start`; ask again with a later "
    "`start` for the rest."
)
_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "integer",
            "description": "The message number in the transcript (the first message is 1).",
        },
        "start": {
            "type": "integer",
            "description": "The first character to return (default 0).",
        },
        "length": {
            "type": "integer",
            "description": f"How many characters to return (at most {RECALL_MAX_CHARS:,}).",
        },
    },
    "required": ["message"],
}

_SPEC = ToolSpec(name=_NAME, description=_DESCRIPTION, parameters=_PARAMETERS)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallTool:
    """The recall tool over one `transcript`: its definition (`spec`, and per provider) and
    its handler (`__call__` on arguments, `result` on a model's tool call)."""

    transcript: tuple[Message, ...]

    @property
    def spec(self) -> ToolSpec:
        """The definition for `Client.send(tools=...)` (any provider)."""
        return _SPEC

    @property
    def name(self) -> str:
        return _SPEC.name

    @property
    def openai(self) -> dict[str, Any]:
        """The definition as an OpenAI Chat Completions `tools` entry."""
        return _chat_tool(self.spec)

    @property
    def anthropic(self) -> dict[str, Any]:
        """The definition as an Anthropic Messages `tools` entry."""
        return _wire_tool(self.spec)

    @property
    def gemini(self) -> dict[str, Any]:
        """The definition as a Gemini function declaration."""
        return _declaration(self.spec)

    def __call__(self, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """(the answer, whether it is an error) for the call's `arguments`."""
        number, start = arguments.get("message"), arguments.get("start", 0)
        length = arguments.get("length", RECALL_MAX_CHARS)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (number, start, length)):
            return "message, start and length must be integers", True
        assert isinstance(number, int) and isinstance(start, int) and isinstance(length, int)
        if not 1 <= number <= len(self.transcript):
            return (
                f"there is no message #{number}: the transcript has {len(self.transcript):,}",
                True,
            )
        message = self.transcript[number - 1]
        text = _full_text(message)
        start = min(max(start, 0), len(text))
        end = min(start + max(min(length, RECALL_MAX_CHARS), 0), len(text))
        head = (
            f"[message #{number} ({message.role.value}), chars {start:,}-{end:,} of {len(text):,}]"
        )
        return f"{head}\n{text[start:end]}", False

    def result(self, call: ToolCall) -> Message:
        """The tool message answering `call` (an error result for bad arguments)."""
        text, is_error = self(call.arguments)
        return Message.tool(call.id, text, is_error=is_error)


def recall_tool(transcript: Sequence[Message]) -> RecallTool:
    """The recall tool over `transcript` (the whole conversation, as the app keeps it)."""
    return RecallTool(transcript=tuple(transcript))


def _full_text(message: Message) -> str:
    """The message's text, and its tool calls (name and arguments), one per line."""
    calls = [f"[calls {c.name} {c.arguments_json} (call {c.id})]" for c in message.tool_calls]
    return "\n".join([message.text, *calls]) if calls else message.text
