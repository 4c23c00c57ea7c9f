"""Verify a verifiable presentation: its shape, its proofs, its holder and every credential it holds.

`verify_presentation` never raises for bad input: every failure is reported as `{code, detail}`.
The presentation's proofs are checked as Data Integrity proofs for the purpose `authentication`
with the verifier's challenge and domain; a proof made with a key of the `holder` DID must be
authorised by it (holder binding). The credentials are verified by whatever the caller passes in
(the engine verifies them as the credential route does: status, validity, issuer control). Pure
module (no Flask).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.jsonld.canon import CanonicalizationLimits, check_document_shape
from app.credentials.jsonld.loader import DocumentLoader
from app.credentials.verifier import (
    CREDENTIALS_V1,
    CREDENTIALS_V2,
    ProofExpectations,
    Report,
    VerificationBudget,
    VerificationMethodResolver,
    VerificationResult,
    check_proofs,
)

PRESENTATION_PURPOSE = "authentication"


class EmbeddedVerifier(Protocol):
    """How the credentials of a presentation are verified (`CredentialEngine.verify` fits)."""

    def __call__(
        self, vc: Any, *, presentation_header: bytes | None, header_challenge: str | None, time_limit: float
    ) -> VerificationResult:
        """The credential's result; never raises for bad input."""


@dataclass(frozen=True)
class HolderExpectations:
    """What the verifier asks of a presentation besides its credentials.

    `challenge` and `domains` must be carried by every proof of the presentation (and a bbs-2023
    disclosure in it bound to a presentation header must be bound to the challenge);
    `presentation_header` is the header every bbs-2023 disclosure in it must have;
    `holder_must_be_subject`: the proven holder must be the subject of every credential whose subject
    is a DID. `checks` lists checks the verifier requires (`proof` needs a signed presentation).
    """

    challenge: str | None = None
    domains: tuple[str, ...] = ()
    presentation_header: bytes | None = None
    holder_must_be_subject: bool = False
    checks: tuple[str, ...] = ()

    def need_a_proof(self) -> list[str]:
        """What the verifier asked for that only a signed presentation can show."""
        wanted = []
        if self.challenge is not None:
            wanted.append("a challenge")
        if self.domains:
            wanted.append("a domain")
        if self.holder_must_be_subject:
            wanted.append("the holder as subject")
        if "proof" in self.checks or "holder" in self.checks:
            wanted.append("the proof")
        return wanted


@dataclass
class PresentationResult:
    """A presentation's own result and each of its credentials' (with the credential's `id`)."""

    presentation: VerificationResult
    credentials: list[tuple[Any, VerificationResult]] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.presentation.verified and all(result.verified for _id, result in self.credentials)

    @property
    def reason(self) -> str | None:
        """The code of the first failure, the presentation's own first."""
        errors = self.as_dict()["errors"]
        return errors[0]["code"] if errors else None

    def as_dict(self) -> dict[str, Any]:
        """The VC API's verification result: `{verified, checks, warnings, errors}` of the whole, then
        `presentationResult` and `credentialResults` (one per credential, in order, with `credentialId`).

        The whole's warnings and errors are the presentation's and every credential's, the latter's
        details prefixed with `verifiableCredential <index>: `.
        """
        checks = list(self.presentation.checks)
        warnings = list(self.presentation.warnings)
        errors = list(self.presentation.errors)
        results = []
        for index, (credential_id, result) in enumerate(self.credentials):
            prefix = f"verifiableCredential {index}: "
            warnings.extend({**item, "detail": prefix + item["detail"]} for item in result.warnings)
            errors.extend({**item, "detail": prefix + item["detail"]} for item in result.errors)
            entry = result.as_dict()
            if isinstance(credential_id, str):
                entry["credentialId"] = credential_id
            results.append(entry)
        if self.credentials:
            checks.append("credentials")
        return {
            "verified": self.verified,
            "checks": checks,
            "warnings": warnings,
            "errors": errors,
            "presentationResult": self.presentation.as_dict(),
            "credentialResults": results,
        }


def presentation_credentials(vp: Any) -> list[Any]:
    """The entries of a presentation's `verifiableCredential` (an object or an array), as a list."""
    if not isinstance(vp, dict) or "verifiableCredential" not in vp:
        return []
    credentials = vp["verifiableCredential"]
    return credentials if isinstance(credentials, list) else [credentials]


