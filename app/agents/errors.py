"""Problems of the agent network; each class is one response shape."""

from __future__ import annotations

from typing import Any

from app.errors import Conflict, DomainError, Forbidden, NotFound, Unauthorized, ValidationFailed


class AuthenticationFailed(Unauthorized):
    code, title = "authentication_failed", "Authentication failed"

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, scheme="Bearer", **kwargs)


class AccountDeactivated(AuthenticationFailed):
    code, title = "account_deactivated", "Account deregistered"


class InsufficientCredits(DomainError):
    status, code, title = 402, "insufficient_credits", "Insufficient credits"

    def __init__(self, required: int, available: int) -> None:
        super().__init__(
            f"This operation costs {required} credits; {available} are available.",
            required=required,
            available=available,
        )


class CardTooLarge(DomainError):
    status, code, title = 413, "card_too_large", "Card too large"


class InvalidCard(ValidationFailed):
    code, title = "invalid_card", "Invalid agent card"


class NotAllowedForDid(Forbidden):
    code, title = "not_allowed_for_did", "Not allowed for this DID"


class UnknownDid(NotFound):
    code = "not_found"


class CardNotFound(NotFound):
    code = "not_found"


class DidDeactivated(DomainError):
    status, code, title = 410, "did_deactivated", "DID deactivated"


class OwnerNamedRecord(Conflict):
    code, title = "owner_named_record", "Registry record names an owner"

    def __init__(self, owner: str) -> None:
        super().__init__(
            f"The registry record names the owner {owner}; an organisation-owned agent cannot be "
            "deregistered through self-service.",
            owner=owner,
        )


class AlreadyOwned(Conflict):
    code, title = "already_owned", "Agent already owned"


class OwnerNotNamed(Conflict):
    code, title = "owner_not_named", "Owner not named"


class NotAnOrganisation(Forbidden):
    code, title = "not_an_organisation", "Not an organisation account"


class ConsentNotPending(Conflict):
    code, title = "consent_not_pending", "Consent not pending"


class ClaimUnavailable(NotFound):
    """The claim page exists only on a testnet."""


class RegistrySignatureRequired(ValidationFailed):
    code, title = "registry_signature_required", "Registry signature required"


class RegistrySignatureExpired(ValidationFailed):
    code, title = "registry_signature_expired", "Registry signature expired"


class RegistrySignatureRefused(Forbidden):
    code, title = "registry_signature_refused", "Registry signature not made by the record's signer"


class RecordSignedByAnother(Conflict):
    """On a chain registry, a write of a record is signed by its owner once one is named, else by its agent."""

    code, title = "record_signed_by_another", "Another key signs this registry record"

    def __init__(self, did: str, signer: str, signer_did: str) -> None:
        super().__init__(
            f"On the chain the registry record of {did} is written with the signature of {signer_did} "
            f"({signer}) only; ask it to make this write.",
            signer=signer,
            signer_did=signer_did,
        )


class ConsentSignatureStale(Conflict):
    code, title = "consent_signature_stale", "The organisation's registry signature no longer holds"
