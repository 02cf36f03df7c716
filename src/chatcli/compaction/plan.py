"""The plan of one compaction, and how the conversation is cut and packed for the summariser.

- `Plan` (`make_plan`): everything a compaction needs besides the messages, resolved once:
  the budget the new view must fit (window minus output reserve), the summariser's window,
  how many tokens a summary may take (a share of that window at most, so the conversation
  always gets the rest and merging always makes progress), and whether the summariser's
  server can constrain its answer to a JSON schema (its adapter's
  `structured_output_supported()`: then the sections are asked for in that form), and the
  conversation's previous request when the summariser shares its prompt cache
  (`chatcli.compaction.warm`: the summary is then asked for after it), with the price of a
  cache read against an input token (`read_ratio`: the catalog's, for the summariser's model).
- `split`: the kept system messages, the middle to summarise, the kept tail (the last turns,
  at most half of the budget, so the summary has room).
- `chunk_capacity`, `chunks`: a middle larger than the summariser's window is packed into
  chunks that each fit one summary call.
- `carry_budget`: the room of the block that carries what removed user messages said.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from chatcli.catalog import lookup
from chatcli.compaction.previous import PreviousRequest
from chatcli.compaction.prompt import STRUCTURED_PROMPT, SYSTEM_PROMPT
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CannotSummarise, CompactionError
from chatcli.history.carry import CarryBudget
from chatcli.history.text import cut_middle
from chatcli.history.truncate import Number
from chatcli.messages import Message, Role, total_chars
from chatcli.providers.base import Provider
from chatcli.tokens.estimate import TokenEstimator

__all__ = [
    "Plan",
    "Split",
    "carry_budget",
    "chunk_capacity",
    "chunks",
    "constrains_output",
    "make_plan",
    "max_tail_chars",
    "read_ratio",
    "schema_keeps_prompt",
    "shares_cache",
    "split",
    "summary_tokens",
]

# A summary call's max_tokens is at most this share of the summariser's window, so the
# conversation always gets the rest and merging always makes progress.
_SUMMARY_WINDOW_SHARE = 4
# The token estimate is an estimate: chunks use this share of the room it computes.
_CHUNK_SAFETY = 0.9
_NO_URL = object()  # a provider without a `base_url` attribute (an embedded engine)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Everything a compaction needs besides the messages, resolved once."""

    focus: str | None
    config: CompactionConfig
    estimator: TokenEstimator
    summary_estimator: TokenEstimator  # the summariser's tokens (recalibrated on overflow)
    budget: int | None  # tokens the new view must fit in (None: unknown)
    summarizer_window: int | None
    summary_tokens: int
    fallback: bool
    recovery: RecoveryConfig
    numbering: Number | None = None  # the transcript's message numbers (None: not known)
    # The provider error that stated `summarizer_window`, chained to errors about that window.
    window_error: BaseException | None = None
    structured: bool = False  # the summary's sections asked for as a JSON object
    # The conversation's last request, sent to the summariser's prompt cache (None: not known,
    # or the summariser does not share that cache), whether a schema leaves a prompt as it is
    # (a grammar on the server), so the warm request may ask for one, and what a cached input
    # token costs against an uncached one (None: the price is not known).
    previous: PreviousRequest | None = None
    grammar: bool = False
    cache_read_ratio: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """A conversation cut for compaction: kept system messages, the middle, the kept tail."""

    systems: tuple[Message, ...]
    middle: tuple[Message, ...]
    tail: tuple[Message, ...]


def make_plan(
    provider: Provider,
    summarizer: Provider | None,
    focus: str | None,
    config: CompactionConfig | None,
    estimator: TokenEstimator | None,
    window: int | None,
    output_reserve: int,
    summarizer_window: int | None,
    fallback: bool,
    recovery_config: RecoveryConfig | None,
    numbering: Number | None = None,
    *,
    previous: PreviousRequest | None = None,
) -> Plan:
    """The plan from the entry points' arguments: the windows default to the ones the
    provider and the summariser declare (the summariser's to `window`). `previous`, the
    conversation's last request (sent to `provider`), is kept when the summariser is the
    provider or shares its cache."""
    config = config or CompactionConfig()
    window = window if window is not None else _declared_window(provider)
    if summarizer_window is None:
        summarizer_window = _declared_window(summarizer) if summarizer is not None else None
        summarizer_window = summarizer_window if summarizer_window is not None else window
    estimator = estimator or TokenEstimator()
    return Plan(
        focus=focus.strip() if focus and focus.strip() else None,
        config=config,
        estimator=estimator,
        summary_estimator=estimator,
        budget=None if window is None else max(window - output_reserve, 0),
        summarizer_window=summarizer_window,
        summary_tokens=summary_tokens(config, summarizer_window),
        fallback=fallback,
        recovery=recovery_config or RecoveryConfig(),
        numbering=numbering,
        structured=constrains_output(summarizer or provider),
        previous=previous if shares_cache(provider, summarizer) else None,
        grammar=schema_keeps_prompt(summarizer or provider),
        cache_read_ratio=read_ratio(summarizer or provider),
    )


def shares_cache(provider: Provider, summarizer: Provider | None) -> bool:
    """Whether `summarizer` reads the prompt cache of what was sent to `provider`: none given
    (the provider summarises), the same object, or an adapter of the same kind for the same
    model at the same URL (`base_url`; None: the API's own). An embedded engine has no URL:
    its cache is its own object's."""
    if summarizer is None or summarizer is provider:
        return True
    url = getattr(provider, "base_url", _NO_URL)
    return (
        url is not _NO_URL
        and url == getattr(summarizer, "base_url", _NO_URL)
        and type(provider) is type(summarizer)
        and getattr(provider, "model", None) == getattr(summarizer, "model", None)
    )


