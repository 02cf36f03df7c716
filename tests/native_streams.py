"""Stream events of a whole provider answer, as each API streams one, for replaying an answer
of tests/data/native-compaction.json streamed.

Anthropic (the Messages API's events, the SDK's `BetaRawMessageStreamEvent` types): a
compaction block starts with its content null, every other field of it (its signature, tool
changes) in the start, and gets its `content` and `encrypted_content` in one
`compaction_delta` (`BetaCompactionContentBlockDelta`, which the SDK's accumulator reads for
exactly those two fields); text in one `text_delta`; usage (iterations included) in
`message_delta`. OpenAI (the Responses API's events, `ResponseStreamEvent`): each output item
added then done (a message's text in one delta), then `response.completed` with the whole
response.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["anthropic_events", "openai_events"]


def anthropic_events(message: dict[str, Any]) -> list[tuple[str, str]]:
    """`message` as the Messages API streams it (module docstring)."""
    head = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 0}}
    events: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": head})]
    for index, block in enumerate(message["content"]):
        start, delta = _block_events(block)
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        ("message_delta", {"type": "message_delta", "delta": stop, "usage": message["usage"]}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [(name, json.dumps(data)) for name, data in events]


def _block_events(block: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A block's `content_block_start` block and its one delta."""
    if block["type"] != "compaction":
        return {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
    moved = ("content", "encrypted_content")
    delta = {"type": "compaction_delta", **{k: block[k] for k in moved if k in block}}
    return {**{k: v for k, v in block.items() if k not in moved}, "content": None}, delta


def openai_events(response: dict[str, Any]) -> list[str]:
    """`response` as the Responses API streams it (module docstring)."""
    head = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": head}]
    for index, item in enumerate(response["output"]):
        added = item if item["type"] != "message" else {**item, "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    numbered = [{**event, "sequence_number": n} for n, event in enumerate(events)]
    return [json.dumps(event) for event in numbered]
