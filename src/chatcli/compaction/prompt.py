"""What the summariser is asked: the fixed sections, its instructions, and the conversation
rendered as text.

The summary is a handoff: another assistant continues the work from it alone. So the prompt
asks for fixed sections (the user's goal, their rules word for word, decisions, files, errors,
what is done and pending, the current step), whose headings the verification then looks for,
and shows the summariser each message as one text block, tool results cut (it needs to know
what happened, not whole outputs; the transcript keeps them in full).
"""

from __future__ import annotations

from chatcli.history.text import cut_middle
from chatcli.messages import Message
from chatcli.providers.base import Request

__all__ = ["SUMMARY_SECTIONS", "SYSTEM_PROMPT", "render", "summary_request"]

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

SYSTEM_PROMPT = (
    "You write handoff summaries of conversations between a user and an AI assistant. "
    "Another assistant will continue the work from your summary alone. Write only the "
    "summary, as Markdown with these sections in this order, keeping the headings exactly as "
    "written (in English):\n\n"
    + "\n".join(f"## {section}" for section in SUMMARY_SECTIONS)
    + "\n\nWrite the rest in the language of the conversation. Under 'Explicit instructions "
    "and constraints', quote every rule or instruction the user gave, word for word. Be "
    "specific: file paths, names, commands, numbers, exact error messages. No pleasantries. "
    "Do not answer the user or continue the conversation."
)


def summary_request(
    body: str,
    summary_tokens: int,
    focus: str | None,
    *,
    merging: bool,
    part: tuple[int, int] | None = None,
) -> Request:
    """The request for one summary of `body` (conversation text, or the parts' summaries when
    `merging`); `part` is (its number, how many) when `body` is one chunk of several."""
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
    if focus:
        intro += f"\nThe user asked the summary to focus on: {focus}"
    text = f"{intro}\n\n<conversation>\n{body}\n</conversation>"
    messages = (Message.system(SYSTEM_PROMPT), Message.user(text))
    return Request(messages=messages, max_tokens=summary_tokens)


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
