"""The docs cannot drift: every fenced code block of README.md and docs/ is run or checked.

Each block is preceded by an HTML comment that says what is done with it (the table in
docs/architecture.md): `run: python` blocks run as scripts against a real llama-server (the
tiny model, a 1,024-token window) that the SDKs reach through `OPENAI_BASE_URL` and
`ANTHROPIC_BASE_URL`, `run: python proxy` ones through a `chatcli proxy` in front of it;
`run: console` blocks run their example and must print what the block shows; `check: chatcli`
blocks are parsed with the command's own argument parsers; TOML and YAML blocks are parsed
(a `toml config` block is loaded as the command's config file); `not run: why` blocks say
why. A block without a marker fails.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from chatcli.chat.settings import load_settings
from chatcli.cli.app import build_parser as chat_parser
from chatcli.proxy.main import build_parser as proxy_parser

pytest_plugins = ("tests.servers",)

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LLAMA_URL = "http://127.0.0.1:8080"  # in the docs: a local llama-server
PROXY_URL = "http://127.0.0.1:8787"  # in the docs: `chatcli proxy`
BLOCK_TIMEOUT_S = 60

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>\S*)\s*$")
_MARKER = re.compile(r"^\s*<!-- (?P<kind>run|check|not run): ?(?P<arg>.*?) -->\s*$")
KINDS = {
    ("run", "python"),
    ("run", "python proxy"),
    ("run", "console"),
    ("check", "chatcli"),
    ("check", "toml"),
    ("check", "toml config"),
    ("check", "yaml"),
}


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int  # of the opening fence, from 1
    marker: tuple[str, str] | None
    text: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> Iterator[Block]:
    """The fenced blocks of `page`, each with the marker on the line before it (if any)."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent = opening["indent"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines))
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found = _MARKER.match(before)
        marker = (found["kind"], found["arg"]) if found else None
        yield Block(page, i + 1, marker, "\n".join(body) + "\n")
        i = end + 1


BLOCKS = [block for page in PAGES for block in read_blocks(page)]


def of_kind(*kinds: tuple[str, str]) -> list[pytest.param]:
    return [pytest.param(b, id=b.name) for b in BLOCKS if b.marker in kinds]


def test_every_block_says_what_is_done_with_it() -> None:
    unmarked = [b.name for b in BLOCKS if b.marker is None]
    unknown = [
        b.name
        for b in BLOCKS
        if b.marker is not None and b.marker[0] != "not run" and b.marker not in KINDS
    ]
    unexplained = [b.name for b in BLOCKS if b.marker == ("not run", "")]
    assert (unmarked, unknown, unexplained) == ([], [], [])
    assert len(BLOCKS) > 20  # the parser found the blocks


def test_the_parser_sees_fences_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- run: python -->\n```python\nprint(1)\n```\n\n- item:\n\n"
        "  ```toml\n  a = 1\n  ```\n"
    )
    found = list(read_blocks(page))
    assert [(b.line, b.marker, b.text) for b in found] == [
        (4, ("run", "python"), "print(1)\n"),
        (10, None, "a = 1\n"),
    ]


# -- run: python ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def block_env(llama_1024: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment a python block runs in: the SDKs pointed at llama-server, dummy keys,
    any connection beyond loopback refused (through a proxy that does not exist)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        CHATCLI_HOME=str(tmp_path_factory.mktemp("chatcli-home")),
        OPENAI_BASE_URL=llama_1024 + "/v1",
        ANTHROPIC_BASE_URL=llama_1024,
        OPENAI_API_KEY="none",
        ANTHROPIC_API_KEY="none",
        GEMINI_API_KEY="none",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


@pytest.fixture(scope="module")
def proxy_url(llama_1024: str) -> Iterator[str]:
    from tests.proxy_harness import running_proxy, upstream_at

    upstream = upstream_at("openai-compatible", llama_1024 + "/v1", model="chatcli-tiny")
    with running_proxy(upstream) as url:
        yield url


def run_python(source: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "block.py"
    script.write_text(source)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=BLOCK_TIMEOUT_S,
    )


PYTHON_BLOCKS = of_kind(("run", "python"), ("run", "python proxy"))
PARALLEL_BLOCKS = 4  # the blocks mostly wait: for imports, for llama-server


