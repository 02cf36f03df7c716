"""A chat session: the full transcript in the store, the working view, one recovered call per
turn, compaction, cost and the session budget. The chatcli command and the demo drive it; it
does no terminal I/O (callbacks receive events and streamed text).

The transcript is append-only and complete: the user's message is stored before the call, the
answer right after it. The working view sent to the model is `base + transcript[upto:]`,
shaped by `Client` on every request (microcompaction, the tool-result budget, pairing repair,
the recovery levels); `base` is what a compaction, a /clear or a recovery level's sticky cut
(`chatcli.history.sticky`: the next requests share its prefix until the window forces a new
cut) left, stored so a reopened session rebuilds the same view (`chatcli.chat.stored`). The
windows overflow errors state are stored as learned, per provider and URL (`window_scope`),
for the chat and the proxy replicas on one upstream.

Who compacts is `RecoveryConfig.compaction` (`chatcli.chat.native`): a provider's own
compaction is kept in the transcript, replaces the span before it in the view, and is stored
as a compaction request of its own (an answer paused after it is asked for at once); a request
the provider refuses for it is sent again without it when "auto" can fall back to chatcli's.

Its other parts: the provider tap (`chatcli.chat.tap`), the cost ledger (`chatcli.chat.cost`),
the budget (`chatcli.chat.spending`), what the session says (`chatcli.chat.text`). One module
because a session is one state (the transcript, the base of its view, the compaction breaker,
the learned windows, the estimator) that its turns, compactions and clears read and change
together; what needs none of that state lives in those parts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chatcli.catalog import ModelInfo
from chatcli.chat.cache import CACHE_BREAK, CLEAR, COMPACTION, cache_break
from chatcli.chat.context import ContextReport, build_context_report
from chatcli.chat.cost import CostSummary, estimated_usage_event, turn_cost
from chatcli.chat.native import (
    chatcli_compacts,
    compaction_usage,
    native_active,
    on_demand,
    replaced_count,
)
from chatcli.chat.spending import BudgetCheck, check_budget
from chatcli.chat.stored import (
    compaction_made_by,
    learn_windows,
    sticky_made_by,
    stored_base,
    stored_cost,
    stored_event,
)
from chatcli.chat.tap import CallRecord, DeltaHook, StreamingTap
from chatcli.chat.text import (
    CANCELLED_NOTE,
    CompactionNote,
    CompactionStarted,
    NativeCompactionNote,
    cut_user_messages,
    describe_compaction,
)
from chatcli.compaction import (
    CompactionBreaker,
    CompactionResult,
    PreviousRequest,
    SentRequest,
    auto_compact,
    compact,
)
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.cost import CallKind, usage_cost
from chatcli.errors import CannotSummarise, CompactionError, ErrorKind, ProviderError
from chatcli.events import Event, LevelApplied
from chatcli.history.carry import Numbering
from chatcli.history.native import native_view, owns
from chatcli.messages import Message, StopReason, Usage
from chatcli.providers.base import Provider, Request, ToolSpec
from chatcli.providers.counting import default_estimator
from chatcli.recovery import Client, RecoveryPolicy, Reply
from chatcli.request_settings import default_output_limit
from chatcli.store import SessionInfo, SessionStore, StoredStickyView, window_scope
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["ChatSession", "Turn"]

# The chat's microcompaction unless one is given (None turns it off, as for `Client`).
_DEFAULT_MICROCOMPACTION = MicrocompactConfig()

EventHook = Callable[[Event], None]
Row = tuple[str, str, dict[str, Any]]  # a stored event: kind, text, data


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

    `model_info` gives prices and limits (None: unknown). `max_tokens` is the user's output
    limit; None: `output_limit`, sized from the window and the model's output cap
    (`chatcli.request_settings.default_output_limit`), never none at all (a local server given
    no limit writes until its window is full). `budget_usd` enables the session budget (see
    `budget_check`). `auto_compaction` compacts before a request that passes the configured
    share of the window; `predictive` is `Client`'s (False: the plain ladder, every level sent
    in turn). `summarizer` writes compaction summaries (default: the chat provider). `saved`
    False: `info` is not in the store yet; it is stored with the first thing written (an
    empty session is never stored, so it is never listed nor continued).

    `base_made_by` names what made the view the next request starts from ("compaction",
    "/clear", "level 2, kept from an earlier request", ...; "" when it is the transcript), so
    that /context names the transform behind each message it did not send as it is.
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
        microcompaction: MicrocompactConfig | None = _DEFAULT_MICROCOMPACTION,
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
        self.microcompaction = microcompaction
        self.budget_usd, self.budget_approved = budget_usd, False
        self.tools = tuple(tools)
        self.auto_compaction, self.predictive = auto_compaction, predictive
        self.summarizer = summarizer
        self.estimator = default_estimator(provider)  # the tap's: it estimates unreported usage
        # Windows stated by overflow errors, by model: each send's Client starts from them,
        # so one rejected call teaches the whole session, not only the turn that paid it.
        # Shared through the store with every chat and proxy replica on the same upstream
        # (`window_scope`): what one of them paid for, the others do not pay again.
        self.window_scope = window_scope(info.provider, info.base_url)
        self.learned_windows: dict[str, int] = store.learned_windows(self.window_scope)
        self.breaker = CompactionBreaker.from_config(self.compaction)
        self.transcript = store.transcript(info.id)
        self.base, self.upto, self.base_made_by = (
            stored_base(store, info.id) if saved else (None, 0, "")
        )
        self.last_reply: Reply | None = None
        # The view the last chat request sent (None: none yet, or not known after a reopen),
        # and why the view was rebuilt since (a compaction or clear), to judge cache breaks.
        self._sent_view: tuple[Message, ...] | None = None
        # The request the last answer came from, which chatcli's compaction continues on the
        # provider's prompt cache while the working view extends it (`_previous`).
        self._last_sent: SentRequest | None = None
        self._view_reset: str | None = None
        self.native_failed: str | None = None  # why "auto" stopped relying on the provider's
        self._cuts_told: dict[int, int] = {}  # user message number -> chars the user was told

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
    def estimator(self) -> TokenEstimator:
        """The session's token estimate (calibrated on what the provider counted); the tap
        estimates with it what a cancelled call processed."""
        return self.tap.estimator

    @estimator.setter
    def estimator(self, estimator: TokenEstimator) -> None:
        self.tap.estimator = estimator

    @property
    def context_window(self) -> int | None:
        window = self.tap.context_window
        if window is None and self.model_info is not None:
            window = self.model_info.context_window
        return window

    @property
    def output_limit(self) -> int:
        """The output limit each answer is asked with: the user's `max_tokens`, else the
        default sized from the window and the model's output cap."""
        if self.max_tokens is not None:
            return self.max_tokens
        cap = self.tap.max_output_tokens
        if cap is None and self.model_info is not None:
            cap = self.model_info.max_output_tokens
        return default_output_limit(self.context_window, cap)

    def switch_model(self, provider: Provider, model: str, model_info: ModelInfo | None) -> None:
        """Use another model from the next request on (the transcript is unchanged); a
        reopened session continues on it."""
        self.tap.inner, self.model, self.model_info = provider, model, model_info
        self._last_sent = None  # sent to the other model: its cache is not this one's
        self.estimator = default_estimator(provider)  # another model counts otherwise
        self.native_failed = None
        self.breaker = CompactionBreaker.from_config(self.compaction)  # it may summarise
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
        budget, recovery): the span a provider's compaction replaced is not in it."""
        base = self.base if self.base is not None else ()
        view = base + self.transcript[self.upto :]
        return native_view(
            view, provider=self.tap.compaction_provider, model=self.tap.model
        ).messages

    # -- who compacts --------------------------------------------------------------------

    def native_active(self) -> bool:
        """Whether the provider compacts on its servers (`chatcli.chat.native`)."""
        return native_active(self.provider, self.recovery.compaction, self.native_failed)

    def _native_trigger(self) -> int | None:
        """Where the provider's compaction triggers (the Client asks for it there)."""
        return self.compaction.trigger(self.context_window, self.output_limit)

    def _give_up_native(self, reason: str, on_event: EventHook | None) -> bool:
        """ "auto" falls back to chatcli's own compaction (True); other strategies do not."""
        if self.recovery.compaction != "auto" or not self.native_active():
            return False
        self.native_failed = reason
        if on_event is not None:
            on_event(NativeCompactionNote(gave_up=reason))
        return True

    def _client(self, hooks: Sequence[EventHook] = ()) -> Client:
        """The Client a send() runs now: the one place the session's settings become a
        recovery policy. It asks for the provider's compaction (`Client`) unless "auto" gave
        up on it."""
        mine = replace(self.recovery, compaction="chatcli")  # the provider's failed
        return Client(
            self.tap,
            self.recovery if self.native_failed is None else mine,
            hooks=hooks,
            estimator=self.estimator,
            context_window=self.context_window,
            predictive=self.predictive,
            microcompact=self.microcompaction,
            learned_windows=self.learned_windows,
            compaction=self.compaction,
        )

    def _policy(self) -> RecoveryPolicy:
        """The recovery policy a send() runs now (for estimates and /context)."""
        return self._client().policy

    def _microcompacted(self) -> tuple[Message, ...]:
        """The working messages after every request's microcompaction: what compaction
        summarises and what the estimates before a request count. Taken from the policy, so
        the session has no microcompaction of its own to keep in step."""
        return self._policy().apply_microcompaction(self.working_messages(), self._numbering())

    def _numbering(self) -> Numbering:
        """The transcript's message numbers, which microcompaction's markers name (as the
        `Client` numbers them, given `transcript=`), so the session counts what it sends."""
        return Numbering(self.transcript)

    def _previous(self) -> PreviousRequest | None:
        """The last chat request and the messages added since, while the working view
        extends the messages it was made from (not after a compaction, a /clear or a cut)."""
        sent = self._last_sent
        return None if sent is None else sent.previous_for(self.working_messages())

    def _own_span(self) -> tuple[Message, ...]:
        """What chatcli's own compaction summarises: the working messages (microcompacted)
        with every provider's compaction removed, so the span one replaced is back and the
        summary covers it (the provider's summary is opaque, or another model's)."""
        base = self.base if self.base is not None else ()
        raw = base + self.transcript[self.upto :]
        bare = native_view(raw, provider=None, model=None).messages
        return self._policy().apply_microcompaction(bare, self._numbering())

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
        client = self._client(hooks)
        sent = len(self.transcript)
        try:
            client, reply = self._answer(client, hooks, on_event)
        except Exception:
            self._record("chat-failed", events, view=None)
            raise
        finally:
            self.tap.on_delta = self.tap.on_discard = None
            learn_windows(
                self.store, self.window_scope, self.learned_windows, client.learned_windows
            )
        self.append((reply.message,))
        self.last_reply, self._last_sent = reply, client.last_sent
        compacted = self._after_native(reply, on_event)
        self._calibrate()
        broken = cache_break(self._sent_view, reply.view, events, reset=self._view_reset)
        extra = () if broken is None else ((CACHE_BREAK, broken.describe(), broken.data()),)
        self._sent_view, self._view_reset = reply.view, None
        if compacted:  # the next request starts from the provider's compaction
            self._view_reset = COMPACTION
        request_id, cost, recovery = self._record("chat", events, view=reply.view, extra=extra)
        self._tell_cuts(reply.view, on_event)
        if client.sticky_view is not None:  # this request's cut: the next ones keep it
            self.base, self.upto = client.sticky_view.view, sent
            levels = [e.level for e in events if isinstance(e, LevelApplied)]
            self.base_made_by = sticky_made_by(max(levels, default=0))
            self.store.save_sticky_view(
                self.info.id, StoredStickyView(request_id=request_id, upto=sent)
            )
        if reply.stop_reason is StopReason.COMPACTION and text is not None:  # paused: go on, once
            return self.send(None, on_event=on_event, on_delta=on_delta, on_discard=on_discard)
        return Turn(
            reply=reply,
            request_id=request_id,
            cost=cost,
            recovery_cost=recovery,
            calls=tuple(self.tap.calls),
        )

    def _tell_cuts(self, view: Sequence[Message], on_event: EventHook | None) -> None:
        """Say how much of each of the user's messages the model saw, when the view held it
        cut: once, and again when that changes (a later cut)."""
        for cut in cut_user_messages(self.transcript, view):
            if self._cuts_told.get(cut.number) != cut.seen:
                self._cuts_told[cut.number] = cut.seen
                if on_event is not None:
                    on_event(cut)

    def _answer(
        self, client: Client, hooks: Sequence[EventHook], on_event: EventHook | None
    ) -> tuple[Client, Reply]:
        """The Client's answer, and the Client that gave it: a request the provider refuses
        for its compaction edit is sent once more without it (a new Client) when "auto" can
        fall back."""
        try:
            return client, self._sent(client)
        except ProviderError as exc:
            refused = exc.info.kind is ErrorKind.INVALID_REQUEST and self.native_active()
            if not (refused and self._give_up_native(f"the provider refused it: {exc}", on_event)):
                raise
        retry = self._client(hooks)
        return retry, self._sent(retry)

    def _sent(self, client: Client) -> Reply:
        view, transcript = self.working_messages(), self.transcript
        return client.send(
            view, max_tokens=self.output_limit, tools=self.tools, transcript=transcript
        )

    def _after_native(self, reply: Reply, on_event: EventHook | None) -> bool:
        """Store the provider's compaction as a compaction of its own (True); or, past the
        trigger without one, stop relying on it ("auto")."""
        part = reply.message.compaction
        if part is not None and owns(reply.message, self.tap.compaction_provider, self.tap.model):
            self._store_native_compaction(reply, on_event)
            return True
        trigger = self._native_trigger()
        prompt = self.tap.last_prompt[1] if self.tap.last_prompt is not None else 0
        if self.native_active() and trigger is not None and prompt > trigger:
            self._give_up_native("an answer past its trigger came without a compaction", on_event)
        return False

    def _store_native_compaction(self, reply: Reply, on_event: EventHook | None) -> None:
        usage = compaction_usage(self.tap.calls)
        base = self.base if self.base is not None else ()
        replaced = replaced_count(base + self.transcript[self.upto : -1])  # before the answer
        note = NativeCompactionNote(part=reply.message.compaction, replaced=replaced, usage=usage)
        self._record_native(note, on_event)

    def _record_native(self, note: NativeCompactionNote, on_event: EventHook | None) -> None:
        """The provider's compaction is a request of its own (its cost: compaction cost)."""
        event = ("native-compaction", note.describe(), {"replaced": note.replaced})
        self._record_compaction("compaction", note.usage or Usage(), event)
        if on_event is not None:
            on_event(note)

    def _record_compaction(self, tag: str, usage: Usage, event: Row, **stored: Any) -> None:
        """A compaction (`tag`: or a failed one) is a request of its own, its own line in
        /cost; `stored`: the model when another one made it, the view it made."""
        self._ensure_saved()
        cost = usage_cost(usage, self.model_info).total
        row = {"model": self.model, "cost_usd": cost, "recovery_cost_usd": 0.0, **stored}
        self.store.record_request(self.info.id, tag=tag, usage=usage, events=(event,), **row)

    def _calibrate(self) -> None:
        """Learn the provider's tokens per char from the prompt it last counted, so the next
        pre-flight check predicts this model's tokenizer, not the generic ratio."""
        if self.tap.last_prompt is not None:
            messages, tokens = self.tap.last_prompt
            self.estimator = self.estimator.calibrated(messages, tokens)
            self.tap.last_prompt = None

    def record_cancelled(self, partial: str) -> CallRecord | None:
        """The user cancelled the answer: keep what arrived, marked, in the transcript, and
        what the cancelled call processed (its record: None when no call was made)."""
        text = f"{partial.rstrip()}\n\n{CANCELLED_NOTE}" if partial.strip() else CANCELLED_NOTE
        self.append((Message.assistant(text),))
        cancelled = next((c for c in self.tap.calls if c.kind is CallKind.CANCELLED), None)
        self._record("cancelled", [], view=None)
        return cancelled

    def _record(
        self,
        tag: str,
        events: Sequence[Event],
        *,
        view: Sequence[Message] | None,
        extra: Sequence[tuple[str, str, dict[str, Any]]] = (),
    ) -> tuple[int, float | None, float | None]:
        """Store one request with the calls the tap saw and its events (`extra`: stored ones
        that are not recovery events): (id, cost, recovery cost). A compaction the provider
        made during it is stored apart (`_store_native_compaction`)."""
        calls = [c for c in self.tap.calls if c.kind is not CallKind.COMPACTION]
        cost = turn_cost(calls, self.model, self.model_info)
        if any(call.estimated for call in calls):
            extra = (*extra, estimated_usage_event(calls))
        self._ensure_saved()
        request_id = self.store.record_request(
            self.info.id,
            tag=tag,
            model=self.model,
            usage=cost.usage,
            cost_usd=cost.cost,
            recovery_cost_usd=cost.recovery_cost,
            view=view,
            events=[*(stored_event(e) for e in events), *extra],
        )
        return request_id, cost.cost, cost.recovery_cost

    # -- compaction and clearing ---------------------------------------------------------

    def compact(
        self, focus: str | None = None, on_event: EventHook | None = None
    ) -> CompactionResult | None:
        """/compact: compact the working view now, as `RecoveryConfig.compaction` says: "off"
        refuses (CompactionError). Where the provider compacts ("native", or "auto" with a
        model that does) and can on demand (its adapter's `compact_on_demand`), it does: its
        compaction is added to the transcript like one made at its trigger, `on_event` gets
        its note, and None is returned. Otherwise, or when it fails, chatcli's own summary of
        the working view is made and returned (`on_event` told why it is not the provider's):
        raises CompactionError, with nothing changed, when no valid summary was made (its
        calls' cost is stored). A `focus` is for chatcli's own summary. Where the model
        already failed to summarise in this session (its summary was rejected), it is not
        asked again: CompactionError at once, no call made."""
        if self.recovery.compaction == "off":
            raise CompactionError("compaction is off (CHATCLI_COMPACTION=off): nothing compacts")
        instead = self._compact_natively(focus, on_event)
        if instead is None:
            return None
        if instead and on_event is not None:
            on_event(NativeCompactionNote(instead=instead))
        if self.breaker.unable:
            raise CompactionError(
                f"not asked again: the model cannot summarise this conversation, as it showed "
                f"earlier in this session ({self.breaker.unable}). Overflow recovery still keeps "
                "each request within the window; /model switches to another model."
            )
        try:
            result = compact(
                self.provider,
                self._own_span(),
                focus=focus,
                config=self.compaction,
                estimator=self.estimator,
                window=self.context_window,
                output_reserve=self.output_limit,
                recovery_config=self.recovery,
                summarizer=self.summarizer,
                numbering=self._numbering(),
                previous=self._previous(),
            )
        except CompactionError as exc:
            self._store_failed_compaction(exc)
            if isinstance(exc, CannotSummarise):  # auto-compaction stops asking too
                self.breaker = self.breaker.after_failure(str(exc), cannot_summarise=True)
            raise
        self._store_compaction(result)
        return result

    def _compact_natively(self, focus: str | None, on_event: EventHook | None) -> str | None:
        """Have the provider compact now (None), or say why not (`on_demand`)."""
        compact_now = on_demand(self.provider, self.recovery.compaction, self.native_failed, focus)
        if isinstance(compact_now, str):
            return compact_now
        view = self.working_messages()
        try:
            limit = self.output_limit
            done = compact_now(Request(messages=view, max_tokens=limit, tools=self.tools))
        except ProviderError as exc:
            return f"its compaction on demand failed: {exc}"
        self.append(done.window)
        part, replaced = done.window[-1].compaction, replaced_count(view)
        note = NativeCompactionNote(part=part, replaced=replaced, usage=done.usage)
        self._record_native(note, on_event)
        self._view_reset = COMPACTION
        return None

    def _auto_compact(self, on_event: EventHook | None) -> None:
        window = self.context_window
        mine = chatcli_compacts(self.provider, self.recovery.compaction, self.native_failed)
        if window is None or not self.auto_compaction or not mine:
            return
        decision = auto_compact(
            self.provider,
            self._own_span(),
            breaker=self.breaker,
            window=window,
            output_reserve=self.output_limit,
            config=self.compaction,
            estimator=self.estimator,  # the turn's one estimate: the request's pre-flight's
            recovery_config=self.recovery,
            summarizer=self.summarizer,
            numbering=self._numbering(),
            on_start=None if on_event is None else lambda: on_event(CompactionStarted()),
            previous=self._previous(),
        )
        self.breaker = decision.breaker
        if decision.result is not None:
            self._store_compaction(decision.result)
        if decision.error is not None:
            self._store_failed_compaction(decision.error)
        error = None if decision.error is None else str(decision.error)
        if on_event is not None and (decision.result is not None or decision.notice or error):
            on_event(CompactionNote(result=decision.result, notice=decision.notice, error=error))

    def _store_compaction(self, result: CompactionResult) -> None:
        """A compaction is a request of its own (its cost is its own line in /cost), with
        the view it made as an event, from which a reopened session rebuilds its view. One
        whose summary failed (the view is the recovery levels') is "compaction-failed", as a
        failed /compact is: a failure has one name."""
        report = result.report
        self.base, self.upto = result.messages, len(self.transcript)
        self.base_made_by = compaction_made_by(report)
        # The view is the request's, stored by reference.
        data: dict[str, Any] = {"upto": self.upto, "made_by": self.base_made_by}
        event = ("compaction", describe_compaction(result), data)
        model = report.model or self.model
        tag = "compaction" if report.fallback is None else "compaction-failed"
        self._record_compaction(tag, report.usage, event, model=model, view=result.messages)
        self.store.save_sticky_view(self.info.id, None)  # the events say what made the view
        self._view_reset = COMPACTION

    def _store_failed_compaction(self, error: CompactionError) -> None:
        """The summary calls of a compaction that failed were made, and maybe billed."""
        if error.calls:
            event = ("compaction-failed", str(error), {"calls": error.calls})
            self._record_compaction("compaction-failed", error.usage, event)

    def clear(self) -> None:
        """/clear: the next request starts from an empty view (the transcript keeps all).
        Stored as an event of the session: it is no request and costs nothing."""
        self.base, self.upto, self.base_made_by = (), len(self.transcript), "/clear"
        if not self.transcript:
            return  # nothing to clear: an empty session stays unstored
        data = {"view": [], "upto": self.upto}
        text = f"working view cleared ({self.upto} messages stay in the transcript)"
        self.store.record_event(self.info.id, "clear", text, data)
        self.store.save_sticky_view(self.info.id, None)  # the events say what made the view
        self._view_reset = CLEAR

    def context_report(self) -> ContextReport:
        """What the next request would send, message by message (nothing is sent); what
        the working view starts from is named by `base_made_by`."""
        return build_context_report(
            self.transcript,
            self.working_messages(),
            self._policy(),
            max_tokens=self.output_limit,
            made_by=self.base_made_by,
        )

    # -- cost and budget -----------------------------------------------------------------

    def cost_summary(self) -> CostSummary:
        return stored_cost(self.store, self.info.id)

    def budget_check(self, pending: str | None = None) -> BudgetCheck | None:
        """The budget status before sending `pending` (the user's next message, if any);
        None when no budget is set. The next request is estimated as its prompt plus the
        output limit the user set (the default one is a bound, not what answers cost)."""
        if self.budget_usd is None:
            return None
        pending_messages = (Message.user(pending),) if pending is not None else ()
        estimate = self.estimator.count(self._microcompacted() + pending_messages)
        output = self.max_tokens or 0
        next_cost = usage_cost(Usage(estimate, output), self.model_info).total
        spent, approved = self.cost_summary().known_cost, self.budget_approved
        return check_budget(spent, next_cost, self.budget_usd, approved=approved)
