"""A chat session: the full transcript in the store, the working view, one recovered call per
turn, compaction, cost and the session budget. The chatcli command and the demo drive it; it
does no terminal I/O (callbacks receive events and streamed text).

The transcript is append-only and complete: the user's message is stored before the call, the
answer right after it. The working view sent to the model is `base + transcript[upto:]`,
where `base` is the view a compaction (or /clear) left, shaped by `Client` on every request:
microcompaction, the tool-result budget, pairing repair and the recovery levels. Compactions
and clears are stored as events holding the view they made, so a resumed session rebuilds
the same working view from the transcript and the events.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from chatcli.catalog import ModelInfo
from chatcli.compaction import CompactionBreaker, CompactionResult, auto_compact, compact
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.context_report import ContextReport, build_context_report
from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.cost import CallKind, CostLedger, usage_cost
from chatcli.errors import CompactionError
from chatcli.events import Event
from chatcli.messages import Message, StopReason, Usage
from chatcli.providers.base import Provider, Request, Response, StreamChunk, TextDelta, ToolSpec
from chatcli.recovery import Client, RecoveryPolicy, Reply
from chatcli.serialize import message_from_dict, message_to_dict
from chatcli.store import SessionInfo, SessionStore, StoredRequest
from chatcli.tokens import TokenEstimator

__all__ = [
    "BUDGET_WARN_FRACTION",
    "CANCELLED_NOTE",
    "COMPACTION_TAGS",
    "BudgetCheck",
    "CallRecord",
    "ChatSession",
    "CostSummary",
    "ModelTally",
    "StreamingTap",
    "Turn",
    "check_budget",
    "usd",
]

CANCELLED_NOTE = "[answer cancelled by the user]"
# Tags of the stored requests that are compactions (a failed one was paid for too).
COMPACTION_TAGS = ("compaction", "compaction-failed")
BUDGET_WARN_FRACTION = 0.8
# Event kinds that reset the working view; their data holds it ("view") and the transcript
# length it covers ("upto").
_VIEW_EVENTS = ("compaction", "clear")

DeltaHook = Callable[[str], None]
EventHook = Callable[[Event], None]


# --------------------------------------------------------------------------- provider tap


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One provider call: why it was made (answer, continuation, failed) and its usage."""

    kind: CallKind
    usage: Usage


class StreamingTap:
    """A Provider around `inner`: streams answers to `on_delta` (when set and `inner` can
    stream) and records every call, so a turn's cost can be split into answer and recovery.

    `on_discard` is called when a call fails after streaming some text (that text is not
    part of the answer). A call the user cancelled (KeyboardInterrupt) is recorded too, with
    whatever usage its stream had reported, and its text is kept.
    """

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.on_delta: DeltaHook | None = None
        self.on_discard: Callable[[], None] | None = None
        self.calls: list[CallRecord] = []
        self._reported: Usage | None = None  # the usage the current call's stream reported
        # The last prompt the provider counted: (messages sent, prompt tokens it reported).
        self.last_prompt: tuple[tuple[Message, ...], int] | None = None

    @property
    def context_window(self) -> int | None:
        return _int_attr(self.inner, "context_window")

    @property
    def max_output_tokens(self) -> int | None:
        return _int_attr(self.inner, "max_output_tokens")

    def complete(self, request: Request) -> Response:
        kind = _call_kind(request)
        self._reported = None
        try:
            response = self._call(request)
        except BaseException as exc:  # a cancelled call may have been billed too
            self.calls.append(CallRecord(kind=CallKind.FAILED, usage=self._reported or Usage()))
            if isinstance(exc, Exception) and self.on_discard is not None:
                self.on_discard()
            raise
        if response.stop_reason is StopReason.CONTEXT_WINDOW:
            kind = CallKind.FAILED  # the window filled up: this answer is thrown away
            if self.on_discard is not None:
                self.on_discard()
        self.calls.append(CallRecord(kind=kind, usage=response.usage))
        if response.usage.prompt_tokens > 0:
            self.last_prompt = (request.messages, response.usage.prompt_tokens)
        return response

    async def acomplete(self, request: Request) -> Response:
        return await asyncio.to_thread(self.complete, request)

    def _call(self, request: Request) -> Response:
        stream = getattr(self.inner, "stream", None)
        if self.on_delta is None or stream is None:
            return self.inner.complete(request)
        chunks: Iterator[StreamChunk] = stream(request)
        final: Response | None = None
        for chunk in chunks:
            if isinstance(chunk, TextDelta):
                self.on_delta(chunk.text)
            elif isinstance(chunk, Response):  # tool-call deltas show in the final answer
                final, self._reported = chunk, chunk.usage
        if final is None:
            raise RuntimeError("the stream ended without a response")
        return final


