"""The official SDKs' own types as the schema of what chatcli sends to Anthropic and OpenAI and
of what its proxy answers, so that a field we invent, misname or misplace fails a test.

Requests: a body is validated with pydantic's `TypeAdapter` against the SDK's parameter
TypedDict for its endpoint (`anthropic.types[.beta].message_create_params`,
`message_count_tokens_params`; `openai.types.chat.completion_create_params`,
`openai.types.responses.response_create_params`, `response_compact_params`). A TypedDict
ignores keys it does not declare and an `Iterable` field is validated lazily, so the
validated value is materialised and compared with the body: a key the type does not declare
(a misnamed field), or a value it had to coerce, is a `SchemaError` naming its path.

Answers: a whole body or a stream event is validated against the SDK's model
(`BetaMessage`, `BetaRawMessageStreamEvent`; `ChatCompletion`, `ChatCompletionChunk`,
`Response`, `ResponseStreamEvent`, `CompactedResponse`, see `check_answer`). The SDKs' models
accept unknown fields (`extra="allow"`), so every model in the validated tree is walked and
one holding a field its class does not declare is a `SchemaError`.

`check_request(recorded)` picks the type from the request's path, its `stream` flag and, for
Anthropic, its `anthropic-beta` header (the beta types then); paths that are not Anthropic's
or OpenAI's are left alone. The layer needs SDKs that have the compaction types (anthropic with
`BetaCompactionBlockParam`, openai with `ResponseCompactParams`): with older ones (the floors
CI also tests) `SCHEMAS` is False and the checks are skipped, never passed.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter

from tests.replay import Recorded

__all__ = [
    "SCHEMAS",
    "SchemaError",
    "check_answer",
    "check_event",
    "check_request",
    "check_requests",
    "request_type",
]


class SchemaError(AssertionError):
    """A body that is not what the SDK's type describes."""


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


# The layer runs only where both SDKs have the types it checks native compaction with.
SCHEMAS = _has("anthropic.types.beta", "BetaCompactionBlockParam") and _has(
    "openai.types.responses", "ResponseCompactParams"
)

# Request path (without the query) -> the module and TypedDict of its body, and whether the
# type has a whole (`...NonStreaming`) and a streamed (`...Streaming`) variant.
_REQUESTS: Mapping[str, tuple[str, str, bool]] = {
    "/v1/messages": ("anthropic.types.message_create_params", "MessageCreateParams", True),
    "/v1/messages/count_tokens": (
        "anthropic.types.message_count_tokens_params",
        "MessageCountTokensParams",
        False,
    ),
    "/v1/chat/completions": (
        "openai.types.chat.completion_create_params",
        "CompletionCreateParams",
        True,
    ),
    "/v1/responses": (
        "openai.types.responses.response_create_params",
        "ResponseCreateParams",
        True,
    ),
    "/v1/responses/compact": (
        "openai.types.responses.response_compact_params",
        "ResponseCompactParams",
        False,
    ),
}
# Answer kind -> (module, model).
_ANSWERS: Mapping[str, tuple[str, str]] = {
    "anthropic": ("anthropic.types.beta", "BetaMessage"),
    "anthropic-event": ("anthropic.types.beta", "BetaRawMessageStreamEvent"),
    "chat": ("openai.types.chat", "ChatCompletion"),
    "chat-chunk": ("openai.types.chat", "ChatCompletionChunk"),
    "responses": ("openai.types.responses", "Response"),
    "responses-event": ("openai.types.responses", "ResponseStreamEvent"),
    "compacted": ("openai.types.responses", "CompactedResponse"),
    "compaction-item": ("openai.types.responses", "ResponseCompactionItem"),
}


def request_type(path: str, *, stream: bool, beta: bool = False) -> Any:
    """The SDK's TypedDict of a request body sent to `path` (None: not an SDK endpoint);
    `beta`: an Anthropic request with beta flags (its `anthropic-beta` header), which the
    SDK's beta types describe."""
    route = path.partition("?")[0]
    found = _REQUESTS.get(route)
    if found is None:
        return None
    module, name, variants = found
    if route.startswith("/v1/messages") and beta:
        module = module.replace("anthropic.types.", "anthropic.types.beta.")
    if variants:
        name += "Streaming" if stream else "NonStreaming"
    return getattr(importlib.import_module(module), name)


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def check_request(recorded: Recorded, *, allow: frozenset[str] = frozenset()) -> None:
    """`recorded`'s body against its endpoint's SDK type (nothing for another endpoint), but
    for its top-level fields named in `allow`."""
    if not SCHEMAS or recorded.method != "POST":
        return
    body = {k: v for k, v in recorded.json().items() if k not in allow}
    beta = any(name.lower() == "anthropic-beta" for name in recorded.headers)
    kind = request_type(recorded.path, stream=bool(body.get("stream")), beta=beta)
    if kind is None:
        return
    _checked_typed(kind, body, recorded.path)


