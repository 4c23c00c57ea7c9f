"""Problems of the chain backend; each class is one response shape."""

from __future__ import annotations

from app.errors import DomainError, ServiceUnavailable


class ChainNotConfigured(ServiceUnavailable):
    code, title = "chain_not_configured", "The registry's chain is not configured"


class ChainUnavailable(ServiceUnavailable):
    code, title = "chain_unavailable", "The registry's chain node did not answer"


class TransactionReverted(DomainError):
    status, code, title = 409, "chain_transaction_reverted", "The chain refused the registry transaction"


class NonceTakenElsewhere(DomainError):
    status, code, title = 409, "chain_nonce_taken", "Another transaction of the relayer took this transaction's nonce"


class NotYetMined(Exception):
    """A relayed transaction is not mined yet: ask again in `seconds`.

    The relay keeps it going meanwhile (sent again when dropped, replaced with higher fees when
    stuck), so this wait does not use up the job's retries either.
    """

    def __init__(self, reason: str, seconds: float) -> None:
        super().__init__(reason)
        self.seconds = seconds


class NotYetConfirmed(Exception):
    """A relayed transaction is mined but lacks `CHAIN_CONFIRMATIONS` blocks on top: ask again in `seconds`.

    Blocks keep coming, so this wait ends: it does not use up the job's retries.
    """

    def __init__(self, reason: str, seconds: float) -> None:
        super().__init__(reason)
        self.seconds = seconds
