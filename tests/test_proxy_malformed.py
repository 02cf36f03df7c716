"""Bad input is the client's error, never the proxy's: malformed bodies posted to the four POST
endpoints of the real app are each a 400 in the endpoint's own error envelope, naming the
field, and none reaches the upstream (a replay server that records every request).

The malformed bodies are mutations of valid ones (recorded SDK requests and the shapes the
other proxy tests take from Codex, Claude Code and the APIs' docs), each made so that it is
certainly not of its wire format: a wrong JSON type where a field has one, a required field
taken out, an odd role, a bad output limit, a lone surrogate or a non-finite number
anywhere, nesting past any real body; and bodies that are not JSON objects at all. Then the
bodies that type-check but are odd: a message or item with a field only another role or item
type takes (the fields each takes are openai-python's own message and item types, read here
from the installed SDK; for Anthropic, the blocks only the model writes, or only the user
sends, in the other side's turn), an id of the wrong type (an item's `id` too), and an id or
name empty or huge, or a declared integer past 64 bits.

600 bodies in all, from a fixed seed: each is a 400 in its endpoint's envelope (so no 5xx),
and the upstream stand-in counts what it is sent: nothing.
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionDeveloperMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import (
    EasyInputMessageParam,
    ResponseFunctionToolCallParam,
    ResponseOutputMessageParam,
    ResponseReasoningItemParam,
    response_input_item_param,
)
from starlette.testclient import TestClient

from chatcli.proxy.app import create_app
from chatcli.proxy.guard import Guard
from chatcli.wire.schemas import (
    MAX_DEPTH,
    ChatCompletionsRequest,
    InvalidBody,
    MessagesRequest,
    ResponsesRequest,
    check,
)
from tests.proxy_harness import upstream_at
from tests.recorded import DATA, sse_events
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TEXT, CHAT_TOOLS
from tests.test_proxy_responses import CODEX_INPUT, SHELL_TOOL

Json = dict[str, Any]
Path = tuple[str | int, ...]

# -- valid bodies, one list per endpoint ---------------------------------------------------

_RECORDED_CHAT = json.loads((DATA / "llama-server-stream.json").read_text())["request"]["json"]
_CALLS = CHAT_TOOLS["choices"][0]["message"]["tool_calls"]  # type: ignore[index]
_WEATHER = {
    "type": "function",
    "function": {
        "name": "GetWeatherArgs",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": True,
    },
}
CHAT_BODIES: list[Json] = [
    {**_RECORDED_CHAT, "stream": False},
    {
        "model": "gpt-4o",
        "messages": [
            {"role": "developer", "content": "Use tools.", "name": "ops"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
                ],
            },
            {"role": "assistant", "content": None, "tool_calls": _CALLS, "refusal": None},
            {"role": "tool", "tool_call_id": _CALLS[0]["id"], "content": "12C"},
            {
                "role": "tool",
                "tool_call_id": _CALLS[1]["id"],
                "content": [{"type": "text", "text": "190"}],
            },
        ],
        "tools": [_WEATHER],
        "tool_choice": "auto",
        "temperature": 0.25,
        "max_completion_tokens": 200,
        "metadata": {"team": "a"},
        "stream": False,
    },
]
RESPONSES_BODIES: list[Json] = [
    {"model": "gpt-4o-mini", "input": "Say hi.", "instructions": "Be brief.", "stream": False},
    {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": copy.deepcopy(CODEX_INPUT),
        "tools": [SHELL_TOOL],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "k-1",
        "max_output_tokens": 300,
        "stream": False,
    },
]
_TOOL_USE = DOCS_TOOL_USE_RESPONSE["content"][1]  # type: ignore[index]
_MESSAGES_TURNS: list[Json] = [
    {"role": "user", "content": "What is the weather like in San Francisco?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The user wants SF.", "signature": "EqQBCgIYAhIM"},
            {"type": "text", "text": "Let me look."},
            _TOOL_USE,
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": _TOOL_USE["id"],
                "content": [{"type": "text", "text": "15 degrees"}],
                "is_error": False,
            },
            {"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}},
        ],
    },
]
_GET_WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a given location",
    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
}
_SYSTEM = [{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}]
MESSAGES_BODIES: list[Json] = [
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Hello, Claude"}],
        "stream": False,
    },
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "system": _SYSTEM,
        "messages": _MESSAGES_TURNS,
        "tools": [_GET_WEATHER],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 4000},
        "metadata": {"user_id": "u-1"},
        "stream": False,
    },
]
COUNT_BODIES: list[Json] = [
    {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hello, Claude"}]},
    {
        "model": "claude-sonnet-4-5",
        "system": _SYSTEM,
        "messages": _MESSAGES_TURNS,
        "tools": [_GET_WEATHER],
        "thinking": {"type": "enabled", "budget_tokens": 4000},
    },
]

# -- what is malformed where ---------------------------------------------------------------

KINDS = ("null", "bool", "int", "float", "str", "list", "object")
ANY = frozenset(KINDS)


def kind_of(value: Any) -> str:
    for kind, types in (("null", type(None)), ("bool", bool), ("int", int), ("float", float)):
        if isinstance(value, types):
            return kind
    return {str: "str", list: "list", dict: "object"}[type(value)]


@dataclass(frozen=True)
class Rule:
    """A field (`pattern`: keys, `*` for any index) of `kinds` JSON kinds; `required`: taking
    it out is malformed; `when`: the rule holds only for a field whose parent passes it."""

    pattern: str
    kinds: frozenset[str]
    required: bool = False
    when: Callable[[Json], bool] = lambda parent: True


def rules(*specs: tuple[Any, ...]) -> list[Rule]:
    return [Rule(p, frozenset(k.split()), *rest) for p, k, *rest in specs]


def _not_assistant(message: Json) -> bool:
    return message.get("role") != "assistant"


def _custom_tool(tool: Json) -> bool:
    return "input_schema" in tool


CHAT_RULES = rules(
    ("messages", "list", True),
    ("messages.*", "object"),
    ("messages.*.role", "str", True),
    ("messages.*.content", "str list", True, _not_assistant),
    ("messages.*.content", "str list null"),
    ("messages.*.content.*", "object"),
    ("messages.*.content.*.type", "str", True),
    ("messages.*.content.*.text", "str", True),
    ("messages.*.content.*.image_url", "object", True),
    ("messages.*.tool_calls", "list null"),
    ("messages.*.tool_calls.*", "object"),
    ("messages.*.tool_calls.*.function", "object", True),
    ("messages.*.tool_calls.*.function.name", "str", True),
    ("messages.*.tool_calls.*.function.arguments", "str object", True),
    ("messages.*.tool_call_id", "str", True),
    ("messages.*.name", "str null"),
    ("tools", "list null"),
    ("tools.*", "object"),
    ("tools.*.type", "str", True),
    ("tools.*.function", "object", True),
    ("tools.*.function.name", "str", True),
    ("tools.*.function.parameters", "object null"),
    ("model", "str null"),
    ("stream", "bool null"),
    ("stream_options", "object null"),
    ("stream_options.include_usage", "bool null"),
    ("temperature", "int float null"),
    ("tool_choice", "str object null"),
    ("max_tokens", "int null"),
    ("max_completion_tokens", "int null"),
)
RESPONSES_RULES = rules(
    ("input", "str list", True),
    ("input.*", "object"),
    ("input.*.type", "str null"),
    ("input.*.role", "str", True),
    ("input.*.content", "str list", True),
    ("input.*.content.*", "object"),
    ("input.*.content.*.type", "str", True),
    ("input.*.content.*.text", "str", True),
    ("input.*.call_id", "str", True),
    ("input.*.name", "str", True),
    ("input.*.arguments", "str", True),
    ("input.*.output", "str list", True),
    ("input.*.summary", "list null"),
    ("input.*.encrypted_content", "str null"),
    ("instructions", "str null"),
    ("tools", "list null"),
    ("tools.*", "object"),
    ("tools.*.type", "str", True),
    ("tools.*.name", "str", True),
    ("tools.*.parameters", "object null"),
    ("tool_choice", "str object null"),
    ("reasoning", "object null"),
    ("reasoning.effort", "str null"),
    ("parallel_tool_calls", "bool null"),
    ("model", "str null"),
    ("stream", "bool null"),
    ("max_output_tokens", "int null"),
)
COUNT_RULES = rules(
    ("messages", "list", True),
    ("messages.*", "object"),
    ("messages.*.role", "str", True),
    ("messages.*.content", "str list", True),
    ("messages.*.content.*", "object"),
    ("messages.*.content.*.type", "str", True),
    ("messages.*.content.*.text", "str", True),
    ("messages.*.content.*.id", "str", True),
    ("messages.*.content.*.name", "str", True),
    ("messages.*.content.*.input", "object", True),
    ("messages.*.content.*.thinking", "str", True),
    ("messages.*.content.*.signature", "str null"),
    ("messages.*.content.*.tool_use_id", "str", True),
    ("messages.*.content.*.content", "str list null"),
    ("messages.*.content.*.content.*", "object"),
    ("messages.*.content.*.content.*.text", "str", True),
    ("messages.*.content.*.is_error", "bool null"),
    ("system", "str list null"),
    ("system.*", "object"),
    ("system.*.type", "str", True),
    ("system.*.text", "str", True),
    ("tools", "list null"),
    ("tools.*", "object"),
    ("tools.*.name", "str", True, _custom_tool),
    ("tools.*.input_schema", "object", True, _custom_tool),
    ("tools.*.description", "str null", False, _custom_tool),
    ("tool_choice", "object null"),
    ("tool_choice.type", "str", True),
    ("thinking", "object null"),
    ("thinking.type", "str", True),
    ("model", "str null"),
)
MESSAGES_RULES = [
    *COUNT_RULES,
    *rules(("max_tokens", "int", True), ("stream", "bool null"), ("temperature", "int float null")),
]
# A role each message list takes (any other is odd).
ROLES = {
    "/v1/chat/completions": ("messages", {"system", "developer", "user", "assistant", "tool"}),
    "/v1/responses": ("input", {"system", "developer", "user", "assistant"}),
    "/v1/messages": ("messages", {"user", "assistant"}),
    "/v1/messages/count_tokens": ("messages", {"user", "assistant"}),
}
# The output limit's field (count_tokens has none: the proxy puts 1 in when it is falsy).
LIMITS = {
    "/v1/chat/completions": ("max_tokens", "max_completion_tokens"),
    "/v1/responses": ("max_output_tokens",),
    "/v1/messages": ("max_tokens",),
    "/v1/messages/count_tokens": (),
}


@dataclass(frozen=True)
class Endpoint:
    path: str
    bodies: list[Json]
    rules: list[Rule]
    anthropic: bool  # the dialect's envelope (else OpenAI's)


ENDPOINTS = {
    e.path: e
    for e in (
        Endpoint("/v1/chat/completions", CHAT_BODIES, CHAT_RULES, anthropic=False),
        Endpoint("/v1/responses", RESPONSES_BODIES, RESPONSES_RULES, anthropic=False),
        Endpoint("/v1/messages", MESSAGES_BODIES, MESSAGES_RULES, anthropic=True),
        Endpoint("/v1/messages/count_tokens", COUNT_BODIES, COUNT_RULES, anthropic=True),
    )
}

# -- walking a body ------------------------------------------------------------------------


def nodes(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from nodes(item, (*path, index))


def matches(pattern: str, path: Path) -> bool:
    steps = pattern.split(".")
    return len(steps) == len(path) and all(
        isinstance(p, int) if s == "*" else p == s for s, p in zip(steps, path, strict=True)
    )


def at(body: Any, path: Path) -> Any:
    for step in path:
        body = body[step]
    return body


def fields(body: Json, rule_set: list[Rule]) -> list[tuple[Path, Rule]]:
    """The body's fields a rule holds for (one entry per field and rule)."""
    return [
        (path, rule)
        for path, _ in nodes(body)
        if path
        for rule in rule_set
        if matches(rule.pattern, path) and rule.when(at(body, path[:-1]))
    ]