def _int_attr(obj: object, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _call_kind(request: Request) -> CallKind:
    last = request.messages[-1] if request.messages else None
    is_continuation = last is not None and last.text == CONTINUATION_MESSAGE
    return CallKind.CONTINUATION if is_continuation else CallKind.ANSWER


# --------------------------------------------------------------------------- cost + budget


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTally:
    """Requests, tokens and cost of one model in a session (`cost` None: partly unknown), and
    the parts of it that were overhead: recovery (failed and continuation calls) and
    compaction (summary calls, including those of failed compactions)."""

    requests: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    recovery_cost: float | None = 0.0
    compaction_cost: float | None = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSummary:
    """A session's cost from its stored requests (so a resumed session shows all of it)."""

    requests: tuple[StoredRequest, ...]

    @property
    def total(self) -> ModelTally:
        return _tally(self.requests)

    @property
    def known_cost(self) -> float:
        """The sum of the known costs: what is surely spent (a lower bound when any is
        unknown)."""
        return sum(r.cost_usd for r in self.requests if r.cost_usd is not None)

    def by_model(self) -> dict[str, ModelTally]:
        models = dict.fromkeys(r.model or "?" for r in self.requests)
        return {m: _tally([r for r in self.requests if (r.model or "?") == m]) for m in models}


def _tally(requests: Sequence[StoredRequest]) -> ModelTally:
    return ModelTally(
        requests=len(requests),
        usage=sum((r.usage for r in requests), Usage()),
        cost=_sum_known(r.cost_usd for r in requests),
        recovery_cost=_sum_known(r.recovery_cost_usd for r in requests),
        compaction_cost=_sum_known(r.cost_usd for r in requests if r.tag in COMPACTION_TAGS),
    )


def _sum_known(values: Iterator[float | None] | Sequence[float | None]) -> float | None:
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCheck:
    """Where a request stands against the session budget.

    `status`: "ok"; "warn" (spending passed `BUDGET_WARN_FRACTION` of the budget); "over"
    (this request would go past it: ask first); "unknown" (the next request's price is
    unknown, so the budget cannot be enforced).
    """

    status: str
    spent: float
    next_cost: float | None
    budget: float

    @property
    def message(self) -> str:
        spent = f"{usd(self.spent)} of the {usd(self.budget)} session budget spent"
        if self.status == "over":
            cost = "?" if self.next_cost is None else usd(self.next_cost)
            return f"{spent}; the next request (about {cost}) would go past it"
        if self.status == "unknown":
            return f"{spent}; the model's price is unknown, so the budget cannot be enforced"
        return f"{spent} ({self.spent / self.budget:.0%})"


def usd(value: float) -> str:
    """Dollars, with two significant digits below $1: a $0.005 budget is not "$0.00"."""
    if value <= 0 or value >= 1:
        return f"${value:.2f}"
    decimals = max(2, 1 - math.floor(math.log10(value)))
    whole, _, cents = f"{value:.{decimals}f}".partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"


def check_budget(spent: float, next_cost: float | None, budget: float) -> BudgetCheck:
    """Pure: the budget status before a request estimated to cost `next_cost` (None:
    unknown), with `spent` already spent."""
    if spent >= budget or (next_cost is not None and spent + next_cost > budget):
        status = "over"
    elif next_cost is None:
        status = "unknown"
    elif spent + next_cost >= BUDGET_WARN_FRACTION * budget:
        status = "warn"
    else:
        status = "ok"
    return BudgetCheck(status=status, spent=spent, next_cost=next_cost, budget=budget)


# --------------------------------------------------------------------------- the session


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One answered request: the Reply, its stored id, and its cost (None: unknown)."""

    reply: Reply
    request_id: int
    cost: float | None
    recovery_cost: float | None
    calls: tuple[CallRecord, ...]


class ChatSession:
    """One conversation, bound to a store and a provider. Not thread-safe: one turn at a time.

    `model_info` gives prices and limits (None: unknown). `max_tokens` None lets the provider
    choose. `budget_usd` enables the session budget (see `budget_check`). `auto_compaction`
    compacts before a request that passes the configured share of the window; `predictive`
    is `Client`'s (False: the SPEC's plain ladder, every level sent in turn). `summarizer`
    writes compaction summaries (default: the chat provider). `saved` False: `info` is not
    in the store yet; it is stored with the first thing written (an empty session is never
    stored, so it is never listed nor continued).
    """

    def __init__(
        self,
        store: SessionStore,
        info: SessionInfo,
        provider: Provider,
        *,
        model: str,
        model_info: ModelInfo | None = None,
        max_tokens: int | None = None,
        recovery: RecoveryConfig | None = None,
        compaction: CompactionConfig | None = None,
        microcompaction: MicrocompactConfig | None = None,
        budget_usd: float | None = None,
        tools: Sequence[ToolSpec] = (),
        auto_compaction: bool = True,
        predictive: bool = True,
        summarizer: Provider | None = None,
        saved: bool = True,
    ) -> None:
        self.store, self.info, self.saved = store, info, saved
        self.model, self.model_info, self.max_tokens = model, model_info, max_tokens
        self.tap = StreamingTap(provider)
        self.recovery = recovery or RecoveryConfig()
        self.compaction = compaction or CompactionConfig()
        self.microcompaction = microcompaction or MicrocompactConfig()
        self.budget_usd, self.budget_approved = budget_usd, False
        self.tools = tuple(tools)
        self.auto_compaction, self.predictive = auto_compaction, predictive
        self.summarizer = summarizer
        self.estimator = TokenEstimator()
        self.breaker = CompactionBreaker.from_config(self.compaction)
        self.transcript = store.transcript(info.id)
        self.base, self.upto = self._stored_base()
        self.last_reply: Reply | None = None

    @classmethod
    def open(
        cls,
        store: SessionStore,
        provider: Provider,
        *,
        provider_name: str,
        model: str,
        base_url: str | None = None,
        context_window: int | None = None,
        resume: str | None = None,
        latest: bool = False,
        **options: Any,
    ) -> ChatSession:
        """A new session, or the one `resume` names (an id or unique prefix), or with
        `latest` the most recently active one (a new one when there is none). A new session
        is stored with its first message.

        A new session stores the settings it was opened with (`provider_name`, `model`,
        `base_url`, `context_window`: the one the user set, and `max_tokens`), so that it can
        be reopened on the same ones."""
        info = store.get_session(resume) if resume else None
        if info is None and latest:
            info = store.latest_session()
        if info is not None:
            return cls(store, info, provider, model=model, **options)
        new = SessionInfo.new(
            provider=provider_name,
            model=model,
            base_url=base_url,
            context_window=context_window,
            max_tokens=options.get("max_tokens"),
        )
        return cls(store, new, provider, model=model, saved=False, **options)

    @property
    def provider(self) -> Provider:
        return self.tap.inner

    @property
    def context_window(self) -> int | None:
        window = self.tap.context_window
        if window is None and self.model_info is not None:
            window = self.model_info.context_window
        return window

    def switch_model(self, provider: Provider, model: str, model_info: ModelInfo | None) -> None:
        """Use another model from the next request on (the transcript is unchanged); a
        reopened session continues on it."""
        self.tap.inner, self.model, self.model_info = provider, model, model_info
        self._save_settings(model=model)

    def set_max_tokens(self, max_tokens: int | None) -> None:
        """The output limit from the next request on; a reopened session keeps it."""
        self.max_tokens = max_tokens
        self._save_settings(max_tokens=max_tokens)

    def _save_settings(self, **settings: Any) -> None:
        self.info = replace(self.info, **settings)
        if self.saved:
            self.store.update_settings(self.info)

    def _ensure_saved(self) -> None:
        if not self.saved:
            self.store.save_session(self.info)
            self.saved = True

    # -- the working view ----------------------------------------------------------------

    def working_messages(self) -> tuple[Message, ...]:
        """What the next request starts from, before `Client` shapes it (microcompaction,
        budget, recovery)."""
        base = self.base if self.base is not None else ()
        return base + self.transcript[self.upto :]

    def _policy(self) -> RecoveryPolicy:
        """The recovery policy a send() runs now (the one `Client` builds from these)."""
        return RecoveryPolicy(
            config=self.recovery,
            estimator=self.estimator,
            context_window=self.context_window,
            max_output_tokens=self.tap.max_output_tokens,
            predictive=self.predictive,
            microcompact=self.microcompaction,
        )

    def _microcompacted(self) -> tuple[Message, ...]:
        """The working messages after every request's microcompaction: what compaction
        summarises and what the estimates before a request count. Taken from the policy, so
        the session has no microcompaction of its own to keep in step."""
        return self._policy().apply_microcompaction(self.working_messages())

    def _stored_base(self) -> tuple[tuple[Message, ...] | None, int]:
        for event in reversed(self.store.events(self.info.id)):
            if event.kind in _VIEW_EVENTS:
                view = tuple(message_from_dict(m) for m in event.data["view"])
                return view, int(event.data["upto"])
        return None, 0

    # -- turns ---------------------------------------------------------------------------

    def append(self, messages: Sequence[Message]) -> None:
        """Add messages to the transcript (stored before this returns)."""
        self._ensure_saved()
        self.store.append_messages(self.info.id, messages)
        self.transcript += tuple(messages)

    def send(
        self,
        text: str | None,
        *,
        on_event: EventHook | None = None,
        on_delta: DeltaHook | None = None,
        on_discard: Callable[[], None] | None = None,
    ) -> Turn:
        """Store the user's `text` (None: answer the transcript as it is), get the answer,
        store it. Raises the Client's errors (the user's message stays stored)."""
        if text is not None:
            self.append((Message.user(text),))
        self._auto_compact(on_event)
        events: list[Event] = []
        hooks = [events.append] + ([on_event] if on_event is not None else [])
        self.tap.calls, self.tap.on_delta, self.tap.on_discard = [], on_delta, on_discard
        client = Client(
            self.tap,
            self.recovery,
            hooks=hooks,
            estimator=self.estimator,
            context_window=self.context_window,
            predictive=self.predictive,
            microcompact=self.microcompaction,
        )
        try:
            reply = client.send(
                self.working_messages(), max_tokens=self.max_tokens, tools=self.tools
            )
        except Exception:
            self._record("chat-failed", events, view=None)
            raise
        finally:
            self.tap.on_delta = self.tap.on_discard = None
        self.append((reply.message,))
        self.last_reply = reply
        self._calibrate()
        request_id, cost, recovery = self._record("chat", events, view=reply.view)
        return Turn(
            reply=reply,
            request_id=request_id,
            cost=cost,
            recovery_cost=recovery,
            calls=tuple(self.tap.calls),
        )

    def _calibrate(self) -> None:
        """Learn the provider's tokens per char from the prompt it last counted, so the next
        pre-flight check predicts this model's tokenizer, not the generic ratio."""
        if self.tap.last_prompt is not None:
            messages, tokens = self.tap.last_prompt
            self.estimator = self.estimator.calibrated(messages, tokens)
            self.tap.last_prompt = None

    def record_cancelled(self, partial: str) -> None:
        """The user cancelled the answer: keep what arrived, marked, in the transcript."""
        text = f"{partial.rstrip()}\n\n{CANCELLED_NOTE}" if partial.strip() else CANCELLED_NOTE
        self.append((Message.assistant(text),))
        self._record("cancelled", [], view=None)

    def _record(
        self, tag: str, events: Sequence[Event], *, view: Sequence[Message] | None
    ) -> tuple[int, float | None, float | None]:
        """Store one request with the calls the tap saw: (id, cost, recovery cost)."""
        ledger = CostLedger()
        for call in self.tap.calls:
            ledger = ledger.record(
                call.usage, request=0, model=self.model, info=self.model_info, kind=call.kind
            )
        cost, recovery = ledger.total.cost.total, ledger.recovery.cost.total
        self._ensure_saved()
        request_id = self.store.record_request(
            self.info.id,
            tag=tag,
            model=self.model,
            usage=ledger.total.usage,
            cost_usd=cost,
            recovery_cost_usd=recovery,
            view=view,
            events=[_stored(e) for e in events],
        )
        return request_id, cost, recovery

    # -- compaction and clearing ---------------------------------------------------------

    def compact(self, focus: str | None = None) -> CompactionResult:
        """/compact: summarise the middle of the working view (raises CompactionError, with
        nothing changed, when no valid summary was made; its calls' cost is stored)."""
        try:
            result = compact(
                self.provider,
                self._microcompacted(),
                focus=focus,
                config=self.compaction,
                window=self.context_window,
                output_reserve=self.max_tokens or 0,
                recovery_config=self.recovery,
                summarizer=self.summarizer,
            )
        except CompactionError as exc:
            self._store_failed_compaction(exc)
            raise
        self._store_compaction(result)
        return result

    def _auto_compact(self, on_event: EventHook | None) -> None:
        window = self.context_window
        if window is None or not self.auto_compaction:
            return
        decision = auto_compact(
            self.provider,
            self._microcompacted(),
            breaker=self.breaker,
            window=window,
            output_reserve=self.max_tokens or 0,
            config=self.compaction,
            recovery_config=self.recovery,
            summarizer=self.summarizer,
        )
        self.breaker = decision.breaker
        if decision.result is not None:
            self._store_compaction(decision.result)
        if decision.error is not None:
            self._store_failed_compaction(decision.error)
        if on_event is not None and (decision.result is not None or decision.notice):
            on_event(_CompactionNote(result=decision.result, notice=decision.notice))

    def _store_compaction(self, result: CompactionResult) -> None:
        """A compaction is a request of its own (its cost is its own line in /cost), with
        the view it made as an event, from which a reopened session rebuilds its view."""
        report = result.report
        self.base, self.upto = result.messages, len(self.transcript)
        data = {"view": [message_to_dict(m) for m in result.messages], "upto": self.upto}
        self._ensure_saved()
        self.store.record_request(
            self.info.id,
            tag="compaction",
            model=report.model or self.model,
            usage=report.usage,
            cost_usd=usage_cost(report.usage, self.model_info).total,
            recovery_cost_usd=0.0,
            view=result.messages,
            events=(("compaction", describe_compaction(result), data),),
        )

    def _store_failed_compaction(self, error: CompactionError) -> None:
        """The summary calls of a compaction that failed were made, and maybe billed."""
        if error.calls == 0:
            return
        self._ensure_saved()
        self.store.record_request(
            self.info.id,
            tag="compaction-failed",
            model=self.model,
            usage=error.usage,
            cost_usd=usage_cost(error.usage, self.model_info).total,
            recovery_cost_usd=0.0,
            events=(("compaction-failed", str(error), {"calls": error.calls}),),
        )

    def clear(self) -> None:
        """/clear: the next request starts from an empty view (the transcript keeps all).
        Stored as an event of the session: it is no request and costs nothing."""
        self.base, self.upto = (), len(self.transcript)
        if not self.transcript:
            return  # nothing to clear: an empty session stays unstored
        data = {"view": [], "upto": self.upto}
        text = f"working view cleared ({self.upto} messages stay in the transcript)"
        self.store.record_event(self.info.id, "clear", text, data)

    def context_report(self) -> ContextReport:
        """What the next request would send, message by message (nothing is sent).

        The report is given the microcompacted messages as its working messages, so it can
        tell a result microcompaction shortened from one the budget or a level cut; the
        policy's microcompaction is idempotent, so the view it computes from them is the
        view `Client` sends."""
        policy = self._policy()
        working = policy.apply_microcompaction(self.working_messages())
        return build_context_report(self.transcript, working, policy, max_tokens=self.max_tokens)

    # -- cost and budget -----------------------------------------------------------------

    def cost_summary(self) -> CostSummary:
        return CostSummary(requests=self.store.requests(self.info.id))

    def budget_check(self, pending: str | None = None) -> BudgetCheck | None:
        """The budget status before sending `pending` (the user's next message, if any);
        None when no budget is set. The next request is estimated as its prompt plus the
        output limit, when one is set."""
        if self.budget_usd is None:
            return None
        pending_messages = (Message.user(pending),) if pending is not None else ()
        estimate = self.estimator.count(self._microcompacted() + pending_messages)
        output = self.max_tokens or 0
        next_cost = usage_cost(Usage(estimate, output), self.model_info).total
        check = check_budget(self.cost_summary().known_cost, next_cost, self.budget_usd)
        if check.status == "over" and self.budget_approved:
            return BudgetCheck(
                status="ok", spent=check.spent, next_cost=next_cost, budget=check.budget
            )
        return check


