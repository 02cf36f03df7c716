"""Typed models of the request bodies chatcli takes, to check a body before a dialect reads
it: a malformed body is the client's 400 naming the field, never a crash in a parser or a
request an upstream rejects.

One model per wire format: `ChatCompletionsRequest` (OpenAI Chat Completions),
`ResponsesRequest` (OpenAI Responses), `MessagesRequest` (Anthropic Messages) and
`CountTokensRequest` (its `count_tokens`: the same body without `max_tokens`). They are as
permissive as the APIs and the clients in front of them: every object takes fields it does
not declare (the proxy forwards what it does not read), content is a string or a list of
parts, and a part, block, item or tool of a type not listed here is taken when it is an
object with a string `type` (images, documents, hosted tools, namespace tools, whatever a
newer API adds). What is declared is checked strictly, as JSON gives it (no coercion: `"10"`
is not a number, `true` is not 1), so that a body that passes is one the dialects can read.

A field the wire format gives another role or item type is not taken where it does not
belong (a system message's `tool_calls`, a `function_call` item's `role`), nor a block of the
other side's turn (a `tool_use` block in a user turn): the APIs refuse them ("Additional
properties are not allowed"), and a dialect would read them as what they are elsewhere. The
lists follow openai-python's message and item types and Anthropic's content blocks (which
the assistant writes: text, `tool_use`, thinking; which the user sends: `tool_result`); a
`null` is taken as absent. Ids and names are non-empty and at most `MAX_ID_CHARS`; declared
integers fit in 64 bits.

`check` also refuses what no JSON API takes anywhere in a body, declared field or not: a
string holding a lone surrogate (`"\\ud800"`, which cannot be written as UTF-8) and a
non-finite number (`NaN`, `Infinity`, which Python's `json` reads but JSON has not).

The models are only checked against, never used to rebuild a body: what is forwarded is the
client's own JSON. This module needs nothing but pydantic. One module because the four
request models are built from the same parts (content, the tagged unions, `Foreign`, `Id`)
and checked by one `check`: split, each wire format would repeat them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "ChatCompletionsRequest",
    "CountTokensRequest",
    "InvalidBody",
    "MessagesRequest",
    "ResponsesRequest",
    "check",
]

# No model writes this many tokens; a larger limit is a mistake an upstream would reject.
MAX_TOKENS = 2**31 - 1
# Deeper than any real body (JSON schemas of tools included), well within what Python's JSON
# writers reach from the stack they run on.
MAX_DEPTH = 256
# No API's id or name comes near this (OpenAI's and Anthropic's are under 100 characters).
MAX_ID_CHARS = 256
Tokens: TypeAlias = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Object: TypeAlias = dict[str, Any]
Id: TypeAlias = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
Int64: TypeAlias = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]


def _not_taken(value: Any) -> Any:
    if value is None:
        return None
    raise PydanticCustomError(
        "not_taken", "a field of another role or item type, which this one does not take"
    )


# A field the wire format gives another role or item type (module docstring).
Foreign: TypeAlias = Annotated[Any, AfterValidator(_not_taken)]


class InvalidBody(ValueError):
    """A body that is not one of its wire format: `field` is where (`messages[2].role`; None
    for the body itself), the message says what is wrong there."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field or None


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


# Unions pick their member by a tag a function gives (None: the value is none of them, and
# the error says what was expected). Tags hold "=", which no field name does, so that an
# error's location can leave them out (`_where`).


def _picked(pick: Callable[[Any], str | None], expected: str) -> Discriminator:
    return Discriminator(pick, custom_error_type="invalid_union", custom_error_message=expected)


def _by_type(known: frozenset[str], *, untyped: str | None = None) -> Callable[[Any], str | None]:
    """A tag by the `type` field: `type=NAME` for a known type, `type=*` for any other
    string; an object with no `type` is tagged `untyped` (the member whose error then says
    `type` is missing, or one whose `type` has a default)."""

    def pick(value: Any) -> str | None:
        if not isinstance(value, dict):
            return None
        kind = value.get("type")
        if kind is None:
            return untyped
        if not isinstance(kind, str):
            return None
        return f"type={kind}" if kind in known else "type=*"

    return pick


def _by_role(roles: frozenset[str]) -> Callable[[Any], str | None]:
    """A tag by the `role` field: `role=NAME` for a known role, `role=*` for any other."""

    def pick(value: Any) -> str | None:
        if not isinstance(value, dict):
            return None
        role = value.get("role")
        return f"role={role}" if isinstance(role, str) and role in roles else "role=*"

    return pick


