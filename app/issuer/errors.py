"""Problems the issuer feature answers with."""

from __future__ import annotations

from app.errors import Conflict, NotFound, ValidationFailed


class IssuerKeyNotFound(NotFound):
    code, title = "issuer_key_not_found", "Issuer key not found"


class IssuerKeyRetired(Conflict):
    code, title = "issuer_key_retired", "The issuer key is retired"


class IssuerDidNotFound(NotFound):
    code, title = "did_not_found", "DID document not found"


class CredentialNotIssuable(ValidationFailed):
    code, title = "credential_not_issuable", "The credential cannot be issued"


class CredentialNotDerivable(ValidationFailed):
    code, title = "credential_not_derivable", "No derived credential can be made"


class NoIssuerKey(ValidationFailed):
    code, title = "issuer_key_missing", "No usable issuer key"


class PresentationNotSignable(ValidationFailed):
    code, title = "presentation_not_signable", "The presentation cannot be signed"