def describe_compaction(result: CompactionResult) -> str:
    """One line: what a compaction did."""
    r = result.report
    if r.fallback is not None:
        return (
            f"compaction fell back to the recovery levels ({r.reason}): "
            f"{r.messages_before} -> {r.messages_after} messages, "
            f"~{r.tokens_before:,} -> ~{r.tokens_after:,} tokens"
        )
    pinned = f", {len(r.pinned)} instruction(s) pinned verbatim" if r.pinned else ""
    return (
        f"compacted {r.summarized} messages into a summary: {r.messages_before} -> "
        f"{r.messages_after} messages, ~{r.tokens_before:,} -> ~{r.tokens_after:,} tokens "
        f"({r.freed_pct:.0f}% freed{pinned})"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _CompactionNote(Event):
    """Auto-compaction ran before a request, or its breaker opened (shown like any event)."""

    result: CompactionResult | None
    notice: str | None

    def describe(self) -> str:
        lines = []
        if self.result is not None:
            lines.append("auto-" + describe_compaction(self.result))
        if self.notice:
            lines.append(self.notice)
        return "\n".join(lines)


def _stored(event: Event) -> tuple[str, str, dict[str, Any]]:
    """(kind, text, data) for the store: the event's plain fields as JSON data."""
    data: dict[str, Any] = {}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, (int, float, str, bool)) or value is None:
            data[f.name] = value
        elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            data[f.name] = list(value)
    return type(event).__name__, event.describe(), data
