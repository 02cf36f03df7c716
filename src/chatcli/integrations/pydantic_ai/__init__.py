"""chatcli's context recovery for pydantic-ai agents: `ContextRecovery`, a capability.

    agent = Agent(model, capabilities=[ContextRecovery(on_event=print)])

Needs the `pydantic-ai` extra: pip install 'chatcli-recovery[pydantic-ai]'.
"""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401  # only to fail here, with the install hint
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "chatcli.integrations.pydantic_ai needs pydantic-ai: "
        "pip install 'chatcli-recovery[pydantic-ai]'"
    ) from exc

from chatcli.integrations.pydantic_ai.capability import ContextRecovery

__all__ = ["ContextRecovery"]