def verify_presentation(
    vp: Any,
    *,
    resolver: VerificationMethodResolver,
    loader: DocumentLoader,
    verify_embedded: EmbeddedVerifier,
    expectations: HolderExpectations,
    limits: CanonicalizationLimits | None = None,
    budget: VerificationBudget | None = None,
    now: datetime | None = None,
    max_credentials: int = 32,
) -> PresentationResult:
    """Verify `vp` and report every failure; never raises for bad input.

    Presentation error codes: `malformed_presentation`, `too_many_credentials`, the proof codes of
    `verify_credential` (`invalid_challenge`, `invalid_domain`, `invalid_signature`, ...),
    `holder_mismatch` (no proof is made with a key the named holder authorises),
    `presentation_not_signed` (a challenge, domain, holder check or proof asked of a presentation
    without a proof), `holder_not_subject`; warnings `presentation_not_signed` (its credentials only
    were verified), `holder_not_named`, `holder_not_checked`. `budget.time_limit` bounds the whole
    presentation, its credentials included.
    """
    report = Report()
    now = now or datetime.now(UTC)
    limits = limits or CanonicalizationLimits()
    budget = budget or VerificationBudget()
    deadline = time.monotonic() + budget.time_limit
    try:
        check_document_shape(vp, limits)
        holder = _check_shape(vp, max_credentials)
    except ProofCheckFailed as failure:
        code = failure.code if failure.code in ("canonicalization_limit", "too_many_credentials") else None
        report.fail(code or "malformed_presentation", failure.detail)
        return PresentationResult(report.result())
    report.checks.append("shape")

    proven_holder = None
    if "proof" in vp:
        report.checks.extend(["proof", "holder"])
        ctx = SuiteContext(loader=loader, limits=replace(limits, deadline=deadline))
        expected = ProofExpectations(
            purpose=PRESENTATION_PURPOSE, challenge=expectations.challenge, domains=expectations.domains
        )
        holder_did = holder if holder is not None and holder.startswith("did:") else None
        checked = check_proofs(
            vp,
            report,
            bound_did=holder_did,
            bind=True,
            resolver=resolver,
            ctx=ctx,
            expected=expected,
            now=now,
            deadline=deadline,
        )
        if holder is None:
            report.warnings.append(
                {
                    "code": "holder_not_named",
                    "detail": "the presentation names no holder: its proofs show keys, not who presented it",
                }
            )
        elif holder_did is None:
            report.fail("holder_mismatch", "the holder is not a DID, so it cannot authorise the presentation's key")
        elif not checked.bound:
            report.fail("holder_mismatch", f"no proof of the presentation is made with a key of the holder {holder}")
        elif not report.errors:
            proven_holder = holder
    else:
        wanted = expectations.need_a_proof()
        if wanted:
            report.fail(
                "presentation_not_signed",
                f"the presentation has no proof, so it cannot show {', '.join(wanted)} as asked",
            )
        else:
            report.warnings.append(
                {
                    "code": "presentation_not_signed",
                    "detail": "the presentation has no proof: only its credentials were verified, and nothing "
                    "shows who presented them",
                }
            )

    credentials = presentation_credentials(vp)
    results = []
    for credential in credentials:
        result = verify_embedded(
            credential,
            presentation_header=expectations.presentation_header,
            header_challenge=expectations.challenge,
            time_limit=max(0.0, deadline - time.monotonic()),
        )
        results.append((credential.get("id") if isinstance(credential, dict) else None, result))
    if expectations.holder_must_be_subject:
        _check_holder_is_subject(credentials, proven_holder, holder, report)
    return PresentationResult(report.result(), results)


def _check_shape(vp: dict, max_credentials: int) -> str | None:
    """Raise `ProofCheckFailed` for a malformed presentation; returns its holder's id (or None)."""
    context = vp.get("@context")
    if not isinstance(context, list) or not context or context[0] not in (CREDENTIALS_V2, CREDENTIALS_V1):
        raise ProofCheckFailed("malformed_presentation", f"@context must be an array starting with {CREDENTIALS_V2}")
    types = vp.get("type")
    types = types if isinstance(types, list) else [types]
    if "VerifiablePresentation" not in types:
        if "VerifiableCredential" in types:
            raise ProofCheckFailed(
                "malformed_presentation",
                "this is a credential, not a presentation: verify it at POST /credentials/verify",
            )
        raise ProofCheckFailed("malformed_presentation", "type must include VerifiablePresentation")
    holder = vp.get("holder")
    holder_id = holder.get("id") if isinstance(holder, dict) else holder
    if holder is not None and (not isinstance(holder_id, str) or ":" not in holder_id):
        raise ProofCheckFailed("malformed_presentation", "holder must be a URL or an object with an id")
    credentials = vp.get("verifiableCredential", [])
    credentials = credentials if isinstance(credentials, list) else [credentials]
    if len(credentials) > max_credentials:
        raise ProofCheckFailed(
            "too_many_credentials",
            f"the presentation holds {len(credentials)} credentials; at most {max_credentials} are verified",
        )
    for index, credential in enumerate(credentials):
        if not isinstance(credential, dict):
            raise ProofCheckFailed("malformed_presentation", f"verifiableCredential {index} must be an object")
    proof = vp.get("proof")
    if "proof" in vp and (proof == [] or not isinstance(proof, dict | list)):
        raise ProofCheckFailed("malformed_presentation", "proof must be an object or a non-empty array of them")
    return holder_id


def _check_holder_is_subject(credentials: list, proven_holder: str | None, holder: str | None, report: Report) -> None:
    report.checks.append("holder_is_subject")
    if proven_holder is None:
        reason = "names no holder" if holder is None else "does not prove its holder"
        detail = f"the presentation {reason}, so the holder cannot be shown to be its credentials' subject"
        report.fail("holder_not_subject", detail)
        return
    for index, credential in enumerate(credentials):
        subjects = credential.get("credentialSubject")
        subjects = subjects if isinstance(subjects, list) else [subjects]
        dids = [
            subject["id"]
            for subject in subjects
            if isinstance(subject, dict) and isinstance(subject.get("id"), str) and subject["id"].startswith("did:")
        ]
        if not dids:
            report.warnings.append(
                {
                    "code": "holder_not_checked",
                    "detail": f"verifiableCredential {index}: its subject is not a DID, so it was not checked "
                    "against the holder",
                }
            )
        elif proven_holder not in dids:
            report.fail(
                "holder_not_subject", f"verifiableCredential {index}: the holder {proven_holder} is not its subject"
            )
