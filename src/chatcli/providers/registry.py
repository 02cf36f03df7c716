"""Providers by name: `create_provider("anthropic", model=...)` and the setup help.

The names are `openai`, `anthropic`, `gemini`, `openai-compatible` and `llama-cpp`; each
adapter is imported only when it is chosen, so a missing optional SDK matters only then (its
ImportError names the extra to install). API keys come from the environment or the OS keyring
(`chatcli.providers.keys.lookup_api_key`). The model's limits are the adapter's own
(`chatcli.providers._common.model_limits`), unless the user set the window; an
OpenAI-compatible server is asked for the window it runs with (`chatcli.providers.discovery`).

Any other provider, a test double or a plugin, is named `python:MODULE:FACTORY`: the factory
is called as `FACTORY(model=..., base_url=..., environ=..., **opts)` (with `context_window=`
too when the user set one) and returns a Provider.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatcli.catalog import ModelInfo, Prices, lookup
from chatcli.errors import ConfigError
from chatcli.providers._common import require_module
from chatcli.providers.base import Provider
from chatcli.providers.keys import lookup_api_key
from chatcli.providers.llama_engine import require_engine

__all__ = [
    "PROVIDERS",
    "PYTHON_PREFIX",
    "ProviderNotConfigured",
    "ProviderSpec",
    "create_provider",
    "detect_provider",
    "model_info",
    "setup_help",
]

PYTHON_PREFIX = "python:"


class ProviderNotConfigured(ConfigError):
    """No provider (or no model, key or URL for it) is configured; `str()` says what to set."""


Builder = Callable[..., Provider]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSpec:
    """One named provider: where its adapter is, its key variables, and its default model."""

    name: str
    adapter: str  # "module:Class"
    # The SDK the adapter needs and the extra that installs it: checked when the provider is
    # created, so a missing one stops the command before the chat starts, not at its first
    # request (the OpenAI adapters import their SDK only then).
    sdk: tuple[str, str]
    key_env: tuple[str, ...] = ()
    default_model: str | None = None
    needs_base_url: bool = False
    local: bool = False  # runs on this machine: no key, no API fee
    # max_tokens when the user sets none: a local model given no limit generates until its
    # window is full, which on a CPU takes minutes.
    default_max_tokens: int | None = None


PROVIDERS: Mapping[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            name="openai",
            adapter="chatcli.providers.openai:OpenAI",
            sdk=("openai", "openai"),
            key_env=("OPENAI_API_KEY",),
            default_model="gpt-5-mini",
        ),
        ProviderSpec(
            name="anthropic",
            adapter="chatcli.providers.anthropic:Anthropic",
            sdk=("anthropic", "anthropic"),
            key_env=("ANTHROPIC_API_KEY",),
            default_model="claude-sonnet-4-5",
        ),
        ProviderSpec(
            name="gemini",
            adapter="chatcli.providers.gemini:Gemini",
            sdk=("google.genai", "gemini"),
            key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            default_model="gemini-2.5-flash",
        ),
        ProviderSpec(
            name="openai-compatible",
            adapter="chatcli.providers.openai_compat:OpenAICompatible",
            sdk=("openai", "openai"),
            key_env=("CHATCLI_API_KEY",),
            needs_base_url=True,
        ),
        ProviderSpec(
            name="llama-cpp",
            adapter="chatcli.providers.llama_cpp:LlamaCpp",
            sdk=("xllamacpp", "local"),
            local=True,
            default_max_tokens=256,
        ),
    )
}


def setup_help(config_path: Path | str = "~/.config/chatcli/config.toml") -> str:
    """One screen: what to set to start chatcli (`config_path`: where the config file goes)."""
    return _SETUP_HELP.format(config=config_path)


# Written for an 80x24 terminal: no line over 80 columns (rich would re-wrap it), at most 24
# lines with a usual config path.
_SETUP_HELP = """\
chatcli needs a model provider. Set ONE of these, then run chatcli again:

  OpenAI        export OPENAI_API_KEY=sk-...         (model: gpt-5-mini)
  Anthropic     export ANTHROPIC_API_KEY=sk-ant-...  (model: claude-sonnet-4-5)
  Gemini        export GEMINI_API_KEY=...            (model: gemini-2.5-flash)
  Local server  chatcli --provider openai-compatible --model NAME \\
  (vLLM, Ollama,        --base-url http://localhost:8080/v1
   llama.cpp)   (a key, if it needs one: CHATCLI_API_KEY)
  GGUF file     chatcli --provider llama-cpp --model path/to/model.gguf
                (needs pip install 'chatcli-recovery[local]')

--model or CHATCLI_MODEL chooses the model. Keys come from the environment or
the OS keyring (service "chatcli", user = provider name), never from files.
provider, model, base_url, context_window and max_tokens can also be set in
{config}:

  provider = "anthropic"
  model = "claude-sonnet-4-5"

