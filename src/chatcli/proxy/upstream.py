"""The upstream the proxy forwards to, built from the chat's own settings.

`open_upstream` builds the provider with the chat's settings and registry
(`chatcli.chat.settings.load_settings`, `chatcli.providers.registry.create_provider`): the same
flags, variables, config file and key lookup (environment or keyring only). For OpenAI with a
model that compacts on OpenAI's servers (the adapter's `native_compaction_supported`), it
builds the same upstream over the Responses API too (`Upstream.native`), to which the proxy
passes compaction (`chatcli.proxy.compaction_routes`). What each request adds to the upstream
is `chatcli.wire.forwarding`'s, which `chatcli.wrap` and the LiteLLM wrapper share.
"""

from __future__ import annotations

from collections.abc import Mapping

from chatcli.chat.settings import CliSettings
from chatcli.providers.openai import OpenAI
from chatcli.providers.registry import ProviderNotConfigured, create_provider, detect_provider
from chatcli.wire.forwarding import Upstream

__all__ = ["open_upstream"]

# The wire dialect of each registry provider that speaks one a client can (python:... and the
# others speak none: only the mapped settings reach them).
_DIALECTS = {"openai": "openai", "openai-compatible": "openai", "anthropic": "anthropic"}


def open_upstream(settings: CliSettings, environ: Mapping[str, str]) -> Upstream:
    """The upstream the settings name (raises ProviderNotConfigured when none is)."""
    name = settings.provider or detect_provider(environ)
    if name is None:
        raise ProviderNotConfigured(
            "no upstream: give --provider (and --model, --base-url) or set a provider's key"
        )
    provider = create_provider(
        name,
        model=settings.model,
        base_url=settings.base_url,
        context_window=settings.context_window,
        environ=environ,
    )
    model = settings.model or str(getattr(provider, "model", name))
    return Upstream(
        provider=provider,
        name=name,
        model=model,
        dialect=_DIALECTS.get(name),
        max_tokens=settings.max_tokens,
        native=_native(name, model, settings, environ),
    )


def _native(
    name: str, model: str, settings: CliSettings, environ: Mapping[str, str]
) -> OpenAI | None:
    """OpenAI's Responses adapter for `model`, when that model compacts on OpenAI's servers."""
    if name != "openai":
        return None
    responses = create_provider(
        name,
        model=model,
        base_url=settings.base_url,
        context_window=settings.context_window,
        environ=environ,
        api="responses",
    )
    return (
        responses
        if isinstance(responses, OpenAI) and responses.native_compaction_supported()
        else None
    )