# -- the mutations -------------------------------------------------------------------------

SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "bool": st.booleans(),
    "int": st.integers(min_value=-(2**70), max_value=2**70),
    "float": st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    "str": st.text(max_size=8),
    "list": st.lists(st.integers() | st.text(max_size=4), max_size=3),
    "object": st.dictionaries(st.text(max_size=4), st.integers() | st.none(), max_size=3),
}
SURROGATES = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
DEEP = "\x00deep\x00"  # stands for nesting too deep to dump, written into the JSON text


@st.composite
def wrong_type(draw: st.DrawFn, body: Json, rule_set: list[Rule]) -> Json:
    """A field set to a JSON kind its rule does not take."""
    found = fields(body, rule_set)
    path, rule = draw(st.sampled_from(found))
    kind = draw(st.sampled_from(sorted(ANY - rule.kinds)))
    return replaced(body, path, draw(SCALARS[kind]))


@st.composite
def missing(draw: st.DrawFn, body: Json, rule_set: list[Rule]) -> Json:
    """A required field taken out."""
    found = [(p, r) for p, r in fields(body, rule_set) if r.required]
    path, _ = draw(st.sampled_from(found))
    out = copy.deepcopy(body)
    del at(out, path[:-1])[path[-1]]
    return out


@st.composite
def odd_role(draw: st.DrawFn, body: Json, endpoint: str) -> Json:
    key, roles = ROLES[endpoint]
    if not isinstance(body[key], list):
        return replaced(body, (key,), [])  # an empty list: no message at all
    messages = [i for i, m in enumerate(body[key]) if "role" in m]  # Responses: not all
    index = draw(st.sampled_from(messages))
    role = draw(st.text(max_size=12).filter(lambda r: r not in roles) | SCALARS["int"])
    return replaced(body, (key, index, "role"), role)


