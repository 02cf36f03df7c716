"""Function tools of the Responses dialect, as Codex sends them.

A `namespace` tool groups function tools, which the model calls with the namespace apart
(`function_call` items with `name` and `namespace`). The neutral view has one flat list of
functions, so each is named `<namespace>__<name>` there (the flat name Codex itself gives a
namespaced tool where a boundary cannot keep the split), and a call of a flat name is written
back as the `name` and `namespace` the client gave (`Namespaced`). Two functions that would have
one flat name (a top-level `ns__x` and the `x` of namespace `ns`) are refused with a 400 naming
both: a call of that name could not be told apart. A tool the Responses server runs itself
(`HOSTED_TOOLS`: web search, file search, ...) has no one to run it behind another dialect's
upstream: it is left out (`ClientRequest.omitted`, reported in `x-chatcli-dropped`) rather than
refused, so that a client offering one by default (Codex offers web search) still works.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chatcli.messages import ToolCall
from chatcli.providers.base import ToolSpec
from chatcli.wire.dialect import Json, RequestError

__all__ = [
    "HOSTED_TOOLS",
    "Namespaced",
    "call_name",
    "distinct",
    "flat_name",
    "function_call_item",
    "functions",
    "hosted",
    "tool_spec",
]

# Tool types the Responses server runs itself (openai-python's `Tool` union): another
# dialect's upstream is not offered them (the module docstring).
HOSTED_TOOLS = frozenset(
    {
        "web_search",
        "web_search_2025_08_26",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "file_search",
        "code_interpreter",
        "image_generation",
        "mcp",
    }
)


def flat_name(namespace: str, name: str) -> str:
    """The neutral name of function `name` of a `namespace` tool: `<namespace>__<name>`, as
    Codex flattens one (stray underscores at the seam trimmed)."""
    return f"{namespace.rstrip('_')}__{name.lstrip('_')}"


@dataclass(frozen=True, slots=True)
class Namespaced:
    """The functions of a request's `namespace` tools: flat name -> (namespace, name)."""

    split: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, raw_tools: Any) -> Namespaced:
        tools = raw_tools if isinstance(raw_tools, list) else []
        return cls(
            {
                flat_name(namespace, tool["name"]): (namespace, tool["name"])
                for namespace, tool in functions(tools)
                if namespace is not None
            }
        )

    def call_item(self, call: ToolCall) -> Json:
        """A `function_call` output item of `call`, in the names the client gave."""
        namespace, name = self.split.get(call.name, (None, call.name))
        item = function_call_item(call.id, name, call.arguments_json)
        return item if namespace is None else {**item, "namespace": namespace}


def function_call_item(call_id: str, name: str, arguments: str) -> Json:
    return {
        "type": "function_call",
        "id": f"fc_{uuid.uuid4().hex}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def call_name(item: Mapping[str, Any]) -> str:
    """A `function_call` item's neutral name: a namespaced call's flat name."""
    name, namespace = str(item.get("name") or ""), item.get("namespace")
    return flat_name(str(namespace), name) if namespace else name


def hosted(tool: Mapping[str, Any]) -> bool:
    return tool.get("type") in HOSTED_TOOLS


def functions(tools: list[Any]) -> Iterator[tuple[str | None, Mapping[str, Any]]]:
    """The function tools of `tools`, top-level (namespace None) and grouped in a
    `namespace` tool (with its name); anything else is `hosted` or the dialect's to refuse."""
    for tool in tools:
        if tool.get("type") == "function":
            yield None, tool
        elif tool.get("type") == "namespace":
            if not tool.get("name"):
                raise RequestError("each namespace tool needs a name", param="tools")
            members = tool.get("tools")
            for member in members if isinstance(members, list) else ():
                if isinstance(member, dict) and member.get("type") == "function":
                    yield str(tool["name"]), member


def distinct(tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
    """`tools`, refused when two have one flat name (the module docstring)."""
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise RequestError(
                f"two function tools are both {tool.name!r} once a namespace's functions are "
                "named <namespace>__<name>: a call of it could not be told apart; rename one",
                param="tools",
            )
        seen.add(tool.name)
    return tools


def tool_spec(tool: Mapping[str, Any], namespace: str | None) -> ToolSpec:
    if not tool.get("name"):
        raise RequestError("each function tool needs a name", param="tools")
    name = str(tool["name"])
    return ToolSpec(
        name=name if namespace is None else flat_name(namespace, name),
        description=tool.get("description") or "",
        parameters=tool.get("parameters") or {},
    )
