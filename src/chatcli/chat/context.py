"""What the next request will send, message by message: the data behind the CLI's /context.

The view is computed by the recovery policy itself, dry (its first `Send`, never sent), so it
is exactly what `Client` would send now: microcompaction, budget, pairing and, when the
estimate does not fit the window, the pre-flight recovery level. Each transcript message then
gets a status, and its detail names the transform that made it so:

- `verbatim`: sent as it is;
- `cut`: sent shortened (by what made the working view, microcompaction, the tool-result
  budget, or this request's recovery level);
- `cleared`: an old tool result replaced by a one-line stub (microcompaction);
- `only in transcript`: not sent (dropped by what made the working view or by this request's
  level), still stored in full;
- `added`: not from the transcript (a compaction summary, a recovery notice, the carried
  instructions, a synthetic tool result), with what added it.

The working view is the transcript after what `made_by` names (a compaction, a /clear, an
earlier request's level, kept: its events were shown when it ran); the report tells its cuts
from those of this request's transforms, each of which it runs itself and whose events are
its notes. Messages are matched to their origin in order, by role and identity (tool call
ids) or the head of their text, which every cut keeps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chatcli.compaction import is_summary_message
from chatcli.events import Event, LevelApplied
from chatcli.history.carry import KINDS, CarriedItem, Numbering, carried_items
from chatcli.history.microcompact import STUB_PREFIX
from chatcli.history.retain import cut_message_number
from chatcli.history.truncate import is_compaction_notice
from chatcli.messages import Carried, Message, Role
from chatcli.recovery import RecoveryPolicy, Send
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["ContextReport", "ContextRow", "Status", "build_context_report"]

# Characters of text that identify a message's origin (every cut keeps the head).
_HEAD = 32
_PREVIEW = 60


class Status:
    VERBATIM = "verbatim"
    CUT = "cut"
    CLEARED = "cleared"
    ONLY_IN_TRANSCRIPT = "only in transcript"
    ADDED = "added"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One message: its transcript position (1-based; None when added), role, estimated
    tokens as sent (as stored, for a message not sent), status, why, and a preview."""

    position: int | None
    role: Role
    tokens: int
    status: str
    detail: str
    preview: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextReport:
    """The next request's view: rows in conversation order, its estimated size, the output
    reserve (max_tokens), the window (None: unknown), the recovery it needs (its level and
    events' lines), what made the working view it starts from ("": the transcript), and the
    instructions the view carries from removed user messages, whole (`carried`, and how many
    the block says were left out: `chatcli.history.carry.carried_items`)."""

    rows: tuple[ContextRow, ...]
    tokens: int
    reserve: int
    window: int | None
    level: int
    notes: tuple[str, ...]
    made_by: str = ""
    carried: tuple[CarriedItem, ...] = ()
    carried_left_out: int = 0

    @property
    def fraction(self) -> float | None:
        """Estimated prompt tokens / window (above 1.0: over), None when unknown."""
        return None if not self.window else self.tokens / self.window


