"""What the summariser is asked: the fixed sections, its instructions, and the conversation
rendered as text.

The summary is a handoff: another assistant continues the work from it alone. So the prompt
asks for fixed sections (the user's goal, their rules word for word, decisions, files, errors,
what is done and pending, the current step), whose headings the verification then looks for,
and shows the summariser each message as one text block, tool results cut (it needs to know
what happened, not whole outputs; the transcript keeps them in full).

Where the conversation's previous request is in the summariser's prompt cache, the summary is
asked for after it instead (`chatcli.compaction.warm`), in one final user turn that holds the
same instructions (`summary_turn`): the conversation is then what that request sent, not text.

Where the summariser's server can constrain its output to a JSON schema (`structured`), the
sections are asked for as one JSON object whose fields are the sections (`summary_schema`),
each a string of bounded length: a small model then cannot forget a heading or loop past its
output limit. The answer is rendered back to the same Markdown (`structured_summary`), so
the checks and the summary message are the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chatcli.history.text import cut_middle
from chatcli.messages import Message
from chatcli.providers.base import Request
from chatcli.request_settings import Settings

__all__ = [
    "STRUCTURED_PROMPT",
    "SUMMARY_SECTIONS",
    "SYSTEM_PROMPT",
    "render",
    "structured_summary",
    "summary_request",
    "summary_schema",
    "summary_turn",
]

SUMMARY_SECTIONS = (
    "User's goal",
    "Explicit instructions and constraints",
    "Decisions made",
    "Files and resources touched",
    "Errors and how they were solved",
    "Done and pending",
    "Current step",
)
# The summariser needs to know what happened, not whole outputs: each tool result is shown
# to it cut to this size (the transcript keeps them in full).
_RENDERED_RESULT_CHARS = 4000


def _markdown_prompt(headings: str) -> str:
    """The instructions for a Markdown summary, its section `headings` listed as given."""
    return (
        "You write handoff summaries of conversations between a user and an AI assistant. "
        "Another assistant will continue the work from your summary alone. Write only the "
        "summary, as Markdown with these sections in this order, keeping the headings exactly "
        "as written (in English):\n\n"
        + headings
        + "\n\nWrite the rest in the language of the conversation. Under 'Explicit instructions "
        "and constraints', quote every rule or instruction the user gave, word for word. Be "
        "specific: file paths, names, commands, numbers, exact error messages. No pleasantries. "
        "Do not answer the user or continue the conversation."
    )


SYSTEM_PROMPT = _markdown_prompt("\n".join(f"## {section}" for section in SUMMARY_SECTIONS))
# The same in a user turn (`summary_turn`), the headings on one line: a model that repeats
# its last turn instead of answering it then writes no heading the checks would count.
_TURN_PROMPT = _markdown_prompt("; ".join(f"## {section}" for section in SUMMARY_SECTIONS))


# What a structured summary's fields hold at most: chars per output token (text and JSON
# escapes; 2 is low for prose, so the whole object stays under the call's max_tokens), and
# the chars of the object's keys and punctuation.
_FIELD_CHARS_PER_TOKEN = 2
_OBJECT_CHARS = 400
_MIN_FIELD_CHARS = 80

STRUCTURED_PROMPT = (
    "You write handoff summaries of conversations between a user and an AI assistant. "
    "Another assistant will continue the work from your summary alone. Answer with one JSON "
    "object whose fields are the summary's sections: "
    + ", ".join(f'"{section}"' for section in SUMMARY_SECTIONS)
    + ". Fill each field with what the conversation says about it, in the language of the "
    "conversation; write 'None.' where it says nothing. In 'Explicit instructions and "
    "constraints', quote every rule or instruction the user gave, word for word. Be "
    "specific: file paths, names, commands, numbers, exact error messages. Do not answer the "
    "user or continue the conversation."
)


def summary_schema(summary_tokens: int) -> Mapping[str, Any]:
    """The JSON schema of a structured summary: one string field per section, each at most
    the share of `summary_tokens` that keeps the whole object within it."""
    room = summary_tokens * _FIELD_CHARS_PER_TOKEN - _OBJECT_CHARS
    chars = max(_MIN_FIELD_CHARS, room // len(SUMMARY_SECTIONS))
    field = {"type": "string", "minLength": 1, "maxLength": chars}
    return {
        "title": "handoff_summary",
        "type": "object",
        "properties": {section: field for section in SUMMARY_SECTIONS},
        "required": list(SUMMARY_SECTIONS),
        "additionalProperties": False,
    }


def structured_summary(text: str) -> str | None:
    """The Markdown summary a structured answer stands for: each section that has text, under
    its heading, in the sections' order; None when `text` holds no JSON object (the answer is
    then checked as it is)."""
    start, end = text.find("{"), text.rfind("}")
    try:
        value = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    sections = ((section, _field_text(value.get(section))) for section in SUMMARY_SECTIONS)
    return "\n\n".join(f"## {section}\n{body}" for section, body in sections if body)


def _field_text(value: object) -> str:
    """A field's text: a string, or a list of them as bullets (a model may answer either)."""
    if isinstance(value, list):
        return "\n".join(f"- {_field_text(item)}" for item in value if _field_text(item))
    return value.strip() if isinstance(value, str) else ""