@st.composite
def bad_limit(draw: st.DrawFn, body: Json, endpoint: str) -> Json:
    """An output limit of no model: not a positive integer, or past 2**31 - 1."""
    value = draw(
        st.integers(max_value=0)
        | st.integers(min_value=2**31, max_value=10**30)
        | st.sampled_from([1.5, 10.0, "10", True, [10]])
    )
    return replaced(body, (draw(st.sampled_from(LIMITS[endpoint])),), value)


@st.composite
def lone_surrogate(draw: st.DrawFn, body: Json) -> Json:
    """A lone surrogate in any string of the body, a key's or a value's (unknown fields too)."""
    strings = [p for p, v in nodes(body) if isinstance(v, str)]
    keys = [p for p, v in nodes(body) if isinstance(v, dict) and v]
    out = copy.deepcopy(body)
    bad = draw(SURROGATES)
    if keys and draw(st.booleans()):
        parent = at(out, draw(st.sampled_from(keys)))
        key = draw(st.sampled_from(sorted(parent)))
        parent[key[:1] + bad + key[1:]] = parent.pop(key)
        return out
    path = draw(st.sampled_from(strings))
    text = at(out, path)
    cut = draw(st.integers(0, len(text)))
    at(out, path[:-1])[path[-1]] = text[:cut] + bad + text[cut:]
    return out


