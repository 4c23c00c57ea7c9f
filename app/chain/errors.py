"""Problems of the chain backend; each class is one response shape."""

from __future__ import annotations

from app.errors import ServiceUnavailable


class ChainNotConfigured(ServiceUnavailable):
    code, title = "chain_not_configured", "The registry's chain is not configured"


class ChainUnavailable(ServiceUnavailable):
    code, title = "chain_unavailable", "The registry's chain node did not answer"
