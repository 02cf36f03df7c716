"""/compact and auto-compaction: an LLM handoff summary of the middle of a conversation.

- `run`: `compact` / `acompact`, one compaction from the conversation to a verified view.
- `auto`: auto-compaction (`should_auto_compact`, `auto_compact`) and its `CompactionBreaker`.
- `plan`: what a compaction resolves once, and how it splits and chunks the conversation.
- `summarise`: the summary calls: chunking and merging, retries, a summary call's overflow.
- `warm`: the summary call on the prompt cache: after the conversation's previous request
  (`previous`: `PreviousRequest`, and `SentRequest`, what a send sent last).
- `prompt`: the summariser's sections, instructions and rendering of the conversation.
- `summary`: the summary message in the view (`SUMMARY_HEADER`, the pinned block).
- `verify`: the summary's and the new view's checks, and what must be pinned.
- `shrink`: a conversation over the budget shrunk before it is split.
- `fallback`: the deterministic recovery levels when the summary failed.
- `drive`: the sync and async drivers of the steps' model calls.
- `report`: `CompactionReport`, `CompactionResult`.
"""

from chatcli.compaction.auto import (
    AutoCompaction,
    CompactionBreaker,
    aauto_compact,
    auto_compact,
    should_auto_compact,
)
from chatcli.compaction.previous import PreviousRequest, SentRequest
from chatcli.compaction.prompt import SUMMARY_SECTIONS
from chatcli.compaction.report import CompactionReport, CompactionResult
from chatcli.compaction.run import acompact, compact
from chatcli.compaction.shrink import MEDIA_MARKER
from chatcli.compaction.summarise import MAX_MERGE_LEVELS, MAX_SUMMARY_RETRIES
from chatcli.compaction.summary import SUMMARY_HEADER, is_summary_message
from chatcli.history.instructions import extract_instructions

__all__ = [
    "MAX_MERGE_LEVELS",
    "MAX_SUMMARY_RETRIES",
    "MEDIA_MARKER",
    "SUMMARY_HEADER",
    "SUMMARY_SECTIONS",
    "AutoCompaction",
    "CompactionBreaker",
    "CompactionReport",
    "CompactionResult",
    "PreviousRequest",
    "SentRequest",
    "aauto_compact",
    "acompact",
    "auto_compact",
    "compact",
    "extract_instructions",
    "is_summary_message",
    "should_auto_compact",
]
