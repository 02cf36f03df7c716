"""llama.cpp in this process, prebuilt: xllamacpp's `Server` (extra `local`).

xllamacpp (MIT, by the Xinference team) ships llama.cpp and its HTTP server compiled into one
abi3 wheel, so `pip install 'chatcli-recovery[local]'` needs no compiler. `start_engine` loads
a GGUF file into it; the embedded provider (`chatcli.providers.llama_cpp`) hands it Chat
Completions dicts (`Server.handle_chat_completions`), and the test suite serves the same
engine over HTTP in place of a compiled `llama-server` (tests/llama_server.py).

What this module owns:

- the pinned release (`XLLAMACPP_VERSION`) and the platforms its wheels serve
  (`served_platform`; the environment marker of the `local` extra in pyproject.toml says the
  same, so elsewhere the extra installs without the engine instead of compiling it);
- the CPU the wheel was built for: its x86-64 build uses AVX, AVX2, FMA, F16C and BMI2
  (`REQUIRED_CPU_FLAGS`; `xllamacpp.get_system_info()` lists them), and on a CPU without
  them llama.cpp dies of an illegal instruction. `engine_problem` checks the CPU's flags
  (Linux: /proc/cpuinfo) before the library is imported; `EngineUnavailable` names the ways
  out. (On Windows and macOS the flags are not read: there the wheel is trusted.)
- `EngineOptions`: what an engine is started with, llama-server's options by their names
  there (`--ctx-size`, `--threads`, `--seed`, `--reverse-prompt`, `--grammar`, ...);
- the listener: xllamacpp always serves llama.cpp's HTTP API as well, with no key. The
  provider puts it on a Unix socket in a private temporary directory (no TCP port; llama.cpp
  takes a host ending in `.sock` for a socket path); the tests on a port of 127.0.0.1;
- quiet: verbosity 0 by default (llama.cpp's default logs every request on stderr).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from chatcli.errors import ConfigError
from chatcli.providers._common import require_module

__all__ = [
    "REQUIRED_CPU_FLAGS",
    "XLLAMACPP_VERSION",
    "EngineOptions",
    "EngineUnavailable",
    "engine_options",
    "engine_problem",
    "missing_cpu_flags",
    "require_engine",
    "served_platform",
    "start_engine",
    "templated_prompt_tokens",
]

XLLAMACPP_VERSION = "2026.10.11549"
# The x86-64 instruction sets the wheel's llama.cpp is compiled with, as /proc/cpuinfo names
# them (its `get_system_info()` reports them as AVX, AVX2, F16C, FMA, BMI2).
REQUIRED_CPU_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2")
# The first bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"

_WAYS_OUT = (
    "Ways out: run llama.cpp's own server built for this machine and chat through it "
    "(chatcli --provider openai-compatible --base-url http://127.0.0.1:8080/v1 --model NAME), "
    f"or build the engine from source (pip install --no-binary xllamacpp "
    f"xllamacpp=={XLLAMACPP_VERSION}: a C++ compiler, CMake and Rust, many minutes)."
)


class EngineUnavailable(ConfigError):
    """The embedded llama.cpp cannot run here (platform, CPU or a missing install); the
    message says why and what to do instead."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOptions:
    """An engine's settings, named as llama-server's options. None leaves llama.cpp's
    default (threads: the machine's cores; sampling: temperature 0.8, top_p 0.95).

    `host`/`port`: where its HTTP API listens (a host ending in `.sock` is a Unix socket
    path; port 0: any free one). `stop`: stop strings for requests that give none
    (`--reverse-prompt`). `grammar`: a GBNF grammar every answer follows (`--grammar`).
    `cache_prompt` False: every prompt is evaluated whole (`--no-cache-prompt`).
    `chat_template`: a Jinja chat template instead of the model's (`--chat-template-file`'s
    text). `verbosity`: llama.cpp's log on stderr (0: none; 3: every request, as llama-server
    logs by default).
    """

    n_ctx: int
    host: str = "127.0.0.1"
    port: int = 0
    alias: str | None = None
    n_parallel: int = 1
    n_threads: int | None = None
    seed: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    n_gpu_layers: int | None = None
    stop: tuple[str, ...] = ()
    grammar: str | None = None
    cache_prompt: bool = True
    chat_template: str | None = None
    verbosity: int = 0


def served_platform(system: str = sys.platform, machine: str = platform.machine()) -> bool:
    """Whether xllamacpp has a prebuilt wheel for this platform (Linux x86-64 with glibc,
    Windows x86-64, macOS 13+): the `local` extra's environment marker, in code."""
    return (system, machine) in {("linux", "x86_64"), ("win32", "AMD64")} or system == "darwin"


