"""`ContextRecoveryMiddleware`: chatcli's recovery on every model call of a LangChain v1 agent.

The middleware wraps the model call (`wrap_model_call` / `awrap_model_call`) and drives
chatcli's `Client` with the rest of the chain as its provider (`_HandlerModel`): each provider
call is one call of LangChain's `handler`, on the request with its messages replaced by the
working view chatcli chose. So the engine is chatcli's own, unchanged:

- pre-flight: when the window is known (`context_window=`, else chatcli's offline catalog, else
  learned from an earlier overflow that stated it), a request known not to fit is recovered
  before it is sent;
- an overflow of any chat model (classified by `chatcli.errors.classify_error` on the exception
  and its whole cause chain; a LangChain `ContextOverflowError` counts as one whatever its
  wording) applies recovery levels 1-3 to `request.messages` and retries;
- an answer cut at max_tokens (`finish_reason: length`, `stop_reason: max_tokens`, ...) is
  escalated and continued: the handler is called again with the partial answer and chatcli's
  continuation request, and the parts are stitched into one `AIMessage`.

The agent state is never touched: only the request the model sees is shaped (like
`ContextEditingMiddleware`), so `state["messages"]` keeps every message whole. The request's
other fields (tools, tool_choice, response_format, model settings) go with every call as they
came; only the output limit changes, when chatcli raises it for a continuation or fits it to
the room an overflow error states. What chatcli
did is in `on_event` and the "chatcli" logger, and in the answer's
`response_metadata["chatcli"]` when it changed the call.

Tool calls in a cut answer: a call whose arguments did not parse (`invalid_tool_calls`) and,
in an answer cut at max_tokens, the last call even when its arguments happen to parse, are
never forwarded (they are dropped from `tool_calls`, `invalid_tool_calls` and the raw
`additional_kwargs`; a `ToolCallsDropped` event names them). An answer that still holds
complete calls is returned at once, for the agent to run them; an answer with none is continued.

Errors that are not overflows reach the caller unchanged (the original exception, so outer
middleware such as `ModelRetryMiddleware` sees what it expects); chatcli does not retry them
itself (the chat model and LangChain's retry middleware do). When recovery runs out, chatcli's
`ContextRecoveryError` is raised, chained to the provider's error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, NoReturn, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import AgentState
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.utils.function_calling import convert_to_openai_tool

from chatcli.client import Client
from chatcli.config import RecoveryConfig
from chatcli.errors import ConfigError, ErrorKind, ProviderError, classify_error
from chatcli.events import Event
from chatcli.integrations.langchain.convert import (
    Converted,
    answer_to_chatcli,
    replace_answer,
    to_chatcli,
)
from chatcli.policy.actions import Reply
from chatcli.providers._common import model_limits
from chatcli.providers.base import Request, Response, ToolSpec
from chatcli.providers.counting import default_estimator
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["ContextRecoveryMiddleware"]

# The invoke keyword that sets the output limit, by the chat model field that declares it
# (ChatOpenAI / ChatAnthropic `max_tokens`, ChatGoogleGenerativeAI `max_output_tokens`,
# ChatOllama `num_predict`); the first field a model has is the one used.
_OUTPUT_LIMIT_FIELDS = ("max_tokens", "max_output_tokens", "num_predict")
# The chat model fields that name the model, for the catalog and the learned windows.
_MODEL_NAME_FIELDS = ("model_name", "model", "model_id")


class ContextRecoveryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Recovers every model call of an agent from context overflow and cut answers.

    `context_window`: the model's window in tokens (prompt + output); default: chatcli's
    catalog by model name, else learned from the first overflow that states it.
    `config`: recovery settings (`RecoveryConfig()` unless given; `RecoveryConfig.from_env()`
    reads the CHATCLI_* variables). `estimator`: how views are measured before sending
    (default: exact for OpenAI model names, else chatcli's calibrated estimate).
    `on_event`: called with each chatcli event as it happens (they are also logged under
    "chatcli"). `learned_windows`: windows by model name, learned from overflow errors that
    stated them; pass what an app persisted, read it back to persist it.
    """

    def __init__(
        self,
        *,
        context_window: int | None = None,
        config: RecoveryConfig | None = None,
        estimator: TokenEstimator | None = None,
        on_event: Callable[[Event], None] | None = None,
        learned_windows: dict[str, int] | None = None,
    ) -> None:
        super().__init__()
        if context_window is not None and (
            not isinstance(context_window, int)
            or isinstance(context_window, bool)
            or context_window < 1
        ):
            raise ConfigError(
                f"context_window={context_window!r} must be a positive integer or None"
            )
        self.context_window = context_window
        self.config = config if config is not None else RecoveryConfig()
        self.estimator = estimator
        self.on_event = on_event
        self.learned_windows: dict[str, int] = {} if learned_windows is None else learned_windows
        self._estimators: dict[str, TokenEstimator] = {}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        model = _HandlerModel(request, handler)
        try:
            outcome: Reply | ProviderError = self._client(model).send(**model.send_args())
        except ProviderError as exc:
            outcome = exc
        return model.finish(outcome)  # raised outside the except block: see `finish`

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        model = _HandlerModel(request, handler)
        try:
            outcome: Reply | ProviderError = await self._client(model).asend(**model.send_args())
        except ProviderError as exc:
            outcome = exc
        return model.finish(outcome)

    def _client(self, model: _HandlerModel) -> Client:
        """A Client for one model call: its provider is the handler of this call; what lasts
        across calls (learned windows, the estimator's calibration) is kept here."""
        window, cap = model_limits(model.model, "", self.context_window, None)
        hooks = () if self.on_event is None else (self.on_event,)
        client = Client(
            model,
            self.config,
            hooks=hooks,
            estimator=self._estimator(model),
            context_window=window,
            max_output_tokens=cap,
            max_retries=0,  # the chat model and LangChain's retry middleware retry already
            learned_windows=self.learned_windows,
        )
        client.learned_windows = self.learned_windows  # shared: what it learns lasts
        return client

    def _estimator(self, model: _HandlerModel) -> TokenEstimator:
        if self.estimator is not None:
            return self.estimator
        if model.model not in self._estimators:
            self._estimators[model.model] = default_estimator(model)
        return self._estimators[model.model]


