"""Request and response shapes of the credentials API, and the shape rules of a stored vc."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

import marshmallow as ma
import rfc8785
from marshmallow import ValidationError, validates_schema

from app.credentials.cryptosuites.data_integrity import parse_datetime
from app.credentials.models import ACTIVE, REVOCATION, REVOKED, SUSPENDED, SUSPENSION
from app.fields import JsonBoolean

CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"
REQUIRED_PROOF_MEMBERS = ("type", "cryptosuite", "proofPurpose", "verificationMethod", "proofValue")


def utc_datetime(value: Any) -> datetime | None:
    """The UTC moment of an ISO 8601 date-time (UTC when it has no offset), or None.

    None too when the moment falls outside years 1 to 9999 in UTC, which neither Python nor the
    database drivers can read back.
    """
    moment = parse_datetime(value, require_offset=False)
    if moment is None:
        return None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None


def _is_did(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > 2048:
        return False
    parts = value.split(":", 2)
    return len(parts) == 3 and parts[0] == "did" and bool(parts[1]) and bool(parts[2])


def vc_shape_errors(vc: Any) -> dict[str, list[str]]:
    """Every shape problem of a vc to store, as `{"vc.<member>": [message]}` (empty when fine).

    The rules of design section 8: `@context` starts with the credentials v2 context, `type`
    holds VerifiableCredential and a kind, `issuer` is a DID, `validFrom`/`validUntil` are ISO
    8601 (`validUntil` may be ""), `credentialSubject.id` is a DID, every proof names its
    type, cryptosuite, purpose, verification method and value, and the whole vc has an RFC 8785
    canonical form (its `cid` is computed over it).
    """
    if not isinstance(vc, dict):
        return {"vc": ["Must be a JSON object."]}
    errors: dict[str, list[str]] = {}

    def problem(member: str, message: str) -> None:
        errors.setdefault(f"vc.{member}", []).append(message)

    unstorable = unstorable_text_member(vc)
    if unstorable is not None:
        problem(unstorable, "Must not contain U+0000 or unpaired surrogates.")

    context = vc.get("@context")
    if not isinstance(context, list) or not context or context[0] != CREDENTIALS_V2:
        problem("@context", f"Must be an array starting with {CREDENTIALS_V2}.")
    elif not all(isinstance(entry, str | dict) for entry in context):
        problem("@context", "Entries must be URLs or context objects.")
    if "id" in vc and (not isinstance(vc["id"], str) or ":" not in vc["id"]):
        problem("id", "Must be a URL or URN.")
    types = vc.get("type")
    if not isinstance(types, list) or not all(isinstance(entry, str) for entry in types):
        problem("type", "Must be an array of strings.")
    elif "VerifiableCredential" not in types or len(set(types)) < 2:
        problem("type", "Must contain VerifiableCredential and the credential's kind.")
    issuer = vc.get("issuer")
    issuer_id = issuer.get("id") if isinstance(issuer, dict) else issuer
    if not _is_did(issuer_id):
        problem("issuer", "Must be a DID (or an object whose id is a DID).")
    if "validFrom" in vc and utc_datetime(vc["validFrom"]) is None:
        problem("validFrom", "Must be an ISO 8601 date-time (years 1 to 9999 in UTC).")
    if "validUntil" in vc and vc["validUntil"] != "" and utc_datetime(vc["validUntil"]) is None:
        problem("validUntil", "Must be an ISO 8601 date-time (years 1 to 9999 in UTC) or an empty string.")
    subject = vc.get("credentialSubject")
    if not isinstance(subject, dict):
        problem("credentialSubject", "Must be an object.")
    elif not _is_did(subject.get("id")):
        problem("credentialSubject.id", "Must be the DID of a user.")
    _proof_errors(vc.get("proof"), problem)
    uncanonical = _uncanonical_member(vc)
    if uncanonical is not None:
        errors.setdefault(f"vc.{uncanonical}" if uncanonical else "vc", []).append(_NO_CANONICAL_FORM)
    return errors


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_NO_CANONICAL_FORM = (
    "Has no RFC 8785 canonical form (the cid needs one): numbers must be finite and integers "
    "within -(2**53 - 1) and 2**53 - 1."
)
_JCS_SAFE_INTEGER = 2**53 - 1


def _uncanonical_member(document: dict) -> str | None:
    """Dotted path of a member that keeps `document` from an RFC 8785 form, or None when it has one.

    "" (the whole document) when the canonicaliser refuses it for another reason (nesting too deep).
    """
    try:
        rfc8785.dumps(document)
        return None
    except (rfc8785.CanonicalizationError, RecursionError):
        pass
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _JCS_SAFE_INTEGER:
            return path
        if isinstance(value, dict):
            pending.extend((f"{path}.{name}" if path else str(name), member) for name, member in value.items())
        elif isinstance(value, list):
            pending.extend((f"{path}.{index}", item) for index, item in enumerate(value))
    return ""


def unstorable_text_member(document: dict) -> str | None:
    """Dotted path of the first member whose name or string value holds NUL or a lone surrogate.

    Such text can be neither stored nor looked up in PostgreSQL, and no signature suite signs it
    reliably. Walks iteratively, so nesting depth is bounded only by the JSON parser.
    """
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if _UNSTORABLE.search(value):
                return path or "vc"
        elif isinstance(value, dict):
            for name, member in value.items():
                member_path = f"{path}.{name}" if path else str(name)
                if _UNSTORABLE.search(name):
                    return path or "vc"
                pending.append((member_path, member))
        elif isinstance(value, list):
            pending.extend((f"{path}.{index}", item) for index, item in enumerate(value))
    return None


def _proof_errors(proof: Any, problem) -> None:
    if isinstance(proof, list) and proof:
        proofs = list(enumerate(proof))
    elif isinstance(proof, dict):
        proofs = [(None, proof)]
    else:
        problem("proof", "Must be an object (or a non-empty array of them).")
        return
    for index, item in proofs:
        prefix = "proof" if index is None else f"proof.{index}"
        if not isinstance(item, dict):
            problem(prefix, "Must be an object.")
            continue
        for member in REQUIRED_PROOF_MEMBERS:
            if not isinstance(item.get(member), str) or not item[member]:
                problem(f"{prefix}.{member}", "Required: a non-empty string.")


class StoreCredentialIn(ma.Schema):
    """`{vc}`: a signed verifiable credential (spec 2.3); stored exactly as sent."""

    vc = ma.fields.Dict(required=True, metadata={"description": "The verifiable credential, with its proof."})

    class Meta:
        unknown = ma.RAISE

    @validates_schema
    def _check_vc(self, data: dict, **_kwargs: Any) -> None:
        errors = vc_shape_errors(data.get("vc"))
        if errors:
            raise ValidationError(errors)


class VerificationOut(ma.Schema):
    state = ma.fields.String(metadata={"enum": ["pending", "verified", "failed"]})
    reason = ma.fields.String(allow_none=True, metadata={"description": "Code of the first failure."})
    errors = ma.fields.List(ma.fields.Dict(), metadata={"description": "Every failure as {code, detail}."})
    checked_at = ma.fields.String(allow_none=True)


class StoredCredentialOut(ma.Schema):
    cid = ma.fields.String(metadata={"description": "CIDv1 (base32, sha2-256) of the RFC 8785 form of vc."})
    vc = ma.fields.Dict(metadata={"description": "The credential byte for byte as stored."})


class StoredCredentialEnvelope(ma.Schema):
    data = ma.fields.Nested(StoredCredentialOut)


class CredentialRecordOut(StoredCredentialOut):
    verification = ma.fields.Nested(VerificationOut)
    created_at = ma.fields.String()


class CredentialRecordEnvelope(ma.Schema):
    data = ma.fields.Nested(CredentialRecordOut)


class CredentialListEnvelope(ma.Schema):
    data = ma.fields.List(ma.fields.Dict(), metadata={"description": "Verified credentials, newest first."})


VERIFY_CHECKS = ("shape", "proof", "validity_window", "status")


class Domains(ma.fields.Field):
    """One domain or a non-empty list of them, loaded as a tuple of strings."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple[str, ...]:
        domains = [value] if isinstance(value, str) else value
        if not isinstance(domains, list) or not domains or not all(isinstance(item, str) for item in domains):
            raise ValidationError("Must be a string or a non-empty array of strings.")
        return tuple(domains)