@st.composite
def non_finite(draw: st.DrawFn, body: Json) -> Json:
    """NaN or an infinity (Python's json reads and writes them; JSON has none) anywhere."""
    value = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    places = [p for p, _ in nodes(body) if p]
    if draw(st.booleans()):
        return {**body, draw(st.text(min_size=1, max_size=6)): value}  # an unknown field
    return replaced(body, draw(st.sampled_from(places)), value)


@st.composite
def too_deep(draw: st.DrawFn, body: Json) -> Json:
    """Nesting past what any real body has, anywhere (an unknown field's value too)."""
    places = [p for p, _ in nodes(body) if p]
    if draw(st.booleans()):
        return {**body, "extra": DEEP}
    return replaced(body, draw(st.sampled_from(places)), DEEP)


def replaced(body: Json, path: Path, value: Any) -> Json:
    out = copy.deepcopy(body)
    at(out, path[:-1])[path[-1]] = value
    return out


# -- odd bodies that type-check ------------------------------------------------------------


def _foreign(fields: dict[str, frozenset[str]]) -> dict[str, list[str]]:
    """For each role or item type, the fields the others take and it does not."""
    every = frozenset().union(*fields.values())
    return {kind: sorted(every - own) for kind, own in fields.items()}


def _keys(*types: Any) -> frozenset[str]:
    return frozenset(key for kind in types for key in kind.__annotations__)


