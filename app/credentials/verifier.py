"""Verify a verifiable credential: shape, every Data Integrity proof, validity window, status.

`verify_credential` never raises for bad input: every failure is reported as `{code, detail}`
in `errors`, the first one also as `reason`. Pure module (no Flask); DID resolution and the status
check are whatever the caller passes in.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from app.credentials.cryptosuites import require_suite
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.cryptosuites.data_integrity import PROOF_TYPE, parse_datetime
from app.credentials.jsonld.canon import CanonicalizationLimits, check_document_shape
from app.credentials.jsonld.loader import DocumentLoader
from app.dids.errors import DidResolutionFailed
from app.dids.verification_methods import VerificationKey, split_did_url

log = logging.getLogger(__name__)

# What an unexpected failure reads as: its exception text (an encoder's, a library's) is for the log.
UNEXPECTED_FAILURE = "the check failed with an unexpected error (logged)"

CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"
CREDENTIALS_V1 = "https://www.w3.org/2018/credentials/v1"
STATUS_PROBLEMS = frozenset({"revoked", "suspended"})

StatusChecker = Callable[[dict], "str | None"]


@dataclass(frozen=True)
class ProofExpectations:
    """What every proof must carry, from the verify options (Data Integrity 1.0, "verify proof").

    `challenge`, when given, must equal the proof's `challenge`; `domains`, when given, must each be
    among the proof's `domain` (a string or a set of strings). A proof without them fails. A proof
    with a presentation header (a bbs-2023 derived proof) cannot carry a challenge of its own: the
    challenge travels as its header (the challenge's UTF-8 bytes).

    `presentation_header`, when given, is the header such a proof must have
    (`presentation_header_mismatch` otherwise). `header_challenge` is the challenge of a presentation
    around the credential: a proof bound to a header must be bound to that challenge. A proof bound
    to a header that nothing checked verifies with the warning `presentation_header_not_checked`.
    """

    purpose: str = "assertionMethod"
    challenge: str | None = None
    domains: tuple[str, ...] = ()
    presentation_header: bytes | None = None
    header_challenge: str | None = None


class VerificationMethodResolver(Protocol):
    """What `verify_credential` needs from a resolver (`app.dids.resolver.DidResolver` fits)."""

    def resolve_verification_method(
        self, vm_url: str, purpose: str, *, controller: str | None = None
    ) -> VerificationKey:
        """The authorised key of `vm_url` for `purpose`; raises `DidResolutionFailed` (or `ProofCheckFailed`)."""


@dataclass
class VerificationResult:
    """Outcome of a verification, in the W3C VC API shape plus `reason` (the first error code)."""

    verified: bool
    checks: list[str] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """`{verified, checks, warnings, errors}` as the VC API answers it."""
        return {
            "verified": self.verified,
            "checks": list(self.checks),
            "warnings": list(self.warnings),
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class VerificationBudget:
    """What checking one credential may cost, across all its proofs.

    `max_proofs` caps the proofs of a set or chain; `max_values` caps the JSON values all proofs
    together transform (each proof transforms the whole credential, so roughly values x proofs);
    `time_limit` (seconds) bounds the proof checks in all. The first two are checked before any
    proof is (`check_verification_budget`); passing the time is `verification_time_limit`.
    """

    max_proofs: int = 8
    max_values: int = 60_000
    time_limit: float = 10.0


def _count_values(value: Any) -> int:
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def check_verification_budget(vc: Any, budget: VerificationBudget) -> None:
    """Raise `ProofCheckFailed` (`too_many_proofs`, `verification_size_limit`) for a credential
    whose proofs would cost more than `budget` allows; cheap, and a no-op for other shapes."""
    if not isinstance(vc, dict) or not isinstance(vc.get("proof"), dict | list):
        return
    proofs = vc["proof"] if isinstance(vc["proof"], list) else [vc["proof"]]
    if len(proofs) > budget.max_proofs:
        raise ProofCheckFailed(
            "too_many_proofs", f"the credential has {len(proofs)} proofs; at most {budget.max_proofs} are checked"
        )
    if len(proofs) == 1:
        return  # one document, one transformation: the canonicalization limits bound it
    unsecured = _count_values({name: value for name, value in vc.items() if name != "proof"})
    estimate = unsecured * len(proofs) + _count_values(proofs)
    if estimate > budget.max_values:
        raise ProofCheckFailed(
            "verification_size_limit",
            f"checking {len(proofs)} proofs over this credential would transform about {estimate} JSON values; "
            f"the limit is {budget.max_values}",
        )


class Report:
    """The checks, warnings and errors of one verification as they are found."""

    def __init__(self) -> None:
        self.checks: list[str] = []
        self.warnings: list[dict[str, str]] = []
        self.errors: list[dict[str, str]] = []

    def fail(self, code: str, detail: str) -> None:
        self.errors.append({"code": code, "detail": detail})

    def result(self) -> VerificationResult:
        return VerificationResult(
            verified=not self.errors,
            checks=self.checks,
            warnings=self.warnings,
            errors=self.errors,
            reason=self.errors[0]["code"] if self.errors else None,
        )


def verify_credential(
    vc: Any,
    *,
    resolver: VerificationMethodResolver,
    loader: DocumentLoader,
    status_checker: StatusChecker | None = None,
    now: datetime | None = None,
    limits: CanonicalizationLimits | None = None,
    proof_purpose: str = "assertionMethod",
    suite_options: Mapping[str, Any] | None = None,
    issuer_must_control_keys: bool = True,
    budget: VerificationBudget | None = None,
    challenge: str | None = None,
    domains: tuple[str, ...] = (),
    presentation_header: bytes | None = None,
    header_challenge: str | None = None,
) -> VerificationResult:
    """Verify `vc` and report every failure; never raises for bad input.

    `resolver.resolve_verification_method(vm_url, purpose, controller=controller)` supplies keys
    (a `DidResolver`). `status_checker(vc)` returns "revoked", "suspended" or None, and may raise
    `ProofCheckFailed` (reported as is); it runs only when every proof verified.
    Error codes: `malformed_credential`, any `ProofCheckFailed` code of the suites, loader and
    resolver, `invalid_challenge`, `invalid_domain` (`challenge` and `domains`: see
    `ProofExpectations`; `presentation_header` and `header_challenge` too), `presentation_header_mismatch`,
    `proof_expired`, `not_yet_valid`, `expired`, `revoked`, `suspended`, `status_check_failed`,
    `verification_error` (an unexpected failure, never a pass).
    With `issuer_must_control_keys` (the default) at least one proof must be made with a key the
    issuer's DID authorises; the other proofs of a set or chain (a second signer) only need keys
    their own DIDs authorise. Off, every proof's key is checked against its own DID only (raw Data
    Integrity checks, e.g. test vectors whose issuer is not a DID).
    `budget` bounds the cost of all proofs together (default `VerificationBudget()`); a credential
    over it fails with `too_many_proofs`, `verification_size_limit` or `verification_time_limit`.
    """
    report = Report()
    now = now or datetime.now(UTC)
    limits = limits or CanonicalizationLimits()
    try:
        check_document_shape(vc, limits)
        issuer = _check_shape(vc)
    except ProofCheckFailed as failure:
        code = failure.code if failure.code == "canonicalization_limit" else "malformed_credential"
        report.fail(code, failure.detail)
        return report.result()
    budget = budget or VerificationBudget()
    try:
        check_verification_budget(vc, budget)
    except ProofCheckFailed as failure:
        report.fail(failure.code, failure.detail)
        return report.result()
    report.checks.append("shape")

    deadline = time.monotonic() + budget.time_limit
    if limits.deadline is not None:
        deadline = min(deadline, limits.deadline)
    ctx = SuiteContext(loader=loader, limits=replace(limits, deadline=deadline), options=dict(suite_options or {}))
    report.checks.append("proof")
    expected = ProofExpectations(
        purpose=proof_purpose,
        challenge=challenge,
        domains=domains,
        presentation_header=presentation_header,
        header_challenge=header_challenge,
    )
    checked = check_proofs(
        vc,
        report,
        bound_did=issuer,
        bind=issuer_must_control_keys,
        resolver=resolver,
        ctx=ctx,
        expected=expected,
        now=now,
        deadline=deadline,
    )
    if issuer_must_control_keys and not checked.bound:
        report.fail("verification_method_not_authorized", _no_issuer_proof(issuer))
    if presentation_header is not None and not checked.carried:
        report.warnings.append(
            {
                "code": "presentation_header_not_checked",
                "detail": "options.presentationHeader was not checked: no proof of the credential has a "
                "presentation header (only bbs-2023 derived proofs do)",
            }
        )

    report.checks.append("validity_window")
    _check_validity_window(vc, now, report)

    if "credentialStatus" in vc:
        if status_checker is None:
            report.warnings.append({"code": "status_not_checked", "detail": "credentialStatus was not checked"})
        else:
            report.checks.append("status")
            if not report.errors and time.monotonic() > deadline:
                report.fail("verification_time_limit", "the status was not checked in time")
            elif not report.errors:
                _check_status(vc, status_checker, report)
    return report.result()


@dataclass(frozen=True)
class ProofsChecked:
    """What `check_proofs` saw: whether a proof was made with a key of the bound DID, and whether
    a proof carried a presentation header."""

    bound: bool
    carried: bool


def check_proofs(
    document: dict,
    report: Report,
    *,
    bound_did: str | None,
    bind: bool,
    resolver: VerificationMethodResolver,
    ctx: SuiteContext,
    expected: ProofExpectations,
    now: datetime,
    deadline: float,
) -> ProofsChecked:
    """Check every proof of `document` (a credential or a presentation), reporting each failure.

    With `bind`, a proof made with a key of `bound_did` (the issuer, the holder) must be authorised
    by that DID for `expected.purpose`; the other proofs of a set or chain (a notary, a second
    signer) only by their own DID. Without it every key is checked against its own DID only.
    """
    proofs = document["proof"] if isinstance(document["proof"], list) else [document["proof"]]
    by_bound = [bind and bound_did is not None and _proof_did(proof) == bound_did for proof in proofs]
    carried = False
    for index, proof in enumerate(proofs):
        if time.monotonic() > deadline:
            report.fail("verification_time_limit", f"the proofs from proof {index} on were not checked in time")
            break
        try:
            controller = bound_did if by_bound[index] else None
            header, warnings = _verify_one_proof(document, proofs, proof, controller, resolver, ctx, expected, now)
            carried = carried or header is not None
            report.warnings.extend(
                {"code": code, "detail": _prefixed(index, len(proofs), detail)} for code, detail in warnings
            )
        except ProofCheckFailed as failure:
            report.fail(failure.code, _prefixed(index, len(proofs), failure.detail))
        except Exception:  # a bug or an unforeseen input: never verified, and its text only in the log
            log.exception("proof %d of %d could not be checked", index, len(proofs))
            report.fail("verification_error", _prefixed(index, len(proofs), UNEXPECTED_FAILURE))
    return ProofsChecked(bound=any(by_bound), carried=carried)


def _proof_did(proof: Any) -> str | None:
    vm_url = proof.get("verificationMethod") if isinstance(proof, dict) else None
    try:
        return split_did_url(vm_url)[0]
    except DidResolutionFailed:
        return None


def _no_issuer_proof(issuer: str) -> str:
    if not issuer.startswith("did:"):
        return (
            "the issuer is not a DID, so it cannot authorise a proof key "
            "(options.issuerMustControlKeys false checks each key against its own DID only)"
        )
    return f"no proof is made with a key of the issuer {issuer[:200]}"


def _prefixed(index: int, count: int, detail: str) -> str:
    return f"proof {index}: {detail}" if count > 1 else detail


def _check_shape(vc: dict) -> str:
    context = vc.get("@context")
    if not isinstance(context, list) or not context or context[0] not in (CREDENTIALS_V2, CREDENTIALS_V1):
        raise ProofCheckFailed("malformed_credential", f"@context must be an array starting with {CREDENTIALS_V2}")
    types = vc.get("type")
    types = types if isinstance(types, list) else [types]
    if "VerifiableCredential" not in types:
        if "VerifiablePresentation" in types:
            raise ProofCheckFailed(
                "malformed_credential",
                "this is a presentation, not a credential: verify it at POST /presentations/verify",
            )
        raise ProofCheckFailed("malformed_credential", "type must include VerifiableCredential")
    if context[0] == CREDENTIALS_V1 and "issuanceDate" not in vc:
        raise ProofCheckFailed("malformed_credential", '"issuanceDate" property is required (VC Data Model 1.1)')
    issuer = vc.get("issuer")
    issuer_id = issuer.get("id") if isinstance(issuer, dict) else issuer
    if not isinstance(issuer_id, str) or ":" not in issuer_id:
        raise ProofCheckFailed("malformed_credential", "issuer must be a URL or an object with an id")
    if not isinstance(vc.get("credentialSubject"), dict | list) or not vc["credentialSubject"]:
        raise ProofCheckFailed("malformed_credential", "credentialSubject is missing")
    proof = vc.get("proof")
    if proof is None or proof == [] or not isinstance(proof, dict | list):
        raise ProofCheckFailed("malformed_credential", "the credential has no proof")
    return issuer_id


def _verify_one_proof(
    vc: dict,
    all_proofs: list,
    proof: Any,
    controller: str | None,
    resolver: VerificationMethodResolver,
    ctx: SuiteContext,
    expected: ProofExpectations,
    now: datetime,
) -> tuple[bytes | None, list[tuple[str, str]]]:
    """Check one proof; returns its presentation header (None when it has none) and its warnings."""
    if not isinstance(proof, dict):
        raise ProofCheckFailed("malformed_proof", "proof must be an object")
    if proof.get("type") != PROOF_TYPE:
        raise ProofCheckFailed("unsupported_proof_type", f"proof type {str(proof.get('type'))[:80]!r} is not supported")
    suite = require_suite(proof.get("cryptosuite"))
    purpose = proof.get("proofPurpose")
    if purpose != expected.purpose:
        raise ProofCheckFailed("invalid_proof_purpose", f"proofPurpose must be {expected.purpose}")
    header_of = getattr(suite, "presentation_header", None)
    header = header_of(proof) if header_of is not None else None
    _check_challenge_and_domain(proof, expected, header)
    warnings = _check_presentation_header(proof, expected, header)
    vm_url = proof.get("verificationMethod")
    if not isinstance(vm_url, str):
        raise ProofCheckFailed("malformed_proof", "verificationMethod must be a string")
    if "expires" in proof:
        expires = parse_datetime(proof["expires"], require_offset=False)
        if expires is None:
            raise ProofCheckFailed("invalid_proof_configuration", "proof expires is not an XML Schema dateTime")
        if expires < now:
            raise ProofCheckFailed("proof_expired", f"the proof expired at {proof['expires']}")
    try:
        key = resolver.resolve_verification_method(vm_url, purpose, controller=controller)
    except DidResolutionFailed as failure:
        raise ProofCheckFailed(failure.code, failure.detail) from None
    document = {name: value for name, value in vc.items() if name != "proof"}
    if "previousProof" in proof:
        document["proof"] = _previous_proofs(proof["previousProof"], all_proofs)
    suite.verify_proof(document, proof, key, ctx)
    return header, warnings


def _check_challenge_and_domain(proof: dict, expected: ProofExpectations, header: bytes | None) -> None:
    if expected.challenge is not None:
        if "challenge" in proof:
            if proof["challenge"] != expected.challenge:
                raise ProofCheckFailed("invalid_challenge", "the proof's challenge is not the one expected")
        elif header is None:
            raise ProofCheckFailed("invalid_challenge", "a challenge was expected, and the proof has none")
        elif header != expected.challenge.encode("utf-8"):
            raise ProofCheckFailed(
                "invalid_challenge", "the derived proof's presentation header is not the challenge expected"
            )
    if expected.domains:
        if "domain" not in proof:
            raise ProofCheckFailed("invalid_domain", "a domain was expected, and the proof has none")
        found = proof["domain"] if isinstance(proof["domain"], list) else [proof["domain"]]
        missing = [domain for domain in expected.domains if domain not in found]
        if missing:
            raise ProofCheckFailed("invalid_domain", f"the proof is not made for the domain {missing[0][:200]!r}")


def _check_presentation_header(proof: dict, expected: ProofExpectations, header: bytes | None) -> list[tuple[str, str]]:
    if header is None:
        return []
    if expected.presentation_header is not None:
        if header != expected.presentation_header:
            raise ProofCheckFailed(
                "presentation_header_mismatch", "the derived proof was made for another presentation header"
            )
        return []
    if expected.challenge is not None and "challenge" not in proof:
        return []  # the challenge was checked as the header
    if header and expected.header_challenge is not None:
        if header != expected.header_challenge.encode("utf-8"):
            raise ProofCheckFailed(
                "presentation_header_mismatch",
                "the derived proof is bound to a presentation header that is not the presentation's challenge",
            )
        return []
    if header:
        return [
            (
                "presentation_header_not_checked",
                "the derived proof is bound to a presentation header, and none was expected "
                "(options.presentationHeader): a disclosure replayed from another presentation would verify",
            )
        ]
    return []


def _previous_proofs(previous: Any, all_proofs: list) -> list[dict]:
    wanted = previous if isinstance(previous, list) else [previous]
    if not wanted or not all(isinstance(proof_id, str) for proof_id in wanted):
        raise ProofCheckFailed("malformed_proof", "previousProof must be a proof id or a list of them")
    by_id = {proof.get("id"): proof for proof in all_proofs if isinstance(proof, dict)}
    missing = [proof_id for proof_id in wanted if proof_id not in by_id]
    if missing:
        raise ProofCheckFailed("previous_proof_missing", f"previous proof {missing[0]!r} is not in the proof set")
    return [copy.deepcopy(by_id[proof_id]) for proof_id in wanted]


def _check_validity_window(vc: dict, now: datetime, report: Report) -> None:
    v2 = vc["@context"][0] == CREDENTIALS_V2
    start_name, end_name = ("validFrom", "validUntil") if v2 else ("issuanceDate", "expirationDate")
    bounds: dict[str, datetime | None] = {}
    for name in (start_name, end_name):
        value = vc.get(name)
        if value is None or value == "":
            bounds[name] = None
            continue
        parsed = parse_datetime(value, require_offset=False)
        if parsed is None:
            report.fail("malformed_credential", f"{name} is not an ISO 8601 date-time")
            return
        bounds[name] = parsed
    start, end = bounds[start_name], bounds[end_name]
    if start is not None and now < start:
        report.fail("not_yet_valid", f"the credential is valid from {vc[start_name]}")
    if end is not None and now > end:
        report.fail("expired", f"the credential expired at {vc[end_name]}")


def _check_status(vc: dict, status_checker: StatusChecker, report: Report) -> None:
    try:
        status = status_checker(vc)
    except ProofCheckFailed as failure:
        report.fail(failure.code, failure.detail)
        return
    except Exception:
        log.exception("the status could not be checked")
        report.fail("status_check_failed", UNEXPECTED_FAILURE)
        return
    if status in STATUS_PROBLEMS:
        report.fail(status, f"the credential is {status}")
    elif status is not None:
        report.fail("status_check_failed", f"unexpected status {str(status)[:40]!r}")