class _HandlerModel:
    """chatcli's provider for one model call: a call is one call of LangChain's handler.

    It remembers the last `ModelResponse` (the answer is returned in LangChain's own types),
    the usage of every call, and the last exception the handler raised (so that an error
    recovery does not handle reaches the caller as it was).
    """

    def __init__(self, request: ModelRequest[Any], handler: Callable[..., Any]) -> None:
        self.request, self.handler = request, handler
        self.model = _model_name(request.model)
        system = () if request.system_message is None else (request.system_message,)
        self.converted: Converted = to_chatcli([*system, *request.messages])
        self.limit_field, self.max_tokens = _output_limit(request)
        self.last: ModelResponse[Any] | None = None
        self.usage: UsageMetadata | None = None
        self.raised: Exception | None = None

    def send_args(self) -> dict[str, Any]:
        """The arguments of `Client.send` for this call."""
        return {
            "messages": self.converted.messages,
            "max_tokens": self.max_tokens,
            "tools": _tool_specs(self.request.tools),
        }

    def complete(self, request: Request) -> Response:
        try:
            response = self.handler(self.model_request(request))
        except Exception as exc:
            self.fail(exc)
        return self.answered(response)

    async def acomplete(self, request: Request) -> Response:
        try:
            response = await self.handler(self.model_request(request))
        except Exception as exc:
            self.fail(exc)
        return self.answered(response)

    def model_request(self, request: Request) -> ModelRequest[Any]:
        """LangChain's request for chatcli's: the view as messages, the output limit chatcli
        chose when it differs from the model's own. Everything else is the caller's."""
        messages = self.converted.back(request.messages)
        system = self.request.system_message
        if system is not None and messages and isinstance(messages[0], SystemMessage):
            system, messages = messages[0], messages[1:]
        settings = self.request.model_settings
        if self.limit_field is not None and request.max_tokens != self.max_tokens:
            settings = {**settings, self.limit_field: request.max_tokens}
        return self.request.override(
            messages=cast("list[AnyMessage]", messages),
            system_message=system,
            model_settings=settings,
        )

    def answered(self, response: ModelResponse[Any]) -> Response:
        self.last = response
        answer = _answer(response)
        self.usage = add_usage(self.usage, answer.usage_metadata)
        return answer_to_chatcli(answer)

    def fail(self, exc: Exception) -> NoReturn:
        """Raise the handler's exception for the policy to classify; a LangChain
        `ContextOverflowError` that chatcli's classifier does not recognise as an overflow is
        one all the same (the chat model's integration says so)."""
        self.raised = exc
        info = classify_error(exc)
        if isinstance(exc, ContextOverflowError) and info.kind is not ErrorKind.CONTEXT_OVERFLOW:
            overflow = replace(info, kind=ErrorKind.CONTEXT_OVERFLOW, reason="ContextOverflowError")
            raise ProviderError(overflow) from exc
        raise exc

    def finish(self, outcome: Reply | ProviderError) -> ModelResponse[Any]:
        """The answer, or the error: the handler's own exception when the policy re-raised it
        as a `ProviderError` (an error recovery does not handle reaches the caller as it was;
        raised here, outside any except block, its own chain is left as it was)."""
        if isinstance(outcome, Reply):
            return self.result(outcome)
        if self.raised is not None and outcome.__cause__ is self.raised:
            raise self.raised
        raise outcome

    def result(self, reply: Reply) -> ModelResponse[Any]:
        """The last `ModelResponse`, as it came when chatcli changed nothing; else with its
        answer replaced by chatcli's (stitched, cut calls dropped), the usage of every call,
        and `response_metadata["chatcli"]` saying what was done."""
        last = self.last
        if last is None:  # the policy returns a Reply only after an answer
            raise AssertionError("a Reply with no model answer")
        answer = _answer(last)
        if not reply.events and reply.message == answer_to_chatcli(answer).message:
            return last
        done = {
            "calls": reply.calls,
            "truncated": reply.truncated,
            "events": [event.describe() for event in reply.events],
        }
        metadata = {**answer.response_metadata, "chatcli": done}
        fields = {"response_metadata": metadata, "usage_metadata": self.usage}
        new = replace_answer(answer, reply.message, **fields)
        result = [new if message is answer else message for message in last.result]
        return ModelResponse(result=result, structured_response=last.structured_response)


