"""Problems of the chain backend; each class is one response shape."""

from __future__ import annotations

from app.errors import DomainError, ServiceUnavailable


class ChainNotConfigured(ServiceUnavailable):
    code, title = "chain_not_configured", "The registry's chain is not configured"


class ChainUnavailable(ServiceUnavailable):
    code, title = "chain_unavailable", "The registry's chain node did not answer"


class TransactionReverted(DomainError):
    status, code, title = 409, "chain_transaction_reverted", "The chain refused the registry transaction"


class NotYetConfirmed(Exception):
    """A relayed transaction is not mined or lacks `CHAIN_CONFIRMATIONS` blocks on top yet: ask again later."""