def _json_kind(value: Any) -> str | None:
    """`json=str`, `json=list` or `json=object`: which of them a union of them takes."""
    for kind, name in ((str, "str"), (list, "list"), (dict, "object")):
        if isinstance(value, kind):
            return f"json={name}"
    return None


_CONTENT = _picked(_json_kind, "must be a string or a list of content parts")
_PART = "must be a content part: an object with a string type"


class _Typed(_Wire):
    """A part, block, item or tool of a type this module does not list: any object with a
    string `type` (and any fields)."""

    type: str


class _Text(_Wire):
    type: str
    text: str


# -- OpenAI Chat Completions -------------------------------------------------------------


class _ImageURL(_Wire):
    type: Literal["image_url"]
    image_url: Annotated[Object, Field(min_length=1)]


ChatPart: TypeAlias = Annotated[
    Annotated[_Text, Tag("type=text")]
    | Annotated[_ImageURL, Tag("type=image_url")]
    | Annotated[_Typed, Tag("type=*")],
    _picked(_by_type(frozenset({"text", "image_url"}), untyped="type=text"), _PART),
]
ChatContent: TypeAlias = Annotated[
    Annotated[str, Tag("json=str")] | Annotated[list[ChatPart], Tag("json=list")],
    _CONTENT,
]


class _Function(_Wire):
    name: Id
    # A string on the wire; some servers' answers give an object, which clients send back.
    arguments: Annotated[
        Annotated[str, Tag("json=str")] | Annotated[Object, Tag("json=object")],
        _picked(_json_kind, "must be a string (of JSON) or an object"),
    ]


class _FunctionCall(_Wire):
    id: Id | None = None
    type: Literal["function"] = "function"
    function: _Function


ChatToolCall: TypeAlias = Annotated[
    Annotated[_FunctionCall, Tag("type=function")] | Annotated[_Typed, Tag("type=*")],
    _picked(
        _by_type(frozenset({"function"}), untyped="type=function"),
        "must be a tool call: an object with a string type",
    ),
]


class _ChatMessage(_Wire):
    """The fields openai-python's message param types give one role or another: refused here
    (`Foreign`), and declared again by the roles that take them."""

    name: Foreign = None
    tool_calls: Foreign = None
    function_call: Foreign = None
    refusal: Foreign = None
    audio: Foreign = None
    tool_call_id: Foreign = None


class _SystemMessage(_ChatMessage):
    role: Literal["system", "developer"]
    content: ChatContent
    name: str | None = None


class _UserMessage(_ChatMessage):
    role: Literal["user"]
    content: ChatContent
    name: str | None = None


class _AssistantMessage(_ChatMessage):
    role: Literal["assistant"]
    content: ChatContent | None = None
    refusal: str | None = None
    tool_calls: list[ChatToolCall] | None = None
    name: str | None = None
    function_call: Any = None
    audio: Any = None


class _ToolMessage(_ChatMessage):
    role: Literal["tool"]
    content: ChatContent
    tool_call_id: Id


_CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


class _OtherRole(_Wire):
    """A message of no role above: refused, naming its `role`."""

    role: Literal[_CHAT_ROLES]  # type: ignore[valid-type]


ChatMessage: TypeAlias = Annotated[
    Annotated[_SystemMessage, Tag("role=system")]
    | Annotated[_SystemMessage, Tag("role=developer")]
    | Annotated[_UserMessage, Tag("role=user")]
    | Annotated[_AssistantMessage, Tag("role=assistant")]
    | Annotated[_ToolMessage, Tag("role=tool")]
    | Annotated[_OtherRole, Tag("role=*")],
    _picked(_by_role(frozenset(_CHAT_ROLES)), "must be a message: an object with a role"),
]


class _FunctionSpec(_Wire):
    name: Id
    description: str | None = None
    parameters: Object | None = None
    strict: bool | None = None


class _FunctionTool(_Wire):
    type: Literal["function"]
    function: _FunctionSpec


ChatTool: TypeAlias = Annotated[
    Annotated[_FunctionTool, Tag("type=function")] | Annotated[_Typed, Tag("type=*")],
    _picked(
        _by_type(frozenset({"function"}), untyped="type=function"),
        "must be a tool: an object with a string type",
    ),
]