def constrains_output(provider: Provider) -> bool:
    """Whether `provider` can constrain an answer to a JSON schema (`Settings.response_format`),
    as its adapter declares (`structured_output_supported()`; none declared: no)."""
    supported = getattr(provider, "structured_output_supported", None)
    return callable(supported) and bool(supported())


def schema_keeps_prompt(provider: Provider) -> bool:
    """Whether a JSON schema answer format leaves `provider`'s prompt as it is (the server
    enforces it as a grammar on the output: llama.cpp, vLLM, Ollama), so a request that adds
    one still reads the prompt cache, as its adapter declares (`structured_output_keeps_prompt()`;
    none declared: no, as for OpenAI and Anthropic, whose schema is part of the prompt)."""
    keeps = getattr(provider, "structured_output_keeps_prompt", None)
    return callable(keeps) and bool(keeps())


def read_ratio(provider: Provider) -> float | None:
    """A cache read's price over an input token's for `provider`'s model, as the catalog
    gives them (`chatcli.catalog.lookup`); None when either is not known (a local server)."""
    model = getattr(provider, "model", None)
    info = lookup(model) if isinstance(model, str) and model else None
    prices = info.prices if info is not None else None
    if prices is None or not prices.input or prices.cache_read is None:
        return None
    return prices.cache_read / prices.input


def summary_tokens(config: CompactionConfig, summarizer_window: int | None) -> int:
    """A summary call's max_tokens: the configured size, at most a share of the window."""
    if summarizer_window is None:
        return config.summary_tokens
    return max(1, min(config.summary_tokens, summarizer_window // _SUMMARY_WINDOW_SHARE))


def _declared_window(provider: Provider) -> int | None:
    value = getattr(provider, "context_window", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def max_tail_chars(plan: Plan) -> int | None:
    """The kept tail may fill at most half of the budget, so that the summary has room."""
    return None if plan.budget is None else int(plan.budget * plan.estimator.chars_per_token) // 2


def split(messages: tuple[Message, ...], keep_turns: int, max_tail_chars: int | None) -> Split:
    """Cut after the leading system messages and before the last `keep_turns` user turns.

    `messages` has repaired pairing (results right after their call), so any user or
    assistant message is a boundary that splits no tool call from its result. When the kept
    turns would hold more than half of the conversation (one long agent turn) or more than
    `max_tail_chars`, the cut moves to later boundaries inside them: the latest request is
    then summarised, and verification pins it verbatim if the summary lacks it.
    """
    others = [i for i, m in enumerate(messages) if m.role is not Role.SYSTEM]
    if not others:
        raise CompactionError("nothing to compact: the conversation has no messages yet")
    boundaries = [i for i in others[1:] if messages[i].role is not Role.TOOL]
    if not boundaries:
        raise CompactionError("nothing to compact: the conversation is a single exchange")
    users = [i for i in others if messages[i].role is Role.USER]
    preferred = users[-keep_turns] if len(users) >= keep_turns else others[0]
    limit = total_chars([messages[i] for i in others]) // 2
    if max_tail_chars is not None:
        limit = min(limit, max_tail_chars)
    suffix = list(accumulate((m.char_count for m in reversed(messages)), initial=0))[::-1]
    start = next((i for i in boundaries if i >= preferred and suffix[i] <= limit), boundaries[-1])
    before = messages[:start]
    return Split(
        systems=tuple(m for m in before if m.role is Role.SYSTEM),
        middle=tuple(m for m in before if m.role is not Role.SYSTEM),
        tail=messages[start:],
    )


def chunk_capacity(plan: Plan) -> int | None:
    """Chars of conversation one summary call can carry, or None when the window is unknown."""
    if plan.summarizer_window is None:
        return None
    # The instructions, the request's own wrapper text (under 600 chars) and the focus (a
    # structured request's schema is a grammar on the server, not prompt text).
    instructions = len(STRUCTURED_PROMPT if plan.structured else SYSTEM_PROMPT)
    wrapper = instructions + 600 + len(plan.focus or "")
    estimator = plan.summary_estimator
    prompt = estimator.count_chars(wrapper, 2)
    room = plan.summarizer_window - plan.summary_tokens - prompt
    capacity = int(room * estimator.chars_per_token * _CHUNK_SAFETY)
    if capacity < 2 * plan.summary_tokens * estimator.chars_per_token:
        raise CannotSummarise(
            f"the summariser's window ({plan.summarizer_window:,} tokens) is too small to "
            "summarise anything"
        ) from plan.window_error
    return capacity


def chunks(blocks: tuple[str, ...], capacity: int | None) -> tuple[str, ...]:
    """Consecutive blocks packed greedily into texts of at most `capacity` chars."""
    if capacity is None:
        return ("\n\n".join(blocks),)
    packed: list[str] = []
    current: list[str] = []
    size = 0
    for block in (cut_middle(b, capacity) for b in blocks):
        if current and size + 2 + len(block) > capacity:
            packed.append("\n\n".join(current))
            current, size = [], 0
        current.append(block)
        size += len(block) + 2
    packed.append("\n\n".join(current))
    return tuple(packed)


def carry_budget(messages: tuple[Message, ...], plan: Plan) -> CarryBudget:
    """The carried block's share (`RecoveryConfig.carry_pct`) of the budget, or of the view
    before compaction when the window is unknown."""
    room = plan.budget if plan.budget is not None else plan.estimator.count(messages)
    tokens = room * plan.recovery.carry_pct // 100
    return CarryBudget(tokens=tokens, count=plan.estimator.count, room=room)