def _checked_typed(kind: Any, body: Mapping[str, Any], where: str) -> None:
    """`body` against the TypedDict `kind`: valid, and read as it is (module docstring)."""
    try:
        validated = _materialised(_adapter(kind).validate_python(body))
    except ValueError as exc:  # pydantic's ValidationError
        raise SchemaError(f"{where}: {exc}") from None
    wrong = list(_differences(body, validated, ""))
    if wrong:
        raise SchemaError(f"{where}: not in {_name(kind)}: {'; '.join(wrong)}")


def _name(kind: Any) -> str:
    return str(getattr(kind, "__name__", kind))


def check_requests(requests: list[Recorded], *, allow: frozenset[str] = frozenset()) -> None:
    """Every request of `requests` (a replay server's log) against its SDK type."""
    for recorded in requests:
        check_request(recorded, allow=allow)


def check_answer(kind: str, body: Mapping[str, Any]) -> Any:
    """A whole answer (`kind`: anthropic, chat, responses, compacted) against the SDK's model;
    the validated model.

    A compacted answer's `output` is the next request's input (the SDK's `CompactedResponse`
    says "a list of all user messages, followed by a single compaction item", but types it as
    output items, whose messages are the assistant's): its compaction item is checked against
    `ResponseCompactionItem`, its other items against the input item type
    (`ResponseInputItemParam`), the rest of it against `CompactedResponse`."""
    if kind != "compacted":
        return _checked_model(kind, body)
    items = list(body.get("output") or ())
    for item in items:
        if item.get("type") == "compaction":
            _checked_model("compaction-item", item)
        else:
            _checked_typed(_input_item(), item, "output item")
    return _checked_model(kind, {**body, "output": []})


def _input_item() -> Any:
    module = importlib.import_module("openai.types.responses.response_input_item_param")
    return module.ResponseInputItemParam


def check_event(kind: str, event: Mapping[str, Any]) -> Any:
    """A stream event (`kind`: anthropic-event, chat-chunk, responses-event) against the
    SDK's model; the validated model."""
    return _checked_model(kind, event)


def _checked_model(kind: str, body: Mapping[str, Any]) -> Any:
    module, name = _ANSWERS[kind]
    model = _adapter(getattr(importlib.import_module(module), name))
    try:
        validated = model.validate_python(body)
    except ValueError as exc:
        raise SchemaError(f"{name}: {exc}") from None
    extra = list(_extras(validated, name))
    if extra:
        raise SchemaError(f"not in {name}: {'; '.join(extra)}")
    return validated


def _materialised(value: Any) -> Any:
    """`value` with every lazily validated iterable run (which validates its items)."""
    if isinstance(value, Mapping):
        return {key: _materialised(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, Iterator)):
        return [_materialised(item) for item in value]
    return value


def _differences(given: Any, validated: Any, path: str) -> Iterator[str]:
    """Where `validated` differs from `given`: keys the type dropped, values it changed (a
    parameter union may read a block as the SDK's response model, which keeps unknown keys:
    those are reported too)."""
    if isinstance(given, Mapping) and isinstance(validated, BaseModel):
        yield from _differences(given, _fields(validated), path)
    elif isinstance(given, Mapping) and isinstance(validated, Mapping):
        for key, value in given.items():
            if key not in validated:
                yield f"{path}.{key} (no such field)"
            else:
                yield from _differences(value, validated[key], f"{path}.{key}")
    elif isinstance(given, list) and isinstance(validated, list) and len(given) == len(validated):
        for i, (a, b) in enumerate(zip(given, validated, strict=True)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif given != validated or not _same_kind(given, validated):
        yield f"{path} ({given!r} is read as {validated!r})"


def _fields(model: BaseModel) -> dict[str, Any]:
    """A model's declared fields by their wire names (its unknown ones left out)."""
    names = {info.alias or name: name for name, info in type(model).model_fields.items()}
    return {wire: _materialised(getattr(model, name)) for wire, name in names.items()}


def _same_kind(given: Any, validated: Any) -> bool:
    """Whether the type kept the value's JSON kind (an integer is a valid float)."""
    if type(given) is int and type(validated) is float:
        return True
    return type(given) is type(validated)


def _extras(value: Any, path: str) -> Iterator[str]:
    """The fields of models in `value`'s tree that their classes do not declare."""
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            yield f"{path}.{key} (no such field in {type(value).__name__})"
        for name in type(value).model_fields:
            yield from _extras(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _extras(item, f"{path}[{i}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _extras(item, f"{path}.{key}")
