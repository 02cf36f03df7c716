"""Every third-party package a module of `src/chatcli` imports is brought by the extra that
module belongs to (pyproject.toml), so no install line fails on an import nobody declared.

A module's extra is the one a user installs to run it (`OWNERS`: the proxy's modules need
`[proxy]`, the Anthropic adapter `[anthropic]`, ...; the rest is the core, which needs none).
What an extra brings is its requirements and, transitively, theirs, as the installed
distributions declare them (importlib.metadata), mapped to the names they are imported by.
The imports are read with `ast`: `import x` and `from x import y` anywhere in the module (a
function's too: that is when a user meets them), and `require_module("x", ...)`; not those under
`if TYPE_CHECKING:`, nor those a `try: ... except ImportError` makes optional. A core module's
imports made when it is imported (module level, through other chatcli modules too) must need no
extra at all. scripts/check-installs.sh proves the same at run time, one fresh virtualenv per
README install line.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Which extras a module needs, by its longest key: a module, or a package and its modules
# (`pkg.*`: its modules only; `chatcli.cli` itself is core, so that `chatcli proxy`, which
# passes through it, runs without the chat's extra).
OWNERS: dict[str, tuple[str, ...]] = {
    "chatcli.proxy": ("proxy",),
    # The wire formats: served by the proxy, read by chatcli.wrap and the LiteLLM wrapper.
    "chatcli.wire": ("proxy", "openai", "anthropic", "litellm"),
    "chatcli.providers.openai": ("openai",),
    "chatcli.providers.openai_compat": ("openai",),
    "chatcli.providers.discovery": ("openai",),
    "chatcli.providers.anthropic": ("anthropic",),
    "chatcli.providers.gemini": ("gemini",),
    "chatcli.providers.llama_cpp": ("local",),
    "chatcli.providers.llama_engine": ("local",),
    "chatcli.chat.tinymodel": ("local",),
    "chatcli.cli.demo": ("local",),
    "chatcli.cli.*": ("cli",),
    "chatcli.catalog": ("catalog",),
    "chatcli.tokens.exact": ("tiktoken",),
    "chatcli.store.postgres": ("postgres",),
    "chatcli.integrations.pydantic_ai": ("pydantic-ai",),
    "chatcli.integrations.langchain": ("langchain",),
    "chatcli.integrations.litellm": ("litellm",),
    # chatcli.wrap: each endpoint imports the SDK of the client being wrapped, no other.
    "chatcli.integrations.sdk": ("openai", "anthropic"),
}


@dataclass(frozen=True, slots=True)
class Imports:
    """A module's third-party imports (top-level names) and the chatcli modules it imports
    when it is itself imported."""

    anywhere: frozenset[str]
    eager: frozenset[str]
    eager_chatcli: frozenset[str]


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def owner(module: str) -> tuple[str, ...]:
    """The extras `module` needs (its longest key in `OWNERS`), or () for the core."""

    def covers(key: str) -> bool:
        if key.endswith(".*"):  # the package's modules, not its __init__
            return module.startswith(key[:-1])
        return module == key or module.startswith(key + ".")

    found = [key for key in OWNERS if covers(key)]
    return OWNERS[max(found, key=len)] if found else ()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _guards_import_error(node: ast.Try) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    caught = [h.type.elts if isinstance(h.type, ast.Tuple) else [h.type] for h in node.handlers]
    return any(isinstance(e, ast.Name) and e.id in names for types in caught for e in types)


def _imported(node: ast.AST, package: str) -> Iterator[str]:
    """Dotted names `node` imports (relative imports resolved against `package`)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level == 0:
            yield node.module or ""
        else:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            yield ".".join([*base, *([node.module] if node.module else [])])
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "require_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        yield str(node.args[0].value)


