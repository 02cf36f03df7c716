"""`Client`: sends conversations to a provider and recovers them.

The sync and async drivers of the recovery policy (`chatcli.policy`): they perform the actions
the policy yields (call the provider, sleep before a retry) and hand back the outcomes. All
decisions are the policy's; see docs/design/recovery.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from chatcli.compaction import (
    CompactionResult,
    PreviousRequest,
    SentRequest,
    acompact,
    compact,
)
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.events import Event, Hook, LevelApplied, OverflowDetected, logger
from chatcli.history.native import native_view
from chatcli.history.scan import ScanMemos
from chatcli.history.sticky import StickyView
from chatcli.messages import Message
from chatcli.policy.actions import Action, Flow, Outcome, Reply, Send, Sleep
from chatcli.policy.policy import RecoveryPolicy
from chatcli.policy.retry import DEFAULT_MAX_RETRIES
from chatcli.policy.values import MICROCOMPACT_DEFAULTS
from chatcli.providers.base import NativeCompaction, Provider, Request, Response, ToolSpec
from chatcli.request_settings import Settings
from chatcli.streaming import (
    CallOutcome,
    StreamItem,
    StreamRun,
    async_chunks,
    sync_chunks,
)
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["Client"]


class Client:
    """Sends conversations to a provider and recovers them (see docs/design/recovery.md).

    `hooks` receive every event as it happens (events are also logged under "chatcli").
    `sleep` / `asleep` wait before retries (injected so tests need not wait).
    `context_window` / `max_output_tokens` default to the provider's attributes of those names.
    `microcompact`: microcompaction of old tool results in every request's view, with
    `MicrocompactConfig`'s defaults unless given (`MicrocompactConfig.from_env()` reads its
    settings from the environment); None turns it off. The caller's messages keep them whole
    either way.
    `learned_windows`: context windows (tokens) by model name, learned from overflow errors
    that stated them; a model's entry is its window when none is declared, so only its first
    overflow costs a rejected call. Pass what an app persisted; read `learned_windows` back.
    `settings`: the request settings of every call (`chatcli.Settings`); a call's own
    `settings=` win field by field (`Settings.merge`).
    `sticky_view`: the cut a recovery level or `compact` made (`chatcli.StickyView`): while
    the messages sent extend the ones it was made for, requests start from it, so they share
    its prefix byte for byte until the window requires a new cut. Pass what an app persisted;
    read `sticky_view` back (None: no cut applies).
    `memos`: where the transforms keep their scans of this client's conversations, so a
    request costs what was appended since the last one (`chatcli.history.scan`); by default
    the client's own, dropped with it. An app serving many short-lived clients (the proxy)
    passes one of its own, bounded.
    `compaction`: chatcli's compaction settings (`CompactionConfig`'s defaults unless given):
    `compact`'s, and the trigger of the provider's own compaction. With
    `RecoveryConfig.compaction` "auto" or "native" and an adapter whose model compacts on the
    provider's servers (`native_compaction_supported()`), every request asks for it
    (`Request.native_compaction`): triggered where chatcli's auto-compaction would run
    (`CompactionConfig.trigger`), with the context editing `RecoveryConfig.context_editing`
    names. An adapter built with its own `native_compaction` sends that instead.
    `last_sent`: the request the last send was answered on (`chatcli.compaction.SentRequest`),
    which `compact` continues on the provider's prompt cache (`chatcli.compaction.warm`).
    """

    def __init__(
        self,
        provider: Provider,
        config: RecoveryConfig | None = None,
        *,
        hooks: Sequence[Hook] = (),
        estimator: TokenEstimator | None = None,
        sleep: Callable[[float], Any] = time.sleep,
        asleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        predictive: bool = True,
        microcompact: MicrocompactConfig | None = MICROCOMPACT_DEFAULTS,
        learned_windows: Mapping[str, int] | None = None,
        settings: Settings | None = None,
        sticky_view: StickyView | None = None,
        memos: ScanMemos | None = None,
        compaction: CompactionConfig | None = None,
    ) -> None:
        self.provider = provider
        self.compaction = compaction if compaction is not None else CompactionConfig()
        self._sticky = sticky_view
        # The messages `_sticky` is known to cover (checked by digest once, then by identity).
        self._covered: tuple[Message, ...] | None = None
        self.settings = settings if settings is not None else Settings()
        self.learned_windows: dict[str, int] = dict(learned_windows or {})
        self._model = str(getattr(provider, "model", None) or "")
        declared = _declared(provider, "context_window", context_window)
        self._window_declared = declared is not None
        self.policy = RecoveryPolicy(
            config=config if config is not None else RecoveryConfig(),
            estimator=estimator if estimator is not None else _default_estimator(provider),
            context_window=declared if declared else self.learned_windows.get(self._model),
            max_output_tokens=_declared(provider, "max_output_tokens", max_output_tokens),
            max_retries=max_retries,
            predictive=predictive,
            microcompact=microcompact,
            memos=memos if memos is not None else ScanMemos(),
        )
        self.hooks = tuple(hooks)
        self._sleep, self._asleep = sleep, asleep
        self._sent: SentRequest | None = None

    def send(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: Settings | None = None,
        transcript: Sequence[Message] | None = None,
    ) -> Reply:
        """Send `messages`, recovering as needed; the caller's messages are never changed.
        `transcript`: the whole conversation, when `messages` start from a view made of it (a
        compaction's, a kept cut's): its message numbers are the ones markers and carried
        instructions name (by default, the place in `messages`)."""
        flow, step = self._start(messages, max_tokens, tools, settings, self._emit, transcript)
        while not isinstance(step, Reply):  # bounded by the policy's call limit
            step = _advance(flow, self._perform(step))
        return step

    async def asend(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: Settings | None = None,
        transcript: Sequence[Message] | None = None,
    ) -> Reply:
        """The async `send`: the same policy, awaiting the provider and the sleeps."""
        flow, step = self._start(messages, max_tokens, tools, settings, self._emit, transcript)
        while not isinstance(step, Reply):  # bounded by the policy's call limit
            step = _advance(flow, await self._aperform(step))
        return step

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: Settings | None = None,
        transcript: Sequence[Message] | None = None,
    ) -> Iterator[StreamItem]:
        """`send`, streamed: text and tool-call deltas and recovery events as they happen,
        then the `Reply` as the last item (see `chatcli.streaming`). Closing the iterator
        closes the provider's stream."""
        run = StreamRun()
        emit = run.emit(self._emit)
        flow, step = self._start(messages, max_tokens, tools, settings, emit, transcript)
        yield from run.drain()
        while not isinstance(step, Reply):  # bounded by the policy's call limit
            if isinstance(step, Sleep):
                self._sleep(step.seconds)
                outcome: Outcome = None
            else:
                outcome = yield from run.call(sync_chunks(self.provider, step.request))
            step = _advance(flow, outcome)
            yield from run.drain()
        yield step

    async def astream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: Settings | None = None,
        transcript: Sequence[Message] | None = None,
    ) -> AsyncIterator[StreamItem]:
        """The async `stream`. Cancelling the task closes the provider's stream."""
        run = StreamRun()
        emit = run.emit(self._emit)
        flow, step = self._start(messages, max_tokens, tools, settings, emit, transcript)
        for event in run.drain():
            yield event
        while not isinstance(step, Reply):  # bounded by the policy's call limit
            outcome: Outcome = None
            if isinstance(step, Sleep):
                await self._asleep(step.seconds)
            else:
                call = run.acall(async_chunks(self.provider, step.request))
                async for item in call:
                    if isinstance(item, CallOutcome):
                        outcome = item.outcome
                    else:
                        yield item
            step = _advance(flow, outcome)
            for event in run.drain():
                yield event
        yield step

    def _start(
        self,
        messages: Sequence[Message],
        max_tokens: int | None,
        tools: Sequence[ToolSpec],
        settings: Settings | None,
        emit: Callable[[Event], None],
        transcript: Sequence[Message] | None = None,
    ) -> tuple[Flow, Action | Reply]:
        """The policy's flow for `messages`, started from the sticky view when one applies,
        run to its first action (or its Reply, for a send with no call): where every send and
        stream begins."""
        # What a provider that compacted on its servers sees (`chatcli.history.native`).
        owner = getattr(self.provider, "compaction_provider", None)
        memos = self.policy.memos
        history = native_view(messages, provider=owner, model=self._model, memos=memos).messages
        sticky = self._sticky_for(history)
        working = sticky.working(history) if sticky is not None else history
        merged = self.settings.merge(settings)
        numbered = history if transcript is None else transcript
        run = self.policy.flow(
            working,
            max_tokens=max_tokens,
            tools=tools,
            settings=merged,
            emit=emit,
            history=numbered,
        )
        native = self._native(max_tokens)
        asked = run if native is None else _asking(run, native)
        self._sent = None
        if sticky is None and native is None:  # a view of the whole conversation, as it is
            asked = self._recording(tuple(messages), asked)
        flow = self._keeping_cut(history, asked)
        return flow, _advance(flow, None)

    def _native(self, max_tokens: int | None) -> NativeCompaction | None:
        """The compaction on the provider's servers a send's requests ask for (see the class
        docstring); None: none."""
        config = self.policy.config
        supported = getattr(self.provider, "native_compaction_supported", None)
        if config.compaction not in ("auto", "native") or not callable(supported):
            return None
        if not supported():
            return None
        return NativeCompaction(
            trigger_tokens=self.compaction.trigger(self.policy.context_window, max_tokens),
            clear_tool_uses="tool_uses" in config.context_editing,
            clear_thinking="thinking" in config.context_editing,
        )

    def _recording(self, conversation: tuple[Message, ...], flow: Flow) -> Flow:
        """`flow`, whose Reply's request becomes `last_sent` (`_sent_request`)."""
        answered: list[Request] = []
        outcome: Outcome = None
        while True:  # bounded by the policy's call limit
            try:
                action = flow.send(outcome)
            except StopIteration as done:
                reply: Reply = done.value
                self._sent = _sent_request(conversation, answered, reply)
                return reply
            outcome = yield action
            if isinstance(action, Send) and isinstance(outcome, Response):
                answered.append(action.request)

    @property
    def last_sent(self) -> SentRequest | None:
        """The request the last send was answered on, and the messages it was given; None
        when it made a cut (a recovery level, a kept cut: the request no longer holds the
        conversation), asked for the provider's own compaction, or failed."""
        return self._sent

    def _keeping_cut(self, history: tuple[Message, ...], flow: Flow) -> Flow:
        """`flow`, whose Reply updates the sticky view when a level cut `history`."""
        reply = yield from flow
        if any(isinstance(event, LevelApplied) for event in reply.events):
            self._keep_cut(history, reply.view)
        return reply

    @property
    def sticky_view(self) -> StickyView | None:
        """The cut later requests keep (see the class docstring); None when there is none."""
        return self._sticky

    def _sticky_for(self, history: tuple[Message, ...]) -> StickyView | None:
        """The sticky view when `history` extends the messages it was made for; else it is
        dropped (another conversation, or an edited one)."""
        sticky = self._sticky
        if sticky is None:
            return None
        covered = self._covered
        if covered is not None and history[: sticky.upto] == covered:
            return sticky  # the same objects: a pointer comparison per message
        if covered is None and sticky.applies_to(history, self.policy.memos):
            self._covered = history[: sticky.upto]
            return sticky
        self._sticky = self._covered = None
        return None

    def _keep_cut(self, history: tuple[Message, ...], view: tuple[Message, ...]) -> None:
        if history:
            sticky = StickyView.of(history, view, self.policy.memos)
            self._sticky, self._covered = sticky, history

    def compact(
        self,
        messages: Sequence[Message],
        *,
        focus: str | None = None,
        max_tokens: int | None = None,
        config: CompactionConfig | None = None,
        summarizer: Provider | None = None,
        previous: PreviousRequest | None = None,
    ) -> CompactionResult:
        """/compact: the working view with the middle of `messages` replaced by a verified
        summary (`chatcli.compaction`). Raises `CompactionError`, with nothing changed, when no
        valid summary could be made; `messages` are never changed either way. The compacted
        view is the sticky view for `messages` (see the class docstring). The summary is
        asked for after `previous`, the conversation's last request (default: `last_sent`,
        when `messages` extend the conversation it was given), on the provider's prompt cache
        where it fits (`chatcli.compaction.warm`)."""
        args = self._compaction_args(messages, focus, max_tokens, config, summarizer, previous)
        result = compact(self.provider, messages, sleep=self._sleep, **args)
        self._keep_cut(tuple(messages), result.messages)
        return result

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        focus: str | None = None,
        max_tokens: int | None = None,
        config: CompactionConfig | None = None,
        summarizer: Provider | None = None,
        previous: PreviousRequest | None = None,
    ) -> CompactionResult:
        """The async `compact`."""
        args = self._compaction_args(messages, focus, max_tokens, config, summarizer, previous)
        result = await acompact(self.provider, messages, asleep=self._asleep, **args)
        self._keep_cut(tuple(messages), result.messages)
        return result

    def _compaction_args(
        self,
        messages: Sequence[Message],
        focus: str | None,
        max_tokens: int | None,
        config: CompactionConfig | None,
        summarizer: Provider | None,
        previous: PreviousRequest | None,
    ) -> dict[str, Any]:
        if previous is None and self._sent is not None:
            previous = self._sent.previous_for(messages)
        return {
            "focus": focus,
            "config": config if config is not None else self.compaction,
            "estimator": self.policy.estimator,
            "window": self.policy.context_window,
            "output_reserve": max_tokens or 0,
            "summarizer": summarizer,
            "recovery_config": self.policy.config,
            "previous": previous,
        }

    def _perform(self, action: Action) -> Outcome:
        """Do what the policy asked; a provider's exception is its outcome, not raised here
        (the policy classifies it and re-raises what it cannot recover)."""
        if isinstance(action, Sleep):
            self._sleep(action.seconds)
            return None
        try:
            return self.provider.complete(action.request)
        except Exception as exc:
            return exc

    async def _aperform(self, action: Action) -> Outcome:
        """The async `_perform`."""
        if isinstance(action, Sleep):
            await self._asleep(action.seconds)
            return None
        try:
            return await self.provider.acomplete(action.request)
        except Exception as exc:
            return exc

    def _emit(self, event: Event) -> None:
        logger.log(event.log_level, "%s", event.describe(), extra={"chatcli_event": event})
        if isinstance(event, OverflowDetected) and event.limit is not None:
            self._learn_window(event.limit)
        for hook in self.hooks:
            hook(event)

    def _learn_window(self, limit: int) -> None:
        """An overflow stated the model's window: remember it for the next sends (a declared
        window still wins)."""
        self.learned_windows[self._model] = limit
        if not self._window_declared:
            self.policy = replace(self.policy, context_window=limit)