_CHALLENGE_DOC = "Every proof must carry exactly this challenge (else invalid_challenge)."
_DOMAIN_DOC = {
    "description": "A domain or array of domains every proof must be made for (else invalid_domain).",
    "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}],
}
_HEADER_DOC = (
    "The presentation header (as UTF-8 bytes) a bbs-2023 derived proof must carry (else "
    "presentation_header_mismatch). Without it a challenge is checked as the header of such a proof, and a "
    "header nothing checked is the warning presentation_header_not_checked."
)
_ISSUER_BINDING_DOC = "false: check each proof key against its own DID only (warning issuer_not_bound)."


class VerifyOptionsIn(ma.Schema):
    """The options of a verify request the verifier honours; any other is refused (422), never ignored."""

    expectedProofPurpose = ma.fields.String(
        metadata={"description": "The proofPurpose every proof must have (default assertionMethod)."}
    )
    issuerMustControlKeys = JsonBoolean(metadata={"description": _ISSUER_BINDING_DOC})
    challenge = ma.fields.String(metadata={"description": _CHALLENGE_DOC})
    domain = Domains(metadata=_DOMAIN_DOC)
    presentationHeader = ma.fields.String(validate=ma.validate.Length(max=1024), metadata={"description": _HEADER_DOC})
    checks = ma.fields.List(
        ma.fields.String(validate=ma.validate.OneOf(VERIFY_CHECKS)),
        metadata={
            "description": "Checks the caller requires, named as in the answer's `checks`; the verifier makes every "
            "check that applies whatever is listed, so a listed one is never skipped."
        },
    )

    class Meta:
        unknown = ma.RAISE


