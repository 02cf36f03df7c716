"""The full transcript of a session as Markdown (to read) or JSON (lossless, to process).

Both hold every message in full, whatever recovery or compaction did to the working view;
JSON uses `chatcli.serialize`, so `message_from_dict` reads its messages back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from chatcli.messages import Message, Role
from chatcli.serialize import message_to_dict
from chatcli.store import SessionInfo

__all__ = ["FORMATS", "export_transcript", "transcript_json", "transcript_markdown"]

FORMATS = ("md", "json")
_TITLES = {Role.SYSTEM: "System", Role.USER: "User", Role.ASSISTANT: "Assistant", Role.TOOL: "Tool"}


def export_transcript(info: SessionInfo, messages: Sequence[Message], fmt: str) -> str:
    """The transcript in format `fmt` ("md" or "json")."""
    if fmt == "md":
        return transcript_markdown(info, messages)
    if fmt == "json":
        return transcript_json(info, messages)
    raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")


def transcript_markdown(info: SessionInfo, messages: Sequence[Message]) -> str:
    model = " · ".join(x for x in (info.provider, info.model) if x)
    lines = [f"# chatcli session {info.id}", "", f"Started {info.created_at}. {model}".rstrip()]
    for number, message in enumerate(messages, 1):
        lines += ["", f"## {number}. {_TITLES[message.role]}", "", *_body(message)]
    return "\n".join(lines) + "\n"


def _body(message: Message) -> list[str]:
    out: list[str] = []
    if message.tool_result is not None:
        error = " (error)" if message.tool_result.is_error else ""
        out.append(f"Result of call `{message.tool_result.call_id}`{error}:")
        return [*out, "", _fenced(message.text)]
    if message.text:
        out.append(message.text)
    for call in message.tool_calls:
        out += ["", f"Tool call `{call.name}` (`{call.id}`):", "", _fenced(call.arguments_json)]
    return out


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:  # a fence longer than any run of backticks inside
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def transcript_json(info: SessionInfo, messages: Sequence[Message]) -> str:
    body = {"session": asdict(info), "messages": [message_to_dict(m) for m in messages]}
    return json.dumps(body, ensure_ascii=False, indent=2) + "\n"