ToolChoice: TypeAlias = Annotated[
    Annotated[str, Tag("json=str")] | Annotated[_Typed, Tag("json=object")],
    _picked(_json_kind, "must be a string or an object with a string type"),
]


class _StreamOptions(_Wire):
    include_usage: bool | None = None


class ChatCompletionsRequest(_Wire):
    """`POST /v1/chat/completions`."""

    model: str | None = None
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: Tokens | None = None
    max_completion_tokens: Tokens | None = None
    tools: list[ChatTool] | None = None
    stream: bool | None = None
    stream_options: _StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: Int64 | None = None
    stop: (
        Annotated[
            Annotated[str, Tag("json=str")] | Annotated[list[str], Tag("json=list")],
            _picked(_json_kind, "must be a string or a list of strings"),
        ]
        | None
    ) = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: _Typed | None = None
    reasoning_effort: str | None = None


# -- OpenAI Responses --------------------------------------------------------------------

ResponsesPart: TypeAlias = Annotated[
    Annotated[_Text, Tag("type=input_text")]
    | Annotated[_Text, Tag("type=output_text")]
    | Annotated[_Text, Tag("type=text")]
    | Annotated[_Typed, Tag("type=*")],
    _picked(_by_type(frozenset({"input_text", "output_text", "text"}), untyped="type=text"), _PART),
]
ResponsesContent: TypeAlias = Annotated[
    Annotated[str, Tag("json=str")] | Annotated[list[ResponsesPart], Tag("json=list")],
    _CONTENT,
]


class _Item(_Wire):
    """The fields openai-python's input item types give one item type or another: refused
    here (`Foreign`), and declared again by the types that take them."""

    id: Id | None = None
    status: str | None = None
    role: Foreign = None
    content: Foreign = None
    phase: Foreign = None
    arguments: Foreign = None
    async_: Foreign = Field(None, alias="async")
    call_id: Foreign = None
    caller: Foreign = None
    name: Foreign = None
    namespace: Foreign = None
    output: Foreign = None
    summary: Foreign = None
    encrypted_content: Foreign = None


