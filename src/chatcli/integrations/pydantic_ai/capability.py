"""`ContextRecovery`: chatcli's recovery engine as a pydantic-ai (v2) capability.

pydantic-ai runs each model request step as one or more *attempts*; a capability shapes what
an attempt sends in `prepare_model_request`, and asks for another attempt by raising
`RetryModelRequest` from `on_model_request_error` (the call failed) or `after_model_request`
(its answer is rejected). `ContextRecovery` drives chatcli's recovery policy (the sans-IO
generator of `chatcli.policy`) through those hooks, one policy run per request step:

- `prepare_model_request` sends the request the policy asks for: at the first attempt, the
  step's messages pre-flighted (fitted to the window before sending, when the window is
  known: `context_window=`, chatcli's catalog, or learned from an earlier overflow); after an
  overflow, the view of the next recovery level; after a cut answer, its continuation with a
  raised `max_tokens`. The request's messages are replaced for that attempt only: the run's
  message history (`ctx.messages`, `result.all_messages()`) is never rewritten.
- `on_model_request_error` classifies the error with `chatcli.errors.classify_error` (the
  exception and every exception it wraps, so an overflow of any provider counts, not only
  `ModelContextWindowExceededError`); an overflow or an output-cap error goes to the policy,
  anything else propagates untouched (the SDK and pydantic-ai retry what is transient).
- `after_model_request` hands the answer to the policy: an answer cut at `max_tokens` is
  continued (not for a streamed request: pydantic-ai has already streamed it to the caller,
  and a streamed response cannot be re-attempted), and the stitched answer is returned.

Every event goes to `on_event` and to the "chatcli" logger.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Final, cast

from pydantic_ai import messages as pai
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import AgentDepsT, RunContext

from chatcli.catalog import lookup
from chatcli.config import RecoveryConfig
from chatcli.errors import ErrorKind, ProviderError, classify_error, is_context_window_stop
from chatcli.events import Event, OverflowDetected, logger
from chatcli.integrations.pydantic_ai.convert import assistant_message, to_chatcli, to_pydantic_ai
from chatcli.messages import Message, StopReason, Usage
from chatcli.policy.actions import Flow, Outcome, Reply, Send
from chatcli.policy.policy import RecoveryPolicy
from chatcli.providers.base import Response
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["ContextRecovery"]

# The error kinds the policy answers with a new request; others are not recovery's business.
_RECOVERABLE: Final = frozenset({ErrorKind.CONTEXT_OVERFLOW, ErrorKind.OUTPUT_CAP})

_STOP_REASONS: Final[dict[str | None, StopReason]] = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_call": StopReason.TOOL_USE,
    "content_filter": StopReason.REFUSAL,
}
_FINISH_REASONS: Final[dict[StopReason, pai.FinishReason]] = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_WINDOW: "length",
    StopReason.TOOL_USE: "tool_call",
    StopReason.REFUSAL: "content_filter",
    StopReason.COMPACTION: "stop",  # as pydantic-ai's Anthropic model maps it
}


@dataclass(slots=True, kw_only=True)
class _Step:
    """The policy run of one request step. Mutable, private to the capability's run."""

    flow: Flow
    action: Send  # what the next attempt sends
    transcript: tuple[Message, ...]  # the step's messages, as chatcli messages
    max_tokens: int | None  # the step's own max_tokens setting