# openai-python's message param types: the fields a message of each role takes.
CHAT_FOREIGN = _foreign(
    {
        "system": _keys(ChatCompletionSystemMessageParam),
        "developer": _keys(ChatCompletionDeveloperMessageParam),
        "user": _keys(ChatCompletionUserMessageParam),
        "assistant": _keys(ChatCompletionAssistantMessageParam),
        "tool": _keys(ChatCompletionToolMessageParam),
    }
)
# openai-python's input item types: the fields each item type takes.
ITEM_FOREIGN = _foreign(
    {
        "message": _keys(
            EasyInputMessageParam, response_input_item_param.Message, ResponseOutputMessageParam
        ),
        "function_call": _keys(ResponseFunctionToolCallParam),
        "function_call_output": _keys(response_input_item_param.FunctionCallOutput),
        "reasoning": _keys(ResponseReasoningItemParam),
    }
)
# Anthropic's Messages API: the model writes tool_use and thinking blocks (assistant turns),
# the user sends tool_result blocks (user turns). Blocks from the valid bodies above.
_MODELS_BLOCKS = [b for b in _MESSAGES_TURNS[1]["content"] if b["type"] != "text"]
_USERS_BLOCKS = [_MESSAGES_TURNS[2]["content"][0]]
# Where each endpoint's ids and names are (a `*`: any index).
IDS = {
    "/v1/chat/completions": (
        "messages.*.tool_calls.*.id",
        "messages.*.tool_calls.*.function.name",
        "messages.*.tool_call_id",
        "tools.*.function.name",
    ),
    "/v1/responses": ("input.*.id", "input.*.call_id", "input.*.name", "tools.*.name"),
    "/v1/messages": (
        "messages.*.content.*.id",
        "messages.*.content.*.name",
        "messages.*.content.*.tool_use_id",
        "tools.*.name",
    ),
}
IDS["/v1/messages/count_tokens"] = IDS["/v1/messages"]
# A declared integer setting of each endpoint, and where it goes.
INTEGERS: dict[str, Path] = {
    "/v1/chat/completions": ("seed",),
    "/v1/responses": ("context_management", 0, "compact_threshold"),
    "/v1/messages": ("top_k",),
}
_KNOWN_ITEMS = frozenset(ITEM_FOREIGN)
NOT_NULL = st.sampled_from(["bool", "int", "float", "str", "list", "object"]).flatmap(
    SCALARS.__getitem__
)
NOT_TEXT = st.sampled_from(["bool", "int", "float", "list", "object"]).flatmap(SCALARS.__getitem__)


@st.composite
def foreign_field(draw: st.DrawFn, body: Json, endpoint: str) -> Json:
    """A message or item given a field only another role or item type takes (the issue's
    case: a system message with `tool_calls` whose `id` is a list); for Anthropic, a turn
    holding a block of the other side's."""
    key = ROLES[endpoint][0]
    out = copy.deepcopy(body)
    turns = out[key] if isinstance(out[key], list) else []
    if endpoint == "/v1/chat/completions":
        index = draw(st.sampled_from(range(len(turns))))
        field = draw(st.sampled_from(CHAT_FOREIGN[turns[index]["role"]]))
        turns[index][field] = draw(_value_of(field))
    elif endpoint == "/v1/responses":
        items = [i for i, t in enumerate(turns) if t.get("type", "message") in _KNOWN_ITEMS]
        if not items:
            return replaced(out, (key,), [{"role": "user", "content": "hi", "call_id": "c"}])
        index = draw(st.sampled_from(items))
        field = draw(st.sampled_from(ITEM_FOREIGN[turns[index].get("type", "message")]))
        turns[index][field] = draw(_value_of(field))
    else:
        index = draw(st.sampled_from(range(len(turns))))
        turn = turns[index]
        foreign = _USERS_BLOCKS if turn["role"] == "assistant" else _MODELS_BLOCKS
        block = copy.deepcopy(draw(st.sampled_from(foreign)))
        content = turn["content"] if isinstance(turn["content"], list) else []
        content.insert(draw(st.integers(0, len(content))), block)
        turn["content"] = content
    return out