def build_context_report(
    transcript: Sequence[Message],
    working: Sequence[Message],
    policy: RecoveryPolicy,
    *,
    max_tokens: int | None,
    made_by: str = "",
) -> ContextReport:
    """The report for sending `working` (derived from `transcript` by what `made_by` names;
    "": nothing, or not known) under `policy`."""
    events: list[Event] = []
    # Microcompaction changes no message's place: `micro[i]` is `working[i]`, shrunk. The
    # policy's microcompaction is idempotent, so the flows given `micro` send what `Client`
    # sends given `working`.
    micro = policy.apply_microcompaction(working, Numbering(transcript))
    # The same policy without pre-flight recovery: what the budget alone makes of the view
    # (so a cut can be told apart from a level's). Every other setting is the session's.
    plain = _first_view(replace(policy, predictive=False), micro, max_tokens, transcript)
    view = _first_view(policy, micro, max_tokens, transcript, events.append)
    level = max((e.level for e in events if isinstance(e, LevelApplied)), default=0)
    stages = _Stages(
        transcript=tuple(transcript),
        working=tuple(working),
        micro=micro,
        plain=plain,
        level=level,
        made_by=made_by,
    )
    rows = _rows(stages, view, policy.estimator)
    carried, left_out = carried_items(view)
    return ContextReport(
        rows=rows,
        tokens=policy.estimator.count(view),
        reserve=max_tokens or 0,
        window=policy.context_window,
        level=level,
        notes=tuple(e.describe() for e in events),
        made_by=made_by,
        carried=carried,
        carried_left_out=left_out,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stages:
    """The messages at each stage before the view: the transcript, the working view (what
    `made_by` made of it), the working view microcompacted, and what the budget alone makes
    of that (`plain`); `level` is this request's recovery level (0: none)."""

    transcript: tuple[Message, ...]
    working: tuple[Message, ...]
    micro: tuple[Message, ...]
    plain: tuple[Message, ...]
    level: int
    made_by: str

    @property
    def earlier(self) -> str:
        """What made the working view, as a row's detail says it."""
        return self.made_by or "an earlier compaction or /clear"


def _first_view(
    policy: RecoveryPolicy,
    messages: Sequence[Message],
    max_tokens: int | None,
    transcript: Sequence[Message],
    emit: Callable[[Event], None] = lambda event: None,
) -> tuple[Message, ...]:
    """The view `policy` sends first; its markers name `transcript`'s message numbers."""
    flow = policy.flow(messages, max_tokens=max_tokens, emit=emit, history=transcript)
    try:
        action = next(flow)
    finally:
        flow.close()
    assert isinstance(action, Send), "a flow's first action is a Send"
    return action.request.messages


def _rows(
    stages: _Stages, view: Sequence[Message], estimator: TokenEstimator
) -> tuple[ContextRow, ...]:
    """Rows keyed by transcript position; added messages follow the one before them."""
    transcript, working = stages.transcript, stages.working
    to_transcript = _align(transcript, working, numbered=True)
    plain_of = _align(stages.micro, stages.plain)
    sent = _align(stages.micro, view)
    keyed: list[tuple[tuple[int, int], ContextRow]] = []
    in_view: set[int] = set()
    plain_by_working = {w: p for p, w in enumerate(plain_of) if w is not None}
    last = -1
    for k, message in enumerate(view):
        w = sent[k]
        t = to_transcript[w] if w is not None else None
        tokens = estimator.count((message,))
        if t is None:
            detail = _added(message, stages, from_working=w is not None)
            keyed.append(((last, k + 1), _row(None, message, tokens, Status.ADDED, detail)))
            continue
        in_view.add(t)
        last = t
        assert w is not None
        budgeted = stages.plain[plain_by_working[w]] if w in plain_by_working else None
        status, detail = _sent_status(stages, t, w, budgeted, message)
        keyed.append(((t, 0), _row(t + 1, message, tokens, status, detail)))
    in_working = {t for t in to_transcript if t is not None}
    for t, message in enumerate(transcript):
        if t not in in_view:
            by = f"level {stages.level}" if t in in_working else stages.earlier
            row = _row(
                t + 1,
                message,
                estimator.count((message,)),
                Status.ONLY_IN_TRANSCRIPT,
                f"dropped by {by}",
            )
            keyed.append(((t, 0), row))
    return tuple(row for _, row in sorted(keyed, key=lambda item: item[0]))


def _sent_status(
    stages: _Stages, t: int, w: int, budgeted: Message | None, sent: Message
) -> tuple[str, str]:
    """The status of transcript message `t`, sent as `sent` from working message `w`, and
    the transform that made it so: the first stage at which it changed."""
    original, working, micro = stages.transcript[t], stages.working[w], stages.micro[w]
    if sent == original:
        return Status.VERBATIM, ""
    if sent.tool_result is not None and sent.text.startswith(STUB_PREFIX):
        return Status.CLEARED, "old tool result, stubbed by microcompaction"
    if working != original:
        return Status.CUT, stages.earlier
    if micro != working:
        return Status.CUT, "microcompaction"
    if budgeted is not None and budgeted != micro:
        return Status.CUT, "tool-result budget"
    return Status.CUT, f"level {stages.level}" if stages.level else "cut"


def _added(message: Message, stages: _Stages, *, from_working: bool) -> str:
    """What added `message`: what made the working view when it holds it, else this
    request's level (or pairing repair)."""
    by = stages.earlier if from_working else f"level {stages.level}"
    if is_summary_message(message):
        return "compaction summary"
    if is_compaction_notice(message):
        return f"compaction notice ({by})"
    if message.carried is not None:
        return f"carried instructions: {_what_is_carried(message.carried)} ({by})"
    if message.tool_result is not None:
        return "synthetic tool result (pairing repair)"
    return f"added by {by}"


def _what_is_carried(carried: Carried) -> str:
    """What the block holds, from its items: "2 rules, 1 fact" (and how many were left out)."""
    counts = Counter(item.kind for item in carried.items)
    said = [f"{counts[k]} {k}{'' if counts[k] == 1 else 's'}" for k in KINDS if counts[k]]
    if carried.left_out:
        said.append(f"{carried.left_out:,} left out")
    return ", ".join(said)


def _row(
    position: int | None, message: Message, tokens: int, status: str, detail: str
) -> ContextRow:
    return ContextRow(
        position=position,
        role=message.role,
        tokens=tokens,
        status=status,
        detail=detail,
        preview=_preview(message),
    )


def _preview(message: Message) -> str:
    calls = " ".join(f"-> {c.name}()" for c in message.tool_calls)
    text = " ".join(message.text.split())
    joined = f"{text} {calls}".strip()
    return joined if len(joined) <= _PREVIEW else joined[: _PREVIEW - 1] + "…"


def _align(
    source: Sequence[Message], target: Sequence[Message], *, numbered: bool = False
) -> list[int | None]:
    """For each target message, the index of its origin in `source` (None: added). Order is
    preserved: origins are searched after the previous match. `numbered`: `source` is the
    transcript, whose number a cut's marker may name (a cut to its bare marker keeps no head)."""
    out: list[int | None] = []
    start = 0
    for message in target:
        number = cut_message_number(message.text) if numbered else None
        if number is not None and start < number <= len(source):
            found: int | None = number - 1
        else:
            found = next(
                (i for i in range(start, len(source)) if _same_origin(source[i], message)), None
            )
        out.append(found)
        if found is not None:
            start = found + 1
    return out


def _same_origin(source: Message, derived: Message) -> bool:
    if source.role is not derived.role:
        return False
    if source == derived:
        return True
    number = cut_message_number(derived.text)
    if number is not None and number == cut_message_number(source.text):
        return True  # a cut of a cut
    if source.tool_result is not None and derived.tool_result is not None:
        return source.tool_result.call_id == derived.tool_result.call_id
    if tuple(c.id for c in source.tool_calls) != tuple(c.id for c in derived.tool_calls):
        return False
    a, b = source.text, derived.text
    n = min(_HEAD, len(a), len(b))
    return a[:n] == b[:n] and (n > 0 or a == b)