def _walk(node: ast.AST, *, eager: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node, with whether it runs when the module is imported; skipping what only a
    type checker sees and imports made optional by `except ImportError`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _walk(other, eager=eager)
            continue
        if isinstance(child, ast.Try) and _guards_import_error(child):
            continue
        lazy = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield child, eager and not lazy
        yield from _walk(child, eager=eager and not lazy)


@cache
def imports_of(path: Path) -> Imports:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    anywhere: set[str] = set()
    eager: set[str] = set()
    eager_chatcli: set[str] = set()
    for node, runs_on_import in _walk(ast.parse(path.read_text()), eager=True):
        for dotted in _imported(node, package):
            top = dotted.partition(".")[0]
            if top == "chatcli":
                if runs_on_import:
                    eager_chatcli.add(dotted)
            elif top and top != "__future__" and top not in sys.stdlib_module_names:
                anywhere.add(dotted)
                if runs_on_import:
                    eager.add(dotted)
    return Imports(frozenset(anywhere), frozenset(eager), frozenset(eager_chatcli))


MODULES = {module_name(p): p for p in sorted((SRC / "chatcli").rglob("*.py"))}


def eager_closure(module: str) -> frozenset[str]:
    """The third-party imports that importing `module` makes, through chatcli modules too
    (`from chatcli.x import y`: every prefix that is a module is imported, the packages'
    `__init__` included; y may be a module too)."""
    found: set[str] = set()
    seen = {module}
    todo = [module]
    while todo:
        imports = imports_of(MODULES[todo.pop()])
        found |= imports.eager
        for dotted in imports.eager_chatcli:
            parts = dotted.split(".")
            for target in (".".join(parts[:end]) for end in range(1, len(parts) + 1)):
                if target in MODULES and target not in seen:
                    seen.add(target)
                    todo.append(target)
    return frozenset(found)


# -- what each extra brings ------------------------------------------------------------------


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared: dict[str, list[str]] = project["optional-dependencies"]
    return declared


def _requirements_of_extra(extra: str) -> list[Requirement]:
    found: list[Requirement] = []
    for line in extras()[extra]:
        requirement = Requirement(line)
        if canonical(requirement.name) == "chatcli-recovery":
            for inner in requirement.extras:
                found += _requirements_of_extra(inner)
        elif requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            found.append(requirement)
    return found


@cache
def distributions_of(extra: str) -> frozenset[str]:
    """The distributions `extra` installs (canonical names), as the installed ones declare
    their own requirements. Skips the test when one is not installed here."""
    todo = [(canonical(r.name), frozenset(r.extras)) for r in _requirements_of_extra(extra)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            pytest.skip(f"{name} (extra {extra}) is not installed here")
        for line in requires:
            requirement = Requirement(line)
            contexts = [{"extra": e} for e in (*wanted, "")]
            marker = requirement.marker
            if marker is None or any(marker.evaluate(c) for c in contexts):
                todo.append((canonical(requirement.name), frozenset(requirement.extras)))
    return frozenset(name for name, _ in seen)


@cache
def import_names() -> dict[str, frozenset[str]]:
    """Top-level import name -> the distributions (canonical) that provide it."""
    return {
        top: frozenset(canonical(d) for d in dists)
        for top, dists in metadata.packages_distributions().items()
    }


def brought_by(extras_: tuple[str, ...], dotted: str) -> bool:
    top = dotted.partition(".")[0]
    providers = import_names().get(top, frozenset())
    return any(providers & distributions_of(extra) for extra in extras_)


# -- the tests -------------------------------------------------------------------------------


def test_every_owner_names_an_extra_pyproject_declares() -> None:
    named = {extra for extras_ in OWNERS.values() for extra in extras_}
    assert named <= set(extras())


@pytest.mark.parametrize("module", sorted(m for m in MODULES if owner(m)))
def test_a_modules_imports_are_brought_by_its_extra(module: str) -> None:
    needs = owner(module)
    missing = sorted(
        name for name in imports_of(MODULES[module]).anywhere if not brought_by(needs, name)
    )
    assert not missing, f"{module} imports {missing}, which chatcli{list(needs)} does not bring"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_importing_a_module_needs_no_other_extra(module: str) -> None:
    needs = owner(module)
    missing = sorted(name for name in eager_closure(module) if not brought_by(needs, name))
    where = f"chatcli{list(needs)}" if needs else "a plain `pip install chatcli`"
    assert not missing, f"importing {module} imports {missing}, which {where} does not bring"


def test_the_check_finds_an_undeclared_import(tmp_path: Path) -> None:
    """The scan sees a function's import and a require_module call, and an extra's closure
    does not stretch to a package only another extra brings."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import psycopg\n"
        "try:\n    import keyring\nexcept ImportError:\n    keyring = None\n"
        "def f():\n    import starlette.responses\n    return require_module('openai', 'openai')\n"
    )
    found = _scan(source)
    assert found == {"starlette.responses", "openai"}
    assert brought_by(("proxy",), "starlette") and not brought_by(("openai",), "starlette")
    assert brought_by(("openai",), "openai") and not brought_by(("anthropic",), "openai")


def _scan(path: Path) -> set[str]:
    names: set[str] = set()
    for node, _ in _walk(ast.parse(path.read_text()), eager=True):
        names |= {n for n in _imported(node, "") if n.partition(".")[0] != "typing"}
    return names