class ContextRecovery(AbstractCapability[AgentDepsT]):
    """Keeps an agent's model requests inside the model's context window (see the module).

    `context_window` / `max_output_tokens`: the model's limits in tokens; by default looked up
    in chatcli's catalog by model name, else learned from the first overflow that states them.
    `config`: the recovery levels and escalations (`RecoveryConfig`, or
    `RecoveryConfig.from_env()` for the CHATCLI_* variables); `max_token_escalations=0` turns
    continuation off. `estimator`: how prompts are counted before sending; by default what
    `Client` uses (`chatcli.providers.counting.default_estimator`): tiktoken for an OpenAI
    model name, else the calibrated estimate with a learned margin. For a llama.cpp server,
    `CountingEstimator(counter=RemoteCounter(LlamaServerTokens(...)))` counts exactly.
    `on_event`: receives every chatcli event (they are also logged under "chatcli"); kept as
    `event_callback`, since `on_event` is the name of pydantic-ai's own hook for run events.
    `learned_windows`: windows learned from overflows, by model name; shared by the runs of
    the agent, so only a model's first overflow costs a rejected call.
    """

    def __init__(
        self,
        *,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        config: RecoveryConfig | None = None,
        estimator: TokenEstimator | None = None,
        on_event: Callable[[Event], None] | None = None,
        learned_windows: dict[str, int] | None = None,
        id: str | None = None,
        description: str | None = None,
    ) -> None:
        # The policy validates the limits with its own messages (naming the bad argument).
        RecoveryPolicy(context_window=context_window, max_output_tokens=max_output_tokens)
        self.id, self.description, self.defer_loading = id, description, False
        self.context_window, self.max_output_tokens = context_window, max_output_tokens
        self.config = config if config is not None else RecoveryConfig()
        self.estimator = estimator
        self.event_callback = on_event
        self.learned_windows = learned_windows if learned_windows is not None else {}
        self._step: _Step | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # takes a callback: not spec-serializable

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractCapability[AgentDepsT]:
        fresh = copy.copy(self)  # `learned_windows` stays shared with the agent's instance
        fresh._step = None
        return fresh

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self._step = None  # a new step: its policy run starts at its first attempt
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        step = self._step
        if step is None:
            step = self._step = self._start(request_context)
        request = step.action.request
        if request.messages != step.transcript:
            request_context.messages = to_pydantic_ai(request.messages)
        if request.max_tokens != step.max_tokens:
            settings = dict(request_context.model_settings or {})
            settings["max_tokens"] = request.max_tokens
            request_context.model_settings = cast(ModelSettings, settings)
        return request_context

    async def on_model_request_error(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, error: Exception
    ) -> pai.ModelResponse:
        info = classify_error(error)
        if self._step is None or info.kind not in _RECOVERABLE:
            raise error
        failure = ProviderError(info)
        failure.__cause__ = error  # what a `ContextRecoveryError` chains to
        return self._advance(failure, None, error)

    async def after_model_request(
        self,
        ctx: RunContext[AgentDepsT],
        *,
        request_context: ModelRequestContext,
        response: pai.ModelResponse,
    ) -> pai.ModelResponse:
        if self._step is None:
            return response  # a recovered error's response, or a step already finished
        if request_context.streaming:
            self._step = None  # already streamed to the caller: cannot be continued
            return response
        return self._advance(_response(response), response, None)

    # -- the policy run ---------------------------------------------------------------------

    def _start(self, request_context: ModelRequestContext) -> _Step:
        model = request_context.model
        name = model.model_name
        info = lookup(name, model.system)
        # Declared, then learned (what the server itself stated), then the catalog's.
        window = self.context_window or self.learned_windows.get(name)
        window = window or (info.context_window if info else None)
        cap = self.max_output_tokens or (info.max_output_tokens if info else None)
        policy = RecoveryPolicy(
            config=self.config,
            estimator=self.estimator or _default_estimator(name),
            context_window=window,
            max_output_tokens=cap,
            max_retries=0,  # transient errors never reach the policy (see the module)
        )
        transcript = to_chatcli(request_context.messages, _preamble(request_context))
        max_tokens = (request_context.model_settings or {}).get("max_tokens")
        flow = policy.flow(transcript, max_tokens=max_tokens, emit=lambda e: self._emit(e, name))
        action = next(flow)
        assert isinstance(action, Send)  # a flow starts with a request
        return _Step(flow=flow, action=action, transcript=transcript, max_tokens=max_tokens)

    def _advance(
        self, outcome: Outcome, response: pai.ModelResponse | None, error: Exception | None
    ) -> pai.ModelResponse:
        """Give the policy the attempt's outcome: raise `RetryModelRequest` for the request it
        asks for next, or return the answer it finished with (its errors propagate)."""
        step = self._step
        assert step is not None  # for the type checker: the hooks checked it
        try:
            action = step.flow.send(outcome)
        except StopIteration as done:
            self._step = None
            reply: Reply = done.value
            return _reply_response(reply, response)
        except BaseException:
            self._step = None
            raise
        # No Sleep: no error the policy would wait on reaches it (see `_RECOVERABLE`).
        assert isinstance(action, Send)
        step.action = action
        raise RetryModelRequest() from error

    def _emit(self, event: Event, model: str) -> None:
        logger.log(event.log_level, "%s", event.describe(), extra={"chatcli_event": event})
        if isinstance(event, OverflowDetected) and event.limit is not None:
            self.learned_windows[model] = event.limit
        if self.event_callback is not None:
            self.event_callback(event)


@functools.lru_cache(maxsize=32)
def _default_estimator(model: str) -> TokenEstimator:
    """`Client`'s default estimator for a provider serving `model` (frozen: safe to share)."""
    from chatcli.providers.counting import default_estimator

    return default_estimator(SimpleNamespace(model=model))


def _preamble(request_context: ModelRequestContext) -> str | None:
    """What the model is sent besides the history, for the window estimate: the agent's
    instructions and its tools' definitions (each tool's name, description and schema)."""
    parameters = request_context.model_request_parameters
    tools = [*parameters.function_tools, *parameters.output_tools]
    schemas = [
        json.dumps([t.name, t.description, t.parameters_json_schema], ensure_ascii=False)
        for t in tools
    ]
    instructions = pai.InstructionPart.join(parameters.instruction_parts or [])
    return "\n\n".join(filter(None, [instructions, *schemas])) or None


def _response(response: pai.ModelResponse) -> Response:
    """A pydantic-ai answer as the policy's `Response`."""
    usage = Usage(
        input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens
    )
    return Response(
        message=assistant_message(response), stop_reason=_stop_reason(response), usage=usage
    )


def _stop_reason(response: pai.ModelResponse) -> StopReason:
    raw = (response.provider_details or {}).get("finish_reason")
    if isinstance(raw, str) and is_context_window_stop(raw):
        return StopReason.CONTEXT_WINDOW  # the window filled up while answering
    if raw == "compaction":  # Anthropic paused after compacting (pydantic-ai says "stop")
        return StopReason.COMPACTION
    return _STOP_REASONS.get(response.finish_reason, StopReason.OTHER)


def _reply_response(reply: Reply, response: pai.ModelResponse | None) -> pai.ModelResponse:
    """The answer the policy finished with: `response` itself when the policy kept it as it
    was, else the stitched (or cut) answer with the last response's usage and metadata."""
    if response is not None and reply.message == assistant_message(response):
        return response
    answer = to_pydantic_ai((reply.message,))
    parts: Sequence[pai.ModelResponsePart] = cast(pai.ModelResponse, answer[-1]).parts
    base = response if response is not None else pai.ModelResponse(parts=[])
    finish: Any = _FINISH_REASONS.get(reply.stop_reason, base.finish_reason)
    return replace(base, parts=list(parts), finish_reason=finish)
