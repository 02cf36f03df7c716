"""Provider adapters: the only place that knows a wire format.

Adapters are imported lazily so that a missing optional SDK only matters when it is used.
"""

from chatcli.providers.base import Provider, Request, Response, ToolSpec

__all__ = ["Provider", "Request", "Response", "ToolSpec"]
