"""LangChain v1 integration: `ContextRecoveryMiddleware`, chatcli's recovery as agent middleware.

Needs the `langchain` extra (`pip install 'chatcli[langchain]'`). See `.middleware` for what it
does and `.convert` for how messages are translated.
"""

from chatcli.integrations.langchain.middleware import ContextRecoveryMiddleware

__all__ = ["ContextRecoveryMiddleware"]
