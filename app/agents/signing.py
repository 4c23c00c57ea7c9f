"""What a registry write asks its signer to sign (no Flask, no web3): shared by the registry, the
consents and their chain writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SET_CARD = "set-card"
DEREGISTER = "deregister"
SET_OWNER = "set-owner"
APPROVE_CONSENT = "approve-consent"
REVOKE_OWNER = "revoke-owner"
# The typed-data operations of ownership: the organisation's request, the agent's approval, its revocation.
OWNERSHIP_OPERATIONS = (SET_OWNER, APPROVE_CONSENT, REVOKE_OWNER)


@dataclass(frozen=True)
class WriteToSign:
    """The EIP-712 typed data of a registry write on a chain and the address that must sign it;
    both None when the write needs no signature."""

    operation: str
    typed_data: dict[str, Any] | None
    signer: str | None