@pytest.fixture(scope="module")
def python_runs(
    block_env: dict[str, str],
    llama_1024: str,
    proxy_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every python block run once, a few at a time, by name; the addresses in the docs
    replaced by the real server's and proxy's."""

    def run(block: Block) -> subprocess.CompletedProcess[str]:
        source = block.text.replace(LLAMA_URL, llama_1024).replace(PROXY_URL, proxy_url)
        return run_python(source, block_env, tmp_path_factory.mktemp("block"))

    blocks = [param.values[0] for param in PYTHON_BLOCKS]
    with ThreadPoolExecutor(PARALLEL_BLOCKS) as pool:
        return dict(zip([b.name for b in blocks], pool.map(run, blocks), strict=True))


@pytest.mark.llama_server
@pytest.mark.parametrize("block", PYTHON_BLOCKS)
def test_python_block_runs(
    block: Block, python_runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    if block.marker == ("run", "python proxy"):
        assert PROXY_URL in block.text  # it talks to the proxy, not to the server behind it
    run = python_runs[block.name]
    assert run.returncode == 0, run.stderr[-3000:]


def test_a_failing_block_fails(tmp_path: Path) -> None:
    run = run_python("raise SystemExit('broken')\n", dict(os.environ), tmp_path)
    assert run.returncode != 0


# -- run: console -----------------------------------------------------------------------------


@pytest.mark.parametrize("block", of_kind(("run", "console")))
def test_console_block_is_what_the_example_prints(block: Block) -> None:
    command, _, shown = block.text.partition("\n")
    found = re.fullmatch(r"\$ \.venv/bin/python (examples/\w+\.py)", command)
    assert found is not None, f"{block.name}: not a `$ .venv/bin/python examples/...` command"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, str(ROOT / found[1])],
        capture_output=True,
        text=True,
        env=env,
        timeout=BLOCK_TIMEOUT_S,
        check=True,
    )
    assert run.stdout == shown


# -- check: chatcli ---------------------------------------------------------------------------


def command_lines(text: str) -> Iterator[list[str]]:
    """Each logical line's words (continuations joined, comments dropped)."""
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            yield words


def chatcli_args(words: list[str]) -> list[str] | None:
    """The arguments of the `chatcli` command in a shell line (after a pipe or variables), or
    None for an `export` line."""
    if words[0] == "export":
        assert len(words) == 2 and "=" in words[1], words
        return None
    if "|" in words:
        words = words[words.index("|") + 1 :]
    while "=" in words[0]:
        words = words[1:]
    assert words[0] == "chatcli", f"not a chatcli command: {words}"
    return words[1:]


def parse_chatcli(args: list[str]) -> None:
    """Parse as `chatcli` does: `proxy` with the proxy's parser, the rest with the chat's."""
    if args[:1] == ["proxy"]:
        proxy_parser().parse_args(args[1:])
    else:
        chat_parser().parse_args(args)


@pytest.mark.parametrize("block", of_kind(("check", "chatcli")))
def test_command_lines_parse(block: Block) -> None:
    for words in command_lines(block.text):
        args = chatcli_args(words)
        if args is not None:
            parse_chatcli(args)


@pytest.mark.parametrize(
    "line", ["chatcli --no-such-flag", "chatcli proxy --workers none", "chatcli sessions drop 1"]
)
def test_a_wrong_command_line_fails(line: str) -> None:
    args = chatcli_args(shlex.split(line))
    assert args is not None
    with pytest.raises(SystemExit):
        parse_chatcli(args)


# -- check: toml / json / yaml ----------------------------------------------------------------


@pytest.mark.parametrize("block", of_kind(("check", "toml"), ("check", "toml config")))
def test_toml_parses(block: Block, tmp_path: Path) -> None:
    tomllib.loads(block.text)
    if block.marker == ("check", "toml config"):
        path = tmp_path / "config.toml"
        path.write_text(block.text)
        settings = load_settings({}, {"CHATCLI_CONFIG": str(path), "HOME": str(tmp_path)})
        assert settings.config_path == path


@pytest.mark.parametrize("block", of_kind(("check", "yaml")))
def test_yaml_parses(block: Block) -> None:
    import yaml  # llm's and litellm's dependency

    assert yaml.safe_load(block.text) is not None


# -- what the pages name ----------------------------------------------------------------------


def test_the_modules_and_files_the_docs_name_exist() -> None:
    """Every `chatcli/...` module or package, and every examples/, scripts/, tests/ or
    benchmarks/ file the docs name, is in the tree."""
    text = "\n".join(page.read_text() for page in PAGES)
    named = set(re.findall(r"\bchatcli/[\w/]+(?:\.py|/)", text))
    missing = [n for n in sorted(named) if not (ROOT / "src" / n).exists()]
    files = set(re.findall(r"\b(?:examples|scripts|tests|benchmarks)/[\w./-]+\.(?:py|sh|md)", text))
    missing += [f for f in sorted(files) if not (ROOT / f).exists()]
    assert missing == []


def test_the_links_between_pages_resolve() -> None:
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in PAGES
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text())
        if not (page.parent / target).exists()
    ]
    assert broken == []


def test_the_tree_in_architecture_is_the_tree() -> None:
    """docs/architecture.md's listing of src/chatcli/ names every module and package at the top
    of the package, and nothing that is not there."""
    (tree,) = [b for b in BLOCKS if b.text.startswith("src/chatcli/\n")]
    package = ROOT / "src" / "chatcli"
    listed = set(re.findall(r"\b\w+\.py\b", tree.text))
    listed |= {f"{name}/" for name in re.findall(r"^  (\w+)/", tree.text, re.M)}
    present = {p.name for p in package.glob("*.py")}
    present |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()}
    assert sorted(listed - present) == []
    assert sorted(present - listed) == []