No key at all? `chatcli --local` chats offline with a small model in llama.cpp,
and `chatcli demo` shows the recovery at work on it (both need the local extra).
"""


def detect_provider(environ: Mapping[str, str]) -> str | None:
    """The first cloud provider whose key variable is set (the order of PROVIDERS)."""
    for spec in PROVIDERS.values():
        if spec.key_env and not spec.needs_base_url and any(environ.get(n) for n in spec.key_env):
            return spec.name
    return None


def create_provider(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    context_window: int | None = None,
    environ: Mapping[str, str] | None = None,
    **opts: Any,
) -> Provider:
    """The provider `name` for `model` (see the module docstring). `context_window`, when
    given, is the window the model runs with (llama-cpp: its n_ctx); else the adapter's own.

    Raises ProviderNotConfigured when the name is unknown or a model, key or URL is missing.
    """
    env = os.environ if environ is None else environ
    if name.startswith(PYTHON_PREFIX):
        factory = _load(name[len(PYTHON_PREFIX) :], name)
        window = {} if context_window is None else {"context_window": context_window}
        return factory(model=model, base_url=base_url, environ=env, **window, **opts)
    spec = _spec(name)
    model = model or spec.default_model
    if not model:
        what = "a path to a .gguf file" if spec.local else "a model name"
        raise ProviderNotConfigured(f"{name}: give {what} with --model or CHATCLI_MODEL")
    if spec.needs_base_url and not base_url:
        raise ProviderNotConfigured(
            f"{name}: give the server's URL with --base-url or CHATCLI_BASE_URL "
            "(e.g. http://localhost:8080/v1)"
        )
    arguments = _arguments(spec, model, base_url, env)
    options = _options(spec, base_url, context_window, env)
    if spec.local:
        require_engine()  # names the ways out where the prebuilt engine cannot run
    else:
        require_module(*spec.sdk)
    adapter = _load(spec.adapter, name)
    return adapter(*arguments, **{**options, **opts})


def model_info(name: str, model: str, provider: Provider | None = None) -> ModelInfo | None:
    """What is known about `model`: local models are free and their window is the
    provider's; the others come from the catalog (None: unknown prices and limits)."""
    spec = PROVIDERS.get(name)
    if spec is not None and spec.local:
        window = getattr(provider, "context_window", None)
        free = Prices(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0)
        return ModelInfo(model=model, provider=name, context_window=window, prices=free)
    return lookup(model, None if spec is None else _catalog_provider(name))


def _spec(name: str) -> ProviderSpec:
    spec = PROVIDERS.get(name)
    if spec is None:
        known = ", ".join(PROVIDERS)
        raise ProviderNotConfigured(
            f"unknown provider {name!r}: use one of {known}, or python:MODULE:FACTORY"
        )
    return spec


def _catalog_provider(name: str) -> str | None:
    return None if name == "openai-compatible" else name


def _arguments(
    spec: ProviderSpec, model: str, base_url: str | None, env: Mapping[str, str]
) -> tuple[Any, ...]:
    if spec.local:
        path = Path(model).expanduser()
        if not path.is_file():
            raise ProviderNotConfigured(f"{spec.name}: no model file at {path}")
        return (path,)
    if spec.needs_base_url:
        return (base_url, model)
    return (model,)


def _options(
    spec: ProviderSpec,
    base_url: str | None,
    context_window: int | None,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """Keyword arguments for the adapter: key, URL, and the window when the user set one
    (else the adapter declares its model's limits itself, the one place they are known)."""
    if spec.local:
        return {} if context_window is None else {"n_ctx": context_window}
    out: dict[str, Any] = {"environ": env, "api_key": _api_key(spec, env)}
    if base_url and not spec.needs_base_url:
        out["base_url"] = base_url  # a proxy or gateway in front of the cloud API
    if context_window is not None:
        out["context_window"] = context_window
    elif spec.needs_base_url:
        out["discover_window"] = True  # a local server states its window: ask it up front
    return out


def _api_key(spec: ProviderSpec, env: Mapping[str, str]) -> str | None:
    key = lookup_api_key(spec.name, spec.key_env, env)
    if key is None and not spec.needs_base_url:
        names = " or ".join(spec.key_env)
        raise ProviderNotConfigured(
            f"{spec.name}: no API key; set {names} (or store it in the OS keyring: "
            f"service 'chatcli', user '{spec.name}')"
        )
    return key


def _load(target: str, name: str) -> Builder:
    """`module:attribute`, imported now."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ProviderNotConfigured(f"{name!r}: expected python:MODULE:FACTORY")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # The module or a package above it (python:nosuch.mod:f) is missing: a typo.
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):
            raise ProviderNotConfigured(f"{name!r}: no module named {module_name!r}") from exc
        raise  # an optional SDK is missing: its ImportError says what to install
    builder = getattr(module, attribute, None)
    if not callable(builder):
        raise ProviderNotConfigured(f"{name!r}: {module_name} has no callable {attribute!r}")
    return builder  # type: ignore[no-any-return]