def summary_request(
    body: str,
    summary_tokens: int,
    focus: str | None,
    *,
    merging: bool,
    part: tuple[int, int] | None = None,
    structured: bool = False,
) -> Request:
    """The request for one summary of `body` (conversation text, or the parts' summaries when
    `merging`); `part` is (its number, how many) when `body` is one chunk of several;
    `structured`: the sections asked for as a JSON object (`summary_schema`)."""
    if merging:
        intro = (
            "Below are summaries of consecutive parts of one conversation, oldest first. "
            "Merge them into one summary with the same sections; when they disagree, the "
            "later part wins. Keep every quoted user instruction."
        )
    else:
        intro = "Summarise this conversation."
    if part is not None:
        intro += (
            f" This is part {part[0]} of {part[1]}; summarise only this part, with the same "
            "sections (the parts' summaries are merged afterwards)."
        )
    text = f"{intro}{_focus(focus)}\n\n<conversation>\n{body}\n</conversation>"
    if not structured:
        messages = (Message.system(SYSTEM_PROMPT), Message.user(text))
        return Request(messages=messages, max_tokens=summary_tokens)
    messages = (Message.system(STRUCTURED_PROMPT), Message.user(text))
    settings = Settings(response_format=summary_schema(summary_tokens))
    return Request(messages=messages, max_tokens=summary_tokens, settings=settings)


def summary_turn(focus: str | None, *, structured: bool) -> Message:
    """The final user turn that asks for the summary of the conversation before it: the
    instructions the rendered request sends as its system prompt (`structured`: those of the
    JSON object; Markdown: its headings listed on one line), after a word that stops the
    conversation there."""
    instructions = STRUCTURED_PROMPT if structured else _TURN_PROMPT
    return Message.user(
        "The conversation above is being compacted: do not answer it, continue it or call a "
        f"tool. {instructions}\n\nSummarise the conversation above.{_focus(focus)}"
    )


def _focus(focus: str | None) -> str:
    return f"\nThe user asked the summary to focus on: {focus}" if focus else ""


def render(middle: tuple[Message, ...]) -> tuple[str, ...]:
    """One text block per message, as the summariser reads them."""
    names = {call.id: call.name for m in middle for call in m.tool_calls}
    return tuple(_render_one(m, names) for m in middle)


def _render_one(message: Message, names: dict[str, str]) -> str:
    result = message.tool_result
    if result is not None:
        error = ", error" if result.is_error else ""
        name = names.get(result.call_id, "tool")
        content = cut_middle(result.content, _RENDERED_RESULT_CHARS)
        return f"### Tool result ({name}, call {result.call_id}{error})\n{content}"
    lines = [f"### {message.role.value.capitalize()}", message.text]
    lines += [f"[calls {c.name} {c.arguments_json} (call {c.id})]" for c in message.tool_calls]
    return "\n".join(line for line in lines if line)
