"""Problems the credentials feature answers with."""

from __future__ import annotations

from app.errors import Conflict, DomainError, NotFound, ValidationFailed


class SubjectUnknown(ValidationFailed):
    code, title = "credential_subject_unknown", "The credential subject is not a user of this client"


class CredentialNotFound(NotFound):
    code, title = "credential_not_found", "Credential not found"


class StatusEntryNotFound(NotFound):
    code, title = "status_entry_not_found", "Status entry not found"


class StatusListNotFound(NotFound):
    code, title = "status_list_not_found", "Status list not found"


class StatusTransitionRefused(Conflict):
    code, title = "status_transition_refused", "This status change is not possible"


class TooManyProofs(ValidationFailed):
    code, title = "too_many_proofs", "The credential has more proofs than one verification checks"


class VerificationTooLarge(ValidationFailed):
    code, title = "verification_size_limit", "Checking the credential's proofs would transform too much data"


class TooManyCredentials(ValidationFailed):
    code, title = "too_many_credentials", "The presentation holds more credentials than one verification checks"


class PresentationTooLarge(DomainError):
    status, code, title = 413, "presentation_too_large", "The presentation is too large to verify in the request"


class CredentialNotPresentable(ValidationFailed):
    code, title = "credential_not_presentable", "The stored credential cannot be presented"