class CredentialVerifyIn(ma.Schema):
    """The W3C VC API verify request; a member it does not define is refused (422), never ignored."""

    verifiableCredential = ma.fields.Raw(required=True)
    options = ma.fields.Nested(VerifyOptionsIn, load_default=dict)

    class Meta:
        unknown = ma.RAISE


class CredentialVerifyOut(ma.Schema):
    verified = ma.fields.Boolean()
    checks = ma.fields.List(ma.fields.String())
    warnings = ma.fields.List(ma.fields.Dict())
    errors = ma.fields.List(ma.fields.Dict())


PRESENTATION_CHECKS = ("shape", "proof", "holder", "holder_is_subject", "credentials")


class PresentationVerifyOptionsIn(ma.Schema):
    """The options of a presentation verify request; any other is refused (422), never ignored."""

    challenge = ma.fields.String(metadata={"description": "Every proof of the presentation must carry it."})
    domain = Domains(
        metadata={**_DOMAIN_DOC, "description": "A domain or array of domains the presentation's proofs are made for."}
    )
    presentationHeader = ma.fields.String(validate=ma.validate.Length(max=1024), metadata={"description": _HEADER_DOC})
    holderMustBeSubject = JsonBoolean(
        metadata={
            "description": "true: the proven holder must be the subject of every credential whose subject is a DID "
            "(else holder_not_subject)."
        }
    )
    issuerMustControlKeys = JsonBoolean(metadata={"description": "For the credentials: " + _ISSUER_BINDING_DOC})
    returnPresentation = JsonBoolean(metadata={"description": "true: the answer repeats the presentation verified."})
    checks = ma.fields.List(
        ma.fields.String(validate=ma.validate.OneOf(PRESENTATION_CHECKS + VERIFY_CHECKS)),
        metadata={
            "description": "Checks the caller requires; every check that applies is made whatever is listed, and "
            "`proof` or `holder` listed for a presentation without a proof fails (presentation_not_signed)."
        },
    )

    class Meta:
        unknown = ma.RAISE


class PresentationVerifyIn(ma.Schema):
    """The W3C VC API presentation verify request: `verifiablePresentation`, or `presentation` for one
    without a proof; a member it does not define is refused (422), never ignored."""

    verifiablePresentation = ma.fields.Raw(metadata={"description": "The presentation, with its proof."})
    presentation = ma.fields.Raw(metadata={"description": "A presentation without a proof (its credentials only)."})
    options = ma.fields.Nested(PresentationVerifyOptionsIn, load_default=dict)

    class Meta:
        unknown = ma.RAISE

    @validates_schema
    def _one_presentation(self, data: dict, **_kwargs: Any) -> None:
        given = [name for name in ("verifiablePresentation", "presentation") if name in data]
        if len(given) != 1:
            message = "Send one of verifiablePresentation and presentation."
            raise ValidationError({name: [message] for name in given or ["verifiablePresentation"]})


class CredentialResultOut(CredentialVerifyOut):
    credentialId = ma.fields.String(metadata={"description": "The credential's id, when it has one."})


class PresentationVerifyOut(CredentialVerifyOut):
    presentationResult = ma.fields.Nested(
        CredentialVerifyOut, metadata={"description": "The presentation's own checks: shape, proof, holder."}
    )
    credentialResults = ma.fields.List(
        ma.fields.Nested(CredentialResultOut), metadata={"description": "One per credential, in order."}
    )
    verifiablePresentation = ma.fields.Dict(metadata={"description": "With options.returnPresentation: true."})


class StatusEntryIn(ma.Schema):
    statusPurpose = ma.fields.String(required=True, validate=ma.validate.OneOf([REVOCATION, SUSPENSION]))


class StatusEntryPatch(ma.Schema):
    status = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf([ACTIVE, REVOKED, SUSPENDED]),
        metadata={"description": "revoked (revocation entries, final) or suspended/active (suspension entries)."},
    )


class StatusEntryOut(ma.Schema):
    id = ma.fields.String()
    status = ma.fields.String()
    credentialStatus = ma.fields.Dict(
        metadata={"description": "The BitstringStatusListEntry to put in the credential before signing."}
    )
    created_at = ma.fields.String()
    updated_at = ma.fields.String()


class StatusEntryEnvelope(ma.Schema):
    data = ma.fields.Nested(StatusEntryOut)