class _InputMessage(_Item):
    """`EasyInputMessageParam`, `Message`, `ResponseOutputMessageParam`."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: ResponsesContent
    phase: str | None = None


class _FunctionCallItem(_Item):
    """`ResponseFunctionToolCallParam`."""

    type: Literal["function_call"]
    call_id: Id
    name: Id
    arguments: str
    namespace: str | None = None
    async_: Any = Field(None, alias="async")
    caller: Any = None


class _FunctionCallOutput(_Item):
    """`FunctionCallOutput`."""

    type: Literal["function_call_output"]
    call_id: Id
    output: ResponsesContent
    name: str | None = None
    namespace: str | None = None
    caller: Any = None


class _Reasoning(_Item):
    """`ResponseReasoningItemParam`."""

    type: Literal["reasoning"]
    summary: list[Object] | None = None
    encrypted_content: str | None = None
    content: Any = None


class _Compaction(_Wire):
    """A compaction item sent back (openai-python's `ResponseCompactionItemParam`)."""

    type: Literal["compaction"]
    encrypted_content: str
    id: Id | None = None


class _CompactionTrigger(_Wire):
    """The inline trigger (`CompactionTrigger`): compact the input before it."""

    type: Literal["compaction_trigger"]
    id: Id | None = None


ResponsesItem: TypeAlias = Annotated[
    Annotated[_InputMessage, Tag("type=message")]
    | Annotated[_FunctionCallItem, Tag("type=function_call")]
    | Annotated[_FunctionCallOutput, Tag("type=function_call_output")]
    | Annotated[_Reasoning, Tag("type=reasoning")]
    | Annotated[_Compaction, Tag("type=compaction")]
    | Annotated[_CompactionTrigger, Tag("type=compaction_trigger")]
    | Annotated[_Typed, Tag("type=*")],
    _picked(
        _by_type(
            frozenset(
                {
                    "message",
                    "function_call",
                    "function_call_output",
                    "reasoning",
                    "compaction",
                    "compaction_trigger",
                }
            ),
            untyped="type=message",  # an "easy" message: a role and content only
        ),
        "must be an input item: an object with a string type (or a message's role)",
    ),
]


class _ResponsesFunctionTool(_Wire):
    type: Literal["function"]
    name: Id
    description: str | None = None
    parameters: Object | None = None
    strict: bool | None = None


ResponsesTool: TypeAlias = Annotated[
    Annotated[_ResponsesFunctionTool, Tag("type=function")] | Annotated[_Typed, Tag("type=*")],
    _picked(
        _by_type(frozenset({"function"}), untyped="type=function"),
        "must be a tool: an object with a string type",
    ),
]


class _ReasoningOptions(_Wire):
    effort: str | None = None


class _ContextManagement(_Wire):
    """One `context_management` entry (`ContextManagement`): "compaction" is the only type."""

    type: str
    compact_threshold: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None


class ResponsesRequest(_Wire):
    """`POST /v1/responses` (and `POST /v1/responses/compact`, a subset of its fields)."""

    model: str | None = None
    input: Annotated[
        Annotated[str, Tag("json=str")]
        | Annotated[Annotated[list[ResponsesItem], Field(min_length=1)], Tag("json=list")],
        _picked(_json_kind, "must be a string or a non-empty list of input items"),
    ]
    instructions: str | None = None
    max_output_tokens: Tokens | None = None
    tools: list[ResponsesTool] | None = None
    stream: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning: _ReasoningOptions | None = None
    context_management: list[_ContextManagement] | None = None


# -- Anthropic Messages ------------------------------------------------------------------


class _ToolUse(_Wire):
    type: Literal["tool_use"]
    id: Id
    name: Id
    input: Object


class _Thinking(_Wire):
    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class _RedactedThinking(_Wire):
    type: Literal["redacted_thinking"]
    data: str


_BLOCK = "must be a content block: an object with a string type"
ResultBlock: TypeAlias = Annotated[
    Annotated[_Text, Tag("type=text")] | Annotated[_Typed, Tag("type=*")],
    _picked(_by_type(frozenset({"text"}), untyped="type=text"), _BLOCK),
]


ResultContent: TypeAlias = Annotated[
    Annotated[str, Tag("json=str")] | Annotated[list[ResultBlock], Tag("json=list")], _CONTENT
]


class _ToolResult(_Wire):
    type: Literal["tool_result"]
    tool_use_id: Id
    content: ResultContent | None = None
    is_error: bool | None = None


class _ModelsBlock(_Wire):
    """A block only the model writes (`tool_use`, thinking), outside an assistant turn."""

    type: str

    @model_validator(mode="after")
    def _refused(self) -> _ModelsBlock:
        raise PydanticCustomError(
            "not_taken",
            "a {kind} block is written by the model: only an assistant turn holds it",
            {"kind": self.type},
        )


class _UsersBlock(_Wire):
    """A `tool_result` block outside a user turn: the user sends the results."""

    type: str

    @model_validator(mode="after")
    def _refused(self) -> _UsersBlock:
        raise PydanticCustomError(
            "not_taken", "a tool_result block is sent by the user: only a user turn holds it"
        )


_BLOCK_TYPES = frozenset({"text", "tool_use", "tool_result", "thinking", "redacted_thinking"})
_BY_TYPE = _picked(_by_type(_BLOCK_TYPES, untyped="type=text"), _BLOCK)
UserBlock: TypeAlias = Annotated[
    Annotated[_Text, Tag("type=text")]
    | Annotated[_ToolResult, Tag("type=tool_result")]
    | Annotated[_ModelsBlock, Tag("type=tool_use")]
    | Annotated[_ModelsBlock, Tag("type=thinking")]
    | Annotated[_ModelsBlock, Tag("type=redacted_thinking")]
    | Annotated[_Typed, Tag("type=*")],
    _BY_TYPE,
]
AssistantBlock: TypeAlias = Annotated[
    Annotated[_Text, Tag("type=text")]
    | Annotated[_ToolUse, Tag("type=tool_use")]
    | Annotated[_Thinking, Tag("type=thinking")]
    | Annotated[_RedactedThinking, Tag("type=redacted_thinking")]
    | Annotated[_UsersBlock, Tag("type=tool_result")]
    | Annotated[_Typed, Tag("type=*")],
    _BY_TYPE,
]
SystemBlock: TypeAlias = Annotated[
    Annotated[_Text, Tag("type=text")]
    | Annotated[_ModelsBlock, Tag("type=tool_use")]
    | Annotated[_ModelsBlock, Tag("type=thinking")]
    | Annotated[_ModelsBlock, Tag("type=redacted_thinking")]
    | Annotated[_UsersBlock, Tag("type=tool_result")]
    | Annotated[_Typed, Tag("type=*")],
    _BY_TYPE,
]


class _UserTurn(_Wire):
    role: Literal["user"]
    content: Annotated[
        Annotated[str, Tag("json=str")] | Annotated[list[UserBlock], Tag("json=list")],
        _CONTENT,
    ]


class _AssistantTurn(_Wire):
    role: Literal["assistant"]
    content: Annotated[
        Annotated[str, Tag("json=str")] | Annotated[list[AssistantBlock], Tag("json=list")],
        _CONTENT,
    ]


class _SystemTurn(_Wire):
    """A system message between turns, as Claude Code sends one."""

    role: Literal["system"]
    content: Annotated[
        Annotated[str, Tag("json=str")] | Annotated[list[SystemBlock], Tag("json=list")],
        _CONTENT,
    ]


_TURN_ROLES = ("user", "assistant", "system")


class _OtherTurn(_Wire):
    """A turn of no role above: refused, naming its `role`."""

    role: Literal[_TURN_ROLES]  # type: ignore[valid-type]


Turn: TypeAlias = Annotated[
    Annotated[_UserTurn, Tag("role=user")]
    | Annotated[_AssistantTurn, Tag("role=assistant")]
    | Annotated[_SystemTurn, Tag("role=system")]
    | Annotated[_OtherTurn, Tag("role=*")],
    _picked(_by_role(frozenset(_TURN_ROLES)), "must be a message: an object with a role"),
]


class _CustomTool(_Wire):
    name: Id
    input_schema: Object
    description: str | None = None


def _tool_kind(value: Any) -> str | None:
    """A tool the model calls has an `input_schema`; a server tool (web search, bash...) a
    string `type` and no schema."""
    if not isinstance(value, dict):
        return None
    if "input_schema" in value:
        return "tool=custom"
    return "tool=typed" if isinstance(value.get("type"), str) else None


AnthropicTool: TypeAlias = Annotated[
    Annotated[_CustomTool, Tag("tool=custom")] | Annotated[_Typed, Tag("tool=typed")],
    _picked(
        _tool_kind,
        "must be a tool: an object with an input_schema, or a server tool's string type",
    ),
]


class CountTokensRequest(_Wire):
    """`POST /v1/messages/count_tokens`: a Messages body without `max_tokens`."""

    model: str | None = None
    messages: Annotated[list[Turn], Field(min_length=1)]
    system: ResultContent | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: _Typed | None = None
    thinking: _Typed | None = None


class MessagesRequest(CountTokensRequest):
    """`POST /v1/messages`."""

    max_tokens: Tokens
    stream: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: Int64 | None = None
    stop_sequences: list[str] | None = None


# -- checking ----------------------------------------------------------------------------


def check(schema: type[BaseModel], body: Any) -> None:
    """Raise `InvalidBody` naming the first thing in `body` that `schema` (or JSON) refuses."""
    bad = _unwritable(body)
    if bad is not None:
        raise InvalidBody(_path(bad[0]), bad[1])
    try:
        schema.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        steps = [s for s in first["loc"] if not (isinstance(s, str) and "=" in s)]  # no tags
        raise InvalidBody(_path(steps), first["msg"] + more) from None


def _path(steps: Iterable[int | str]) -> str:
    """A location as a path: `messages[2].content[0].text` (a client's key with a lone
    surrogate written with a backslash escape, so that the error can be sent)."""
    out = ""
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            name = step.encode(errors="backslashreplace").decode()
            out += f".{name}" if out else name
    return out


Found = tuple[tuple[int | str, ...], str]


def _unwritable(value: Any, depth: int = 0) -> Found | None:
    """Where in `value` (a path of keys and indexes) is the first thing JSON cannot carry, and
    what: a lone surrogate, a non-finite number, or nesting deeper than `MAX_DEPTH` (which
    the JSON writers on the way upstream may not reach). A walk, cheaper than a dump."""
    if depth > MAX_DEPTH:
        return (), f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        if not value.isascii() and not _encodes(value):
            return (), "a string with a lone surrogate (not valid Unicode)"
    elif isinstance(value, float):
        if not math.isfinite(value):
            return (), f"{value} is not a JSON number"
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not key.isascii() and not _encodes(key):
                return (key,), "a key with a lone surrogate (not valid Unicode)"
            if (found := _unwritable(item, depth + 1)) is not None:
                return (key, *found[0]), found[1]
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := _unwritable(item, depth + 1)) is not None:
                return (index, *found[0]), found[1]
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