def _answer(response: ModelResponse[Any]) -> AIMessage:
    """The model's answer in a `ModelResponse` (its first AIMessage)."""
    found = next((m for m in response.result if isinstance(m, AIMessage)), None)
    if found is None:
        raise TypeError(f"the model call returned no AIMessage: {response.result!r}")
    return found


def _model_name(model: Any) -> str:
    for name in _MODEL_NAME_FIELDS:
        value = getattr(model, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _output_limit(request: ModelRequest[Any]) -> tuple[str | None, int | None]:
    """(the invoke keyword of the output limit, the limit in force) for the request's model:
    the request's `model_settings` win over the model's field."""
    for name in _OUTPUT_LIMIT_FIELDS:
        if name in request.model_settings or name in type(request.model).model_fields:
            value = request.model_settings.get(name, getattr(request.model, name, None))
            return name, value if isinstance(value, int) and value > 0 else None
    return None, None


def _tool_specs(tools: Sequence[Any]) -> tuple[ToolSpec, ...]:
    """The request's tools as chatcli's `ToolSpec`s, for measuring the prompt (the handler sends
    the tools themselves). A provider's built-in tool with no schema is left out."""
    specs = []
    for tool in tools:
        try:
            function = convert_to_openai_tool(tool)["function"]
        except (KeyError, TypeError, ValueError):
            continue
        specs.append(
            ToolSpec(
                name=function["name"],
                description=function.get("description", ""),
                parameters=function.get("parameters", {}),
            )
        )
    return tuple(specs)
