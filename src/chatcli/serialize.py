"""Lossless JSON form of messages and usage, for the session store, exports and the proxy.

`message_from_dict(message_to_dict(m)) == m` for every message whose `provider_details` are
JSON values (tuples inside them come back as lists, which the adapters accept alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chatcli.messages import (
    Carried,
    CarriedItem,
    CompactionPart,
    Message,
    Role,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = ["message_from_dict", "message_to_dict", "usage_from_dict", "usage_to_dict"]


def message_to_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role.value}
    if message.parts:
        out["parts"] = [
            _drop_none({"text": p.text, "details": p.provider_details}) for p in message.parts
        ]
    if message.tool_calls:
        out["tool_calls"] = [_call_to_dict(c) for c in message.tool_calls]
    if message.tool_result is not None:
        r = message.tool_result
        out["tool_result"] = _drop_none(
            {
                "call_id": r.call_id,
                "content": r.content,
                "is_error": r.is_error or None,
                "details": r.provider_details,
            }
        )
    if message.provider_details is not None:
        out["details"] = message.provider_details
    if message.compaction is not None:
        c = message.compaction
        out["compaction"] = _drop_none(
            {
                "provider": c.provider,
                "model": c.model,
                "summary": c.summary or None,
                "details": c.provider_details,
                "keeps": c.keeps or None,
            }
        )
    if message.carried is not None:
        out["carried"] = _carried_to_dict(message.carried, message.text)
    return out


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message; a malformed mapping raises ValueError saying what is wrong."""
    try:
        result = data.get("tool_result")
        parts = tuple(
            TextPart(text=p["text"], provider_details=p.get("details"))
            for p in data.get("parts", ())
        )
        return Message(
            role=Role(data["role"]),
            parts=parts,
            tool_calls=tuple(_call_from_dict(c) for c in data.get("tool_calls", ())),
            tool_result=None
            if result is None
            else ToolResult(
                call_id=result["call_id"],
                content=result["content"],
                is_error=bool(result.get("is_error", False)),
                provider_details=result.get("details"),
            ),
            provider_details=data.get("details"),
            compaction=_compaction_from_dict(data.get("compaction")),
            carried=_carried_from_dict(data.get("carried"), "".join(p.text for p in parts)),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"not a chatcli message: {exc!r} in {dict(data)!r:.200}") from exc


def _compaction_from_dict(data: Mapping[str, Any] | None) -> CompactionPart | None:
    if data is None:
        return None
    return CompactionPart(
        provider=data["provider"],
        model=data["model"],
        summary=data.get("summary", ""),
        provider_details=data["details"],
        keeps=int(data.get("keeps", 0)),
    )


def _carried_to_dict(carried: Carried, text: str) -> dict[str, Any]:
    """The carried items, each `[number, kind, start, end]`: its sentence is `text[start:end]`
    (the message's text shows every item; stored once, not twice), or `[number, kind,
    sentence]` when the text does not hold it; then the numbers it replaces, if any."""
    items: list[list[Any]] = []
    at = 0
    for item in carried.items:
        start = text.find(item.text, at)
        where: list[Any] = [item.text] if start < 0 else [start, start + len(item.text)]
        at = at if start < 0 else start + len(item.text)
        replaces = [list(item.replaces)] if item.replaces else []
        items.append([item.number, item.kind, *where, *replaces])
    return _drop_none({"items": items, "left_out": carried.left_out or None})


def _carried_from_dict(data: Mapping[str, Any] | None, text: str) -> Carried | None:
    if data is None:
        return None
    items: list[CarriedItem] = []
    for number, kind, *rest in data["items"]:
        spanned = len(rest) >= 2 and isinstance(rest[0], int)
        sentence = text[rest[0] : rest[1]] if spanned else rest[0]
        replaces = rest[2 if spanned else 1 :]
        items.append(
            CarriedItem(
                number=None if number is None else int(number),
                kind=kind,
                text=sentence,
                replaces=tuple(int(n) for n in (replaces[0] if replaces else ())),
            )
        )
    return Carried(items=tuple(items), left_out=int(data.get("left_out", 0)))


def usage_to_dict(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }


def usage_from_dict(data: Mapping[str, Any]) -> Usage:
    return Usage(**{k: int(data.get(k, 0)) for k in usage_to_dict(Usage())})


def _call_to_dict(call: ToolCall) -> dict[str, Any]:
    return _drop_none(
        {
            "id": call.id,
            "name": call.name,
            "arguments": dict(call.arguments),
            "incomplete": call.incomplete or None,
            "details": call.provider_details,
        }
    )


def _call_from_dict(data: Mapping[str, Any]) -> ToolCall:
    return ToolCall(
        id=data["id"],
        name=data["name"],
        arguments=data.get("arguments", {}),
        incomplete=bool(data.get("incomplete", False)),
        provider_details=data.get("details"),
    )


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}