def _value_of(field: str) -> st.SearchStrategy[Any]:
    """A value for `field` that is of its kind where it belongs (tool calls with an id of any
    JSON kind), or any JSON that is not null."""
    if field == "tool_calls":
        call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
        return (st.none() | NOT_NULL).map(lambda i: [{**call, "id": i}])
    return NOT_NULL


def _id_paths(body: Json, endpoint: str) -> list[Path]:
    """The ids and names in `body` (and places for an `id` on Responses items)."""
    places = [p for p, _ in nodes(body) if p and any(matches(i, p) for i in IDS[endpoint])]
    if endpoint == "/v1/responses" and isinstance(body.get("input"), list):
        places += [
            ("input", i, "id")
            for i, item in enumerate(body["input"])
            if item.get("type", "message") in _KNOWN_ITEMS and "id" not in item
        ]
    return places


@st.composite
def odd_id(draw: st.DrawFn, body: Json, endpoint: str) -> Json:
    """An id or name of the wrong JSON type, empty, or huge."""
    places = _id_paths(body, endpoint)
    if not places:
        return replaced(body, ("model",), draw(NOT_TEXT))
    value = draw(NOT_TEXT | st.just("") | st.integers(257, 20_000).map(lambda n: "i" * n))
    return replaced(body, draw(st.sampled_from(places)), value)


@st.composite
def huge_integer(draw: st.DrawFn, body: Json, endpoint: str) -> Json:
    """A declared integer setting past 64 bits (count_tokens has none: an output limit)."""
    path = INTEGERS.get(endpoint)
    value = draw(st.integers(2**63, 2**70) | st.integers(-(2**70), -(2**63) - 1))
    if path is None:
        return {**body, "max_tokens": value}
    if path[0] == "context_management":
        return {**body, "context_management": [{"type": "compaction", "compact_threshold": value}]}
    return {**body, path[0]: value}


@st.composite
def malformed(draw: st.DrawFn, endpoint: Endpoint) -> bytes:
    """The bytes of a body `endpoint` must refuse."""
    choice = draw(st.integers(0, 12))
    if choice == 0:  # not a JSON object: bytes, or JSON of another kind
        other = st.sampled_from(["null", "bool", "int", "float", "str", "list"])
        return draw(st.binary(max_size=40) | other.flatmap(SCALARS.__getitem__).map(dumps))
    body = draw(st.sampled_from(endpoint.bodies))
    mutations = {
        1: lambda: wrong_type(body, endpoint.rules),
        2: lambda: missing(body, endpoint.rules),
        3: lambda: odd_role(body, endpoint.path),
        4: lambda: lone_surrogate(body),
        5: lambda: non_finite(body),
        6: lambda: too_deep(body),
        7: lambda: bad_limit(body, endpoint.path),
        9: lambda: foreign_field(body, endpoint.path),
        10: lambda: odd_id(body, endpoint.path),
        11: lambda: huge_integer(body, endpoint.path),
    }
    if choice == 7 and not LIMITS[endpoint.path]:
        choice = 1
    mutation = mutations.get(choice)
    if mutation is None:  # 8, 12: two mutations in a row (the second from a clean body's)
        first = draw(wrong_type(body, endpoint.rules) | missing(body, endpoint.rules))
        return dumps({**first, **draw(non_finite(body) | lone_surrogate(body))})
    return dumps(draw(mutation()), raw=draw(st.booleans()))


def dumps(value: Any, *, raw: bool = False) -> bytes:
    """JSON as a client would send it; `raw`: non-ASCII written as UTF-8 (a lone surrogate
    then as the bytes of one, which Python's json reads back), else escaped."""
    text = json.dumps(value, ensure_ascii=not raw)
    depth = MAX_DEPTH + 50
    text = text.replace(json.dumps(DEEP, ensure_ascii=not raw), "[" * depth + "]" * depth)
    return text.encode("utf-8", "surrogatepass")


# -- the app -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


