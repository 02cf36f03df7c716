"""The tool-result budget: the first line of defence, applied to every request.

Each tool result is cut to at most `per_result_chars`, and the results of one turn together
to at most `per_turn_chars`. Cuts keep the head and the tail with a marker in between
(`cut_middle`); the full text stays in the session store.

A *turn* is one batch of tool calls: the tool results that follow one assistant message, up
to the next assistant message. That is the unit that enters the context at once (Anthropic
carries it in one user message, OpenAI as consecutive tool messages), so bounding it bounds
how much one step of an agent can add. A wider unit, e.g. everything between two user
messages, would make an agent that runs a hundred steps on one request shred the results it is
still working from; growth across steps is the job of microcompaction and the recovery levels.

Within a turn over budget, the largest results are cut first, and only as far as needed: all
results longer than a common cap are cut to that cap, the largest cap for which the turn
fits ("water-filling"). Small results, often the decisive ones (an exit code, an error), stay
whole, and no result is cut shorter than another that was cut.

Invariants: only tool-result content changes (`call_id`, `is_error`, `provider_details` and
every other message are kept); no result grows; message count and order are unchanged; each
result is at most `per_result_chars` and each turn at most `per_turn_chars`, as long as the
caps leave room for the marker (`MIN_CUT_CHARS` per result); pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import cast

from chatcli.history.result import TransformResult, build_result
from chatcli.history.scan import ScanMemos, run_scan, unchanged
from chatcli.history.text import cut_middle
from chatcli.messages import Message, Role

__all__ = ["enforce_tool_result_budget", "turn_cap", "turns"]

_NAME = "tool-result budget"
# A cut result: its place, the cut message, its report line and the chars it freed.
_Cut = tuple[int, Message, str, int]


def enforce_tool_result_budget(
    messages: Sequence[Message],
    *,
    per_result_chars: int,
    per_turn_chars: int,
    memos: ScanMemos | None = None,
) -> TransformResult:
    """Cut tool results to `per_result_chars` each and `per_turn_chars` per turn.

    A turn's cuts depend only on that turn, so they are final once the next assistant message
    closes it; with `memos` (its caller's) the scan is memoised by transcript prefix
    (`chatcli.history.scan`): a request costs what was appended since the last one.
    """
    if per_result_chars < 1 or per_turn_chars < 1:
        raise ValueError(
            f"budgets must be positive: per_result_chars={per_result_chars}, "
            f"per_turn_chars={per_turn_chars}"
        )
    return run_scan(memos, _Scan, (per_result_chars, per_turn_chars), tuple(messages))


class _Scan:
    """The budget of one transcript prefix. Mutable, private; see `chatcli.history.scan`."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.per_result, self.per_turn = cast(tuple[int, int], key)
        self.messages: list[Message] = []
        self.chars = [0]  # chars of the first n messages read, for each n
        self.cut: dict[int, _Cut] = {}  # the cuts of closed turns, in message order
        self.assistants: list[int] = []  # where the assistant messages are (turn boundaries)
        self.open: list[int] = []  # the tool messages of the latest turn, still growing

    def push(self, message: Message) -> None:
        self.chars.append(self.chars[-1] + message.char_count)
        if message.role is Role.ASSISTANT:
            self.cut.update((cut[0], cut) for cut in self.cuts(self.open))
            self.assistants.append(len(self.messages))
            self.open = []
        elif message.role is Role.TOOL:
            self.open.append(len(self.messages))
        self.messages.append(message)

    def rewind(self, count: int) -> bool:
        del self.messages[count:], self.chars[count + 1 :]
        while self.assistants and self.assistants[-1] >= count:
            self.assistants.pop()
        start = self.assistants[-1] if self.assistants else -1  # the latest turn follows it
        self.cut = {index: cut for index, cut in self.cut.items() if index < start}
        self.open = [i for i in range(start + 1, count) if self.messages[i].role is Role.TOOL]
        return True

    def cuts(self, turn: list[int]) -> list[_Cut]:
        """The cuts of a turn: its results over the turn's common cap."""
        lengths = [len(self.messages[i].text) for i in turn]
        cap = turn_cap(lengths, self.per_result, self.per_turn)
        cuts = []
        for index, length in zip(turn, lengths, strict=True):
            if length > cap:
                old = self.messages[index]
                new = old.with_text(cut_middle(old.text, cap))
                cuts.append((index, new, _cut_line(old, new), length - len(new.text)))
        return cuts

    def result(self, transcript: tuple[Message, ...]) -> TransformResult:
        cuts = [*self.cut.values(), *self.cuts(self.open)]
        if not cuts:
            return unchanged(_NAME, transcript, self.chars[-1])
        out = list(transcript)
        for index, new, _, _ in cuts:
            out[index] = new
        return build_result(
            _NAME,
            transcript,
            tuple(out),
            cut=[line for _, _, line, _ in cuts],
            chars_freed=sum(freed for _, _, _, freed in cuts),
            chars_before=self.chars[-1],
        )


def turns(messages: Sequence[Message]) -> list[list[int]]:
    """Indices of the tool messages of each turn: those after one assistant message."""
    groups: list[list[int]] = [[]]
    for index, message in enumerate(messages):
        if message.role is Role.ASSISTANT:
            groups.append([])
        elif message.role is Role.TOOL:
            groups[-1].append(index)
    return [group for group in groups if group]


def turn_cap(lengths: Sequence[int], per_result: int, per_turn: int) -> int:
    """The largest cap <= `per_result` at which results of `lengths` sum to <= `per_turn`."""
    capped = sorted(min(length, per_result) for length in lengths)
    remaining = per_turn
    for kept, length in enumerate(capped):
        share = remaining // (len(capped) - kept)
        if length > share:
            # This and every longer result get an equal share of what is left.
            return share
        remaining -= length
    return per_result


def _cut_line(old: Message, new: Message) -> str:
    call_id = old.tool_result.call_id if old.tool_result else "?"
    return f"tool result for call {call_id!r}: {len(old.text):,} -> {len(new.text):,} chars"
