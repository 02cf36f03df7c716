"""The house's layers, read from the source with `ast` (nothing is imported).

Every module under src/chatcli/ is parsed, and every import it makes counts: at the top,
under `if TYPE_CHECKING:`, inside functions. The checks:

- no import cycle between modules;
- the direction of docs/architecture.md: the applications `cli/`, `proxy/` and
  `integrations/` never import one another (the entry point `chatcli/__main__.py` starts the
  first two); the core imports only the core and `providers/base.py`;
- a module over `LONG_MODULE_LINES` lines says why in its docstring, in a sentence with
  `LONG_MODULE_REASON` ("One module because ...");
- no docstring or comment points outside the repository (a spec or an issue the reader of
  the code does not have).

Each top-level module and package is placed in a layer here, so a new one must be placed
before these checks pass.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "chatcli"

# Layers 1-3 of docs/architecture.md: values, transforms, the policy. They import nothing
# above them, and of the adapters only the provider protocol.
CORE = frozenset(
    {
        "messages",
        "events",
        "errors",
        "config",
        "tokens",
        "history",
        "policy",
        "continuation",
        "cost",
        "catalog",
        "streaming",
        "serialize",
        "overflow_signs",
        "redact",
        "request_settings",
    }
)
CORE_MAY_IMPORT = frozenset({f"{PACKAGE}.providers.base"})
# Layer 5, the drivers: they run the core over the adapters (the default estimator of a
# provider, the tool definitions in each provider's format), and know nothing above them.
DRIVERS = frozenset({"client", "compaction", "recall", "recovery"})
DRIVERS_MAY_IMPORT = CORE | DRIVERS | {"providers"}
# The applications: each builds on the layers below, never on another.
APPLICATIONS = frozenset({"cli", "proxy", "integrations"})
# The rest of the tree: the adapters, the wire formats, the chat session, the store, the
# entry point and the package's public API (`__init__.py`, top-level name "").
OTHERS = frozenset({"providers", "wire", "chat", "store", "__main__", ""})

LONG_MODULE_LINES = 600
LONG_MODULE_REASON = "One module because"

# What points outside the repository: the product's spec, an issue tracker, sibling folders.
OUTSIDE = re.compile(r"\.\./shared|/work/|\bSPEC\b|\b[Ss]pec section|\b[Ii]ssue (\d+|N's)")


@dataclass(frozen=True, slots=True)
class Module:
    name: str  # dotted: chatcli.policy.run
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def top(self) -> str:
        return _top(self.name)

    @property
    def tree(self) -> ast.Module:
        return _parse(self.path)


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = Module(".".join(parts), path)
    return found


MODULES = _modules()


def _top(name: str) -> str:
    """The top-level module or package under chatcli ("" for chatcli itself)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _resolve(name: str) -> str | None:
    """The module `name` is in: itself, else its longest prefix that is a module."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module an ImportFrom names, relative imports made absolute."""
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: Module) -> set[str]:
    """The chatcli modules `module` imports, wherever the import statement is."""
    out: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            names = [f"{source}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(f"{PACKAGE}."):
                target = _resolve(name)
                if target is not None and target != module.name:
                    out.add(target)
    return out


GRAPH = {name: _imports(module) for name, module in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, to name in a failure."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for target in sorted(graph[node] & members):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"{start} is in no cycle of {component}")


def _edges() -> Iterator[tuple[str, str]]:
    for source, targets in sorted(GRAPH.items()):
        for target in sorted(targets):
            yield source, target


def _docstrings_and_comments(module: Module) -> Iterator[tuple[int, str]]:
    """(first line, text) of every docstring and comment of `module`."""
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(module.tree):
        if isinstance(node, documented) and (text := ast.get_docstring(node, clean=False)):
            yield node.body[0].lineno, text
    for token in tokenize.generate_tokens(io.StringIO(module.path.read_text()).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def _where(module: Module, line: int) -> str:
    return f"{module.path.relative_to(SRC.parent)}:{line}"


# -- the checks ------------------------------------------------------------------------------


def test_the_tree_is_read() -> None:
    """The walk finds the package and its imports (so the checks below check something)."""
    assert {"chatcli", "chatcli.client", "chatcli.policy.run"} <= set(MODULES)
    assert "chatcli.messages" in GRAPH["chatcli.client"]
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": {"a"}, "d": {"b"}, "e": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "d"]]
    assert _shortest_cycle(graph, ["a", "b", "c", "d"]) == ["a", "b", "c", "a"]


def test_every_top_level_module_has_a_layer() -> None:
    tops = {module.top for module in MODULES.values()}
    assert sorted(tops - CORE - DRIVERS - APPLICATIONS - OTHERS) == []


def test_no_import_cycle() -> None:
    cycles = [" -> ".join(_shortest_cycle(GRAPH, c)) for c in _cycles(GRAPH)]
    assert not cycles, "\n".join(cycles)


def test_the_applications_never_import_one_another() -> None:
    crossing = [
        f"{source} -> {target}"
        for source, target in _edges()
        if _top(source) in APPLICATIONS
        and _top(target) in APPLICATIONS
        and _top(source) != _top(target)
    ]
    assert not crossing, "\n".join(crossing)


def test_the_core_imports_only_the_core_and_the_provider_protocol() -> None:
    upward = [
        f"{source} -> {target}"
        for source, target in _edges()
        if _top(source) in CORE and _top(target) not in CORE and target not in CORE_MAY_IMPORT
    ]
    assert not upward, "\n".join(upward)


def test_the_drivers_import_only_the_core_and_the_adapters() -> None:
    upward = [
        f"{source} -> {target}"
        for source, target in _edges()
        if _top(source) in DRIVERS and _top(target) not in DRIVERS_MAY_IMPORT
    ]
    assert not upward, "\n".join(upward)


def test_a_long_module_says_why_in_its_docstring() -> None:
    unexplained = [
        f"{module.path.relative_to(SRC.parent)} ({lines} lines)"
        for module in MODULES.values()
        if (lines := len(module.path.read_text().splitlines())) > LONG_MODULE_LINES
        and LONG_MODULE_REASON not in " ".join((ast.get_docstring(module.tree) or "").split())
    ]
    assert not unexplained, "\n".join(unexplained)


def test_no_docstring_or_comment_points_outside_the_repository() -> None:
    outside = [
        f"{_where(module, line + text[: match.start()].count(chr(10)))}: {match.group(0)!r}"
        for module in MODULES.values()
        for line, text in _docstrings_and_comments(module)
        for match in OUTSIDE.finditer(text)
    ]
    assert not outside, "\n".join(outside)