@pytest.fixture(scope="module")
def clients(upstream: ReplayServer) -> Iterator[dict[str, TestClient]]:
    """A client of the real app per endpoint: the OpenAI endpoints in front of an
    OpenAI-compatible upstream, the Anthropic ones in front of Anthropic (so that what is
    forwarded is the client's own JSON, verbatim)."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "CHATCLI_HOME": "/nonexistent"}
    openai_up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=32_000)
    anthropic_up = upstream_at("anthropic", upstream.url, model="claude-sonnet-4-5", environ=env)
    guard = Guard((), host="127.0.0.1", max_concurrency=64)
    with (
        TestClient(create_app(openai_up, guard)) as openai_client,
        TestClient(create_app(anthropic_up, guard)) as anthropic_client,
    ):
        yield {
            path: anthropic_client if endpoint.anthropic else openai_client
            for path, endpoint in ENDPOINTS.items()
        }


def refused(response: Any, endpoint: Endpoint) -> str:
    """The error message of a 400 in the endpoint's envelope (asserted)."""
    assert response.status_code == 400, (response.status_code, response.text[:300])
    body = response.json()
    if endpoint.anthropic:
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert set(body) == {"error"} and body["error"]["type"] == "invalid_request_error"
    message = body["error"]["message"]
    assert isinstance(message, str) and message
    return message


PER_ENDPOINT = 150  # 600 bodies over the four endpoints
statuses: Counter[int] = Counter()  # statuses answered, over the endpoints


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_malformed_bodies_are_the_clients_400_and_never_reach_the_upstream(
    path: str, clients: dict[str, TestClient], upstream: ReplayServer
) -> None:
    endpoint = ENDPOINTS[path]
    client = clients[path]
    before = len(upstream.requests)
    statuses.clear()

    @seed(33)
    @settings(
        max_examples=PER_ENDPOINT,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=malformed(endpoint))
    def posted(body: bytes) -> None:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        statuses[response.status_code] += 1
        refused(response, endpoint)
        assert len(upstream.requests) == before, upstream.requests[-1].body[:300]

    posted()
    assert statuses == Counter({400: PER_ENDPOINT})  # every body posted, each a 400
    assert len(upstream.requests) == before  # the upstream stand-in was sent nothing


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_the_valid_bodies_are_taken_and_forwarded(
    path: str, clients: dict[str, TestClient], upstream: ReplayServer
) -> None:
    """The bodies the mutations start from are valid: what the property refuses is the
    mutation, not the body."""
    endpoint = ENDPOINTS[path]
    for body in endpoint.bodies:
        before = len(upstream.requests)
        if path.endswith("count_tokens"):
            upstream.add(Scripted(body={"input_tokens": 12}))
        elif endpoint.anthropic:  # streamed: the SDK streams a large max_tokens on its own
            upstream.add(Scripted(events=sse_events("anthropic-thinking.txt")))
            body = {**body, "stream": True}
        else:
            upstream.add(Scripted(body=CHAT_TEXT))
        response = clients[path].post(path, json=body)
        assert response.status_code == 200, response.text[:300]
        assert len(upstream.requests) == before + 1
        upstream.queue.clear()


# -- the message names the field -----------------------------------------------------------