def _advance(flow: Flow, outcome: Outcome) -> Action | Reply:
    """Answer the flow's last action with `outcome`: its next action, or its Reply."""
    try:
        return flow.send(outcome)
    except StopIteration as done:
        reply: Reply = done.value
        return reply


def _sent_request(
    conversation: tuple[Message, ...], answered: Sequence[Request], reply: Reply
) -> SentRequest | None:
    """What a send that gave `reply` sent last: its latest answered request whose messages are
    the reply's view (a continuation's add the partial answer); None when a recovery level cut
    the conversation."""
    if any(isinstance(event, LevelApplied) for event in reply.events):
        return None
    view = reply.view
    sent = (r for r in reversed(answered) if r.messages is view or r.messages == view)
    request = next(sent, None)
    return None if request is None else SentRequest(conversation=conversation, request=request)


def _asking(flow: Flow, native: NativeCompaction | None) -> Flow:
    """`flow`, whose requests ask for `native` (the provider's own compaction)."""
    outcome: Outcome = None
    while True:
        try:
            action = flow.send(outcome)
        except StopIteration as done:
            reply: Reply = done.value
            return reply
        if isinstance(action, Send):
            action = Send(request=replace(action.request, native_compaction=native))
        outcome = yield action


def _default_estimator(provider: Provider) -> TokenEstimator:
    """Exact counts where they are local, else the calibrated estimate with a learned margin
    (`chatcli.providers.counting.default_estimator`; imported here, when a Client is made, so
    that importing chatcli loads no adapter)."""
    from chatcli.providers.counting import default_estimator

    return default_estimator(provider)


def _declared(provider: Provider, name: str, given: int | None) -> int | None:
    if given is not None:
        return given
    value = getattr(provider, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