def missing_cpu_flags(cpuinfo: str) -> tuple[str, ...]:
    """The `REQUIRED_CPU_FLAGS` a Linux /proc/cpuinfo text does not list (its first CPU)."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            present = set(value.split())
            return tuple(flag for flag in REQUIRED_CPU_FLAGS if flag not in present)
    return ()  # no flags line: nothing to judge by


def engine_problem(
    system: str = sys.platform,
    machine: str = platform.machine(),
    cpuinfo: Path = Path("/proc/cpuinfo"),
) -> str | None:
    """Why the prebuilt engine cannot run here, or None. Imports nothing."""
    where = f"{system} {machine}"
    if not served_platform(system, machine):
        return f"chatcli's embedded llama.cpp (xllamacpp) has no prebuilt wheel for {where}."
    if system == "linux" and machine == "x86_64" and cpuinfo.is_file():
        missing = missing_cpu_flags(cpuinfo.read_text(errors="replace"))
        if missing:
            wanted = ", ".join(flag.upper() for flag in REQUIRED_CPU_FLAGS)
            return (
                f"chatcli's embedded llama.cpp (xllamacpp {XLLAMACPP_VERSION}) is built for "
                f"CPUs with {wanted} (Intel since 2013, AMD since 2015); this one lacks "
                f"{', '.join(flag.upper() for flag in missing)}."
            )
    return None


def require_engine() -> ModuleType:
    """The xllamacpp module; `EngineUnavailable` (the ways out in its message) where the
    prebuilt engine cannot run, ImportError (what to install) where it is not installed."""
    problem = engine_problem()
    if problem is not None:
        raise EngineUnavailable(f"{problem} {_WAYS_OUT}")
    return require_module("xllamacpp", "local")


def start_engine(model: str, options: EngineOptions) -> Any:
    """xllamacpp's `Server` with `model` loaded, listening as `options` say.

    Raises `EngineUnavailable` where the engine cannot run (the ways out in its message) and
    ConfigError for a file llama.cpp cannot load.
    """
    xllamacpp = require_engine()
    _check_model_file(Path(model))
    try:
        return xllamacpp.Server(_params(xllamacpp, model, options))
    except RuntimeError as exc:  # xllamacpp says only "Failed to init server, ..."
        raise ConfigError(
            f"llama.cpp could not start on {model} with a {options.n_ctx:,}-token context "
            "(a model architecture it does not know, too little memory, or its listening "
            f"address {options.host}:{options.port} taken)"
        ) from exc


def _check_model_file(path: Path) -> None:
    if not path.is_file():
        raise ConfigError(f"no model file at {path}")
    with path.open("rb") as file:
        if file.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
            raise ConfigError(f"{path} is not a GGUF model file")


def _params(xllamacpp: Any, model: str, options: EngineOptions) -> Any:
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = options.n_ctx
    params.n_parallel = options.n_parallel
    params.hostnames = [options.host]
    params.port = options.port
    params.verbosity = options.verbosity
    params.model_alias = {options.alias or model}
    params.antiprompt = list(options.stop)
    params.cache_prompt = options.cache_prompt
    if options.chat_template is not None:
        params.chat_template = options.chat_template
    if options.n_threads is not None:
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = options.n_threads
    if options.n_gpu_layers is not None:
        params.n_gpu_layers = options.n_gpu_layers
    sampling = params.sampling
    if options.seed is not None:
        sampling.seed = options.seed
    if options.temperature is not None:
        sampling.temp = options.temperature
    if options.top_p is not None:
        sampling.top_p = options.top_p
    if options.grammar is not None:
        user = xllamacpp.common_grammar_type.COMMON_GRAMMAR_TYPE_USER
        sampling.grammar = xllamacpp.CommonGrammar(user, options.grammar)
    return params


def engine_options(n_ctx: int, given: Mapping[str, Any]) -> EngineOptions:
    """`EngineOptions` from keyword arguments (a provider's `**engine_options`): an unknown
    name is a TypeError that lists the known ones."""
    known = set(EngineOptions.__dataclass_fields__) - {"n_ctx", "host", "port"}
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(f"unknown engine option(s) {unknown}; known: {sorted(known)}")
    return EngineOptions(n_ctx=n_ctx, **given)


def templated_prompt_tokens(
    post_json: Callable[[str, Mapping[str, Any]], Any],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """The prompt tokens of Chat Completions `messages` (offering `tools`) as a llama.cpp
    server counts a chat request's: its chat template applied (`/apply-template`, which renders
    the tools as a request's are), then its tokenizer (`/tokenize` with `add_special`: a BOS
    where the model wants one). `post_json(path, body)` reaches the server."""
    body: dict[str, Any] = {"messages": messages, **({"tools": tools} if tools else {})}
    prompt = post_json("/apply-template", body)["prompt"]
    return len(post_json("/tokenize", {"content": prompt, "add_special": True})["tokens"])
