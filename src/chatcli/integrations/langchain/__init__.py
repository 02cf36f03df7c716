"""LangChain v1 integration: `ContextRecoveryMiddleware`, chatcli's recovery as agent middleware.

Needs the `langchain` extra (`pip install 'chatcli-recovery[langchain]'`); without it, importing
this package says so. See `.middleware` for what it does and `.convert` for how messages are
translated.
"""

from chatcli.providers._common import require_module

require_module("langchain.agents.middleware", "langchain")

from chatcli.integrations.langchain.middleware import ContextRecoveryMiddleware  # noqa: E402

__all__ = ["ContextRecoveryMiddleware"]