CHAT = ENDPOINTS["/v1/chat/completions"]


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        (
            "/v1/chat/completions",
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": "b"},
                    {"role": "robot", "content": "c"},
                ]
            },
            "messages[2].role: Input should be 'system', 'developer', 'user', 'assistant' or "
            "'tool'",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}
                ]
            },
            "messages[0].tool_calls[0].function.name: Field required",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "tool", "content": "12C"}]},
            "messages[0].tool_call_id: Field required",
        ),
        (
            "/v1/responses",
            {"input": [{"type": "function_call", "call_id": "c", "name": "n", "arguments": {}}]},
            "input[0].arguments: Input should be a valid string",
        ),
        (
            "/v1/responses",
            {"input": "hi", "max_output_tokens": 0},
            "max_output_tokens: Input should be greater than or equal to 1",
        ),
        (
            "/v1/messages",
            {
                "max_tokens": 10,
                "messages": [{"role": "user", "content": [{"type": "tool_result"}]}],
            },
            "messages[0].content[0].tool_use_id: Field required",
        ),
        (
            "/v1/messages",
            {"max_tokens": 10, "messages": [{"role": "user", "content": 7}]},
            "messages[0].content: must be a string or a list of content parts",
        ),
        (
            "/v1/messages/count_tokens",
            {"messages": [{"role": "user", "content": "hi"}], "system": [{"type": "text"}]},
            "system[0].text: Field required",
        ),
        (  # the body: forwarded, and a 502, before
            "/v1/chat/completions",
            {
                "messages": [
                    {
                        "role": "system",
                        "content": "s",
                        "tool_calls": [{"id": [1], "function": {"name": "f", "arguments": ""}}],
                    },
                    {"role": "user", "content": "hi"},
                ]
            },
            "messages[0].tool_calls: a field of another role or item type, which this one does"
            " not take",
        ),
        (
            "/v1/responses",
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x", "id": 7}]},
            "input[0].id: Input should be a valid string",
        ),
        (
            "/v1/responses",
            {"input": [{"type": "function_call", "call_id": "", "name": "n", "arguments": ""}]},
            "input[0].call_id: String should have at least 1 character",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "seed": 2**64},
            "seed: Input should be less than or equal to 9223372036854775807",
        ),
        (
            "/v1/messages",
            {
                "max_tokens": 10,
                "messages": [{"role": "user", "content": [{**_TOOL_USE, "id": "t" * 300}]}],
            },
            "messages[0].content[0]: a tool_use block is written by the model: only an assistant"
            " turn holds it",
        ),
        (
            "/v1/messages",
            {
                "max_tokens": 10,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{**_TOOL_USE, "id": "t" * 300}]},
                ],
            },
            "messages[1].content[0].id: String should have at most 256 characters",
        ),
    ],
)
def test_the_message_names_the_field(
    path: str, body: Json, named: str, clients: dict[str, TestClient], upstream: ReplayServer
) -> None:
    before = len(upstream.requests)
    assert refused(clients[path].post(path, json=body), ENDPOINTS[path]) == named
    assert len(upstream.requests) == before


def test_openai_errors_give_the_field_as_param(clients: dict[str, TestClient]) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}
    response = clients[CHAT.path].post(CHAT.path, json=body)
    assert refused(response, CHAT) == "stream: Input should be a valid boolean"
    assert response.json()["error"]["param"] == "stream"


def test_a_lone_surrogate_or_nan_is_named_where_it_is(clients: dict[str, TestClient]) -> None:
    """Both pass Python's json, and both would fail on the way upstream (a 5xx) if taken."""
    head = b'{"messages": [{"role": "user", "content": "hi"}], '
    for tail, named in [
        (b'"metadata": {"note": "a\\ud800b"}}', "metadata.note: a string with a lone surrogate"),
        (b'"temperature": NaN}', "temperature: nan is not a JSON number"),
        (b'"max_tokens": 1e999}', "max_tokens: inf is not a JSON number"),
        (b'"max_tokens": ' + b"9" * 5000 + b"}", "the body is not valid JSON"),
    ]:
        message = refused(clients[CHAT.path].post(CHAT.path, content=head + tail), CHAT)
        assert message.startswith(named), message


def test_a_body_nested_past_the_json_readers_limit_is_a_400(
    clients: dict[str, TestClient],
) -> None:
    deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    message = refused(clients[CHAT.path].post(CHAT.path, content=deep), CHAT)
    assert message.startswith("the body is not valid JSON")


# -- what real clients send is taken -------------------------------------------------------


def test_codex_and_claude_code_tool_types_pass_the_schemas() -> None:
    """Tools and items of types the proxy does not list (Codex's namespace and hosted tools,
    Anthropic's server tools) are the dialect's to take or refuse, not the schema's."""
    check(
        ResponsesRequest,
        {
            "input": [{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch"}],
            "tools": [
                {"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "f"}]},
                {"type": "web_search", "external_web_access": False},
                {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
                {"type": "local_shell"},
            ],
        },
    )
    check(
        MessagesRequest,
        {
            "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
            "context_management": {"edits": []},
        },
    )
    check(
        ChatCompletionsRequest,
        {
            "messages": [
                {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
                {"role": "assistant", "tool_calls": [{"type": "custom", "custom": {}}]},
            ],
            "tools": [{"type": "custom", "custom": {"name": "grammar"}}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x"}},
        },
    )
    with pytest.raises(InvalidBody, match=r"^tools\[0\]\.type: Field required$"):
        check(ResponsesRequest, {"input": "hi", "tools": [{"name": "f"}]})