def test_the_install_lines_name_real_extras() -> None:
    """Every `pip install 'chatcli-recovery[...]'` (or `'.[...]'`) in the docs names extras
    pyproject declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    text = "\n".join(page.read_text() for page in PAGES)
    named = re.findall(rf"pip install (?:-e )?'(?:{DISTRIBUTION}|\.)\[([\w,-]+)\]'", text)
    assert named
    extras = {e for extras in named for e in extras.split(",")}
    assert sorted(extras - set(project["optional-dependencies"])) == []


# The index already has a `chatcli` that is not this project: every install command a user
# reads names ours (or this checkout, `.`), or a third-party package named on purpose.
DISTRIBUTION = "chatcli-recovery"
THIRD_PARTY = frozenset({"xllamacpp"})  # built from source: the engine's way out elsewhere
_INSTALL = re.compile(r"pip install((?:[ \t]+(?:'[^'\n]*'|[^\s`'\"&|;)]+))+)")


def installed_names(text: str) -> list[str]:
    """The distributions the `pip install` commands in `text` name (options left out)."""
    names = []
    for command in _INSTALL.findall(text):
        for word in shlex.split(command):
            if not word.startswith("-"):
                found = re.match(r"\.|[A-Za-z0-9][\w.-]*", word)
                names.append(found.group(0) if found else word)
    return names


def test_the_install_check_reads_names_as_pip_does() -> None:
    text = (
        "`pip install 'chatcli[proxy]'` and pip install -e '.[local]' && x; "
        '"(pip install --no-binary xllamacpp " f"xllamacpp==1.0: ..." (pip install rich)'
    )
    assert installed_names(text) == ["chatcli", ".", "xllamacpp", "rich"]


def test_every_install_command_names_our_distribution() -> None:
    """README.md, docs/, the examples and every message and docstring of the package."""
    sources = [*PAGES, *(ROOT / "examples").glob("*.py"), *(ROOT / "src").rglob("*.py")]
    foreign = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources
        for name in installed_names(path.read_text())
        if name not in {DISTRIBUTION, ".", *THIRD_PARTY}
    }
    assert sorted(foreign) == []


# -- what the command and the settings say ---------------------------------------------------


def test_the_readme_lists_the_chats_slash_commands() -> None:
    """README's "In the chat:" line names every slash command, each with its arguments."""
    from chatcli.cli.slash import SLASH_COMMANDS

    readme = (ROOT / "README.md").read_text()
    line = readme[readme.index("In the chat: ") :].split(".\n")[0]
    shown = re.findall(r"`(/[^`]+)`", line)
    expected = [f"/{c.name} {c.args}".strip() for c in SLASH_COMMANDS.values()]
    assert sorted(shown) == sorted(expected)


def test_the_proxy_page_names_every_flag() -> None:
    text = (ROOT / "docs" / "proxy.md").read_text()
    flags = set(re.findall(r"--[a-z][a-z-]+", proxy_parser().format_help()))
    assert sorted(f for f in flags - {"--help"} if f not in text) == []


def _documented_defaults() -> dict[str, str]:
    """`CHATCLI_X` -> the default column of configuration.md's three-column tables."""
    rows = re.findall(
        r"^\| `(CHATCLI_\w+)` \| [^|]+ \| ([^|]+) \|$",
        (ROOT / "docs" / "configuration.md").read_text(),
        re.M,
    )
    return {name: default.strip() for name, default in rows}


def _field_of(variable: str) -> tuple[str, str] | None:
    """(the settings class, its field) that `variable` sets, found through `from_env` alone:
    the field that changes when the variable is given a valid other value."""
    from chatcli import CompactionConfig, MicrocompactConfig, RecoveryConfig
    from chatcli.errors import ConfigError

    for cls in (RecoveryConfig, MicrocompactConfig, CompactionConfig):
        base = cls.from_env({})
        for probe in ("7", "3", "1", "60", "90", "1234", "99999", "seed", "native", "thinking"):
            try:
                other = cls.from_env({variable: probe})
            except ConfigError:
                continue
            changed = [
                f for f in base.__dataclass_fields__ if getattr(base, f) != getattr(other, f)
            ]
            if changed:
                (field,) = changed
                return cls.__name__, _shown(getattr(base, field))
    return None


def _shown(default: object) -> str:
    """A default as the page writes it: a list as its items, an empty one as "none"."""
    if isinstance(default, tuple):
        return ", ".join(default) or "none"
    return str(default)


def test_the_documented_defaults_are_the_codes() -> None:
    defaults = _documented_defaults()
    assert len(defaults) > 20
    wrong = {}
    for variable, documented in defaults.items():
        found = _field_of(variable)
        assert found is not None, f"{variable}: no settings class reads it"
        if found[1] != documented:
            wrong[variable] = (documented, found)
    assert wrong == {}
