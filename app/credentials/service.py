"""Use cases of verifiable credentials: store, read, verify (job and on demand), list for a user.

A stored credential is kept as the exact JSON text the client sent and answered with that text,
so the signed document is never re-serialised. Functions flush, never commit.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import partial
from typing import Any

import rfc8785
from flask import current_app
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from app.credentials import status_lists
from app.credentials.cryptosuites.base import ProofCheckFailed
from app.credentials.engine import current_engine
from app.credentials.errors import (
    CredentialNotFound,
    CredentialNotPresentable,
    PresentationTooLarge,
    SubjectUnknown,
    TooManyCredentials,
    TooManyProofs,
    VerificationTooLarge,
)
from app.credentials.models import FAILED, PENDING, VERIFIED, CredentialStatusLink, StoredCredential
from app.credentials.presentations import HolderExpectations, PresentationResult, presentation_credentials
from app.credentials.schemas import unstorable_text_member, utc_datetime, vc_shape_errors
from app.credentials.settings import CredentialSettings
from app.credentials.verifier import VerificationResult, check_verification_budget
from app.db import commit_before_the_edge, isoformat, utcnow
from app.errors import ValidationFailed
from app.extensions import db
from app.jobs.models import Job
from app.jobs.service import CallOutside, enqueue_job, register_failure_handler
from app.multiformats import cid_for
from app.settings import current
from app.tenancy.caller import Caller
from app.tenancy.service import subtree_client_ids
from app.users.service import find_user_by_did

VERIFY_JOB = "credentials.verify"
VERIFY_PRESENTATION_JOB = "credentials.verify_presentation"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# The multibase base32 (lower case, no padding) form every stored `cid` has.
_CID = re.compile(r"^b[a-z2-7]{1,79}$")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class _DuplicateMember(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    members: dict = {}
    for name, value in pairs:
        if name in members:
            raise _DuplicateMember(f"member {name[:60]!r} appears twice")
        members[name] = value
    return members


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant)


def read_member_text(body: bytes, member: str) -> tuple[Any, str]:
    """(parsed value, exact JSON text) of a top-level member of a JSON object body.

    Duplicate member names (anywhere) and NaN/Infinity are refused: a signature must cover one
    unambiguous document. Raises `ValidationFailed` (422) naming the member.
    """
    try:
        text = body.decode("utf-8")
        position = _WHITESPACE.match(text, 0).end()
        if text[position : position + 1] != "{":
            raise ValueError("the body must be a JSON object")
        position = _WHITESPACE.match(text, position + 1).end()
        found: dict[str, tuple[Any, str]] = {}
        while text[position : position + 1] != "}":
            name, position = _DECODER.raw_decode(text, position)
            if not isinstance(name, str) or name in found:
                raise _DuplicateMember("duplicate or invalid member name")
            position = _WHITESPACE.match(text, position).end()
            if text[position : position + 1] != ":":
                raise ValueError("expected ':'")
            start = _WHITESPACE.match(text, position + 1).end()
            value, end = _DECODER.raw_decode(text, start)
            found[name] = (value, text[start:end])
            position = _WHITESPACE.match(text, end).end()
            if text[position : position + 1] == ",":
                position = _WHITESPACE.match(text, position + 1).end()
            elif text[position : position + 1] != "}":
                raise ValueError("expected ',' or '}'")
    except (UnicodeDecodeError, ValueError) as error:
        raise ValidationFailed(errors={member: [f"Not acceptable JSON: {error}"]}) from None
    if member not in found:
        raise ValidationFailed(errors={member: ["Missing data for required field."]})
    return found[member]


def content_id(vc: dict) -> str:
    """CIDv1 (base32, json codec, sha2-256) of the RFC 8785 canonical JSON of `vc`.

    `vc` must have passed `vc_shape_errors`, which refuses documents without that form.
    """
    return cid_for(rfc8785.dumps(vc))


def store_credential(caller: Caller, vc: dict, vc_text: str) -> tuple[StoredCredential, bool]:
    """Store a signed vc for a user of the caller's subtree and start its verification.

    `vc_text` is the exact JSON text of `vc` as received. Returns (record, created): storing the
    same vc again in the same client returns the first record. Raises `ValidationFailed` (the
    shape rules of `vc_shape_errors`) or `SubjectUnknown` (422) and stores nothing then.
    """
    errors = vc_shape_errors(vc)
    if errors:
        raise ValidationFailed(errors=errors)
    require_affordable(vc)
    cid = content_id(vc)
    user = _require_subject(caller, vc["credentialSubject"]["id"])
    existing = _find_record(caller.acting_client_id, cid)
    if existing is not None:
        return existing, False
    hosted = status_lists.hosted_entries_of(vc)
    statuses = vc.get("credentialStatus")
    status_count = len(statuses) if isinstance(statuses, list) else int(statuses is not None)
    record = StoredCredential(
        cid=cid,
        client_id=caller.acting_client_id,
        user_id=user.id,
        subject_did=user.did,
        vc_json=vc_text,
        valid_until=utc_datetime(vc["validUntil"]) if vc.get("validUntil") else None,
        foreign_status=status_count > len(hosted),
        verification_state=PENDING,
        created_at=utcnow(),
    )
    try:
        with db.session.begin_nested():
            db.session.add(record)
    except IntegrityError:  # the same vc stored concurrently by the same client
        return _find_record(caller.acting_client_id, cid), False
    for entry in hosted:
        db.session.add(CredentialStatusLink(credential_id=record.id, entry_id=entry.id))
    record.job_id = _start_verification(record).id
    return record, True


def require_affordable(vc: Any, member: str = "vc") -> None:
    """Refuse, before any proof is checked, a credential over the verification budget.

    Raises `TooManyProofs` or `VerificationTooLarge` (422, the code names the limit, `errors` the
    proof of `member`); a no-op for anything else, which verification reports itself.
    """
    try:
        check_verification_budget(vc, current_engine().budget)
    except ProofCheckFailed as failure:
        error = TooManyProofs if failure.code == "too_many_proofs" else VerificationTooLarge
        raise error(failure.detail, errors={f"{member}.proof": [failure.detail]}) from None


def _require_subject(caller: Caller, did: str):
    user = find_user_by_did(did)
    if user is None or user.client_id not in subtree_client_ids(caller.acting_path):
        raise SubjectUnknown(
            "credentialSubject.id is not the DID of a user of this client.",
            errors={"vc.credentialSubject.id": ["Not the DID of a user of this client."]},
        )
    return user


def _find_record(client_id: int, cid: str) -> StoredCredential | None:
    statement = select(StoredCredential).where(StoredCredential.client_id == client_id, StoredCredential.cid == cid)
    return db.session.execute(statement).scalar_one_or_none()


def _start_verification(record: StoredCredential) -> Job:
    return enqueue_job(VERIFY_JOB, {"credential_id": record.id, "cid": record.cid}, client_id=record.client_id)


def require_credential(caller: Caller, cid: str) -> StoredCredential:
    """The record of `cid` stored by a client of the caller's subtree; `CredentialNotFound` otherwise.

    The caller's own client's record is preferred when several of its sub-clients stored it.
    """
    client_ids = subtree_client_ids(caller.acting_path)
    statement = (
        select(StoredCredential)
        .where(StoredCredential.cid == cid, StoredCredential.client_id.in_(client_ids))
        .order_by(StoredCredential.client_id != caller.acting_client_id, StoredCredential.id)
        .limit(1)
    )
    record = db.session.execute(statement).scalar_one_or_none() if _CID.match(cid) else None
    if record is None:
        raise CredentialNotFound("No such credential.")
    return record


def verification_view(record: StoredCredential) -> dict[str, Any]:
    return {
        "state": record.verification_state,
        "reason": record.verification_reason,
        "errors": record.verification_errors or [],
        "checked_at": isoformat(record.checked_at),
    }


def stored_credential_json(record: StoredCredential, *, with_record: bool = False) -> str:
    """`{"data": {cid, vc, ...}}` as JSON text with `vc` spliced in byte for byte.

    With `with_record`, `verification` and `created_at` follow `vc`.
    """
    text = '{"data":{"cid":' + json.dumps(record.cid) + ',"vc":' + record.vc_json
    if with_record:
        text += ',"verification":' + json.dumps(verification_view(record))
        text += ',"created_at":' + json.dumps(isoformat(record.created_at))
    return text + "}}"


def verify_stored_credential_from_job(job: Job) -> CallOutside:
    """Verify a stored credential and record the outcome (task body; the job owns the transactions).

    The verification calls other hosts (did:web, status lists), so it runs with no transaction
    open (`CallOutside`); its outcome is recorded with the record locked, so concurrent checks of
    one credential (a store and a later revocation) record their outcomes in order.
    """
    credential_id = job.payload.get("credential_id")
    vc_json = db.session.scalar(select(StoredCredential.vc_json).where(StoredCredential.id == credential_id))
    if vc_json is None:
        raise CredentialNotFound("The stored credential no longer exists.")
    # Well inside the lease, so the job ends (verified or failed) before anyone may run it again.
    time_limit = float(current_app.config["JOB_LEASE_SECONDS"]) / 2
    verify = partial(
        current_engine().verify, json.loads(vc_json), local_bit=status_lists.local_status_bit, time_limit=time_limit
    )
    return CallOutside(call=verify, record=partial(_record_verification, credential_id))


def _record_verification(credential_id: int, _job: Job, result: VerificationResult) -> dict[str, Any]:
    statement = select(StoredCredential).where(StoredCredential.id == credential_id).with_for_update()
    record = db.session.execute(statement).scalar_one_or_none()
    if record is None:
        raise CredentialNotFound("The stored credential no longer exists.")
    record.verification_state = VERIFIED if result.verified else FAILED
    record.verification_reason = result.reason
    record.verification_errors = _storable(result.errors)
    record.checked_at = utcnow()
    return {"cid": record.cid, "state": record.verification_state, "reason": record.verification_reason}


def fail_verification_of_job(job: Job) -> None:
    """Record the stored credential of a failed verification job as failed, with the job's error.

    Runs in the transaction that fails the job, so the credential never stays pending; a record
    that a later job checks again is left to that job.
    """
    statement = (
        select(StoredCredential).where(StoredCredential.id == job.payload.get("credential_id")).with_for_update()
    )
    record = db.session.execute(statement).scalar_one_or_none()
    if record is None or record.job_id != job.id or record.verification_state != PENDING:
        return
    error = job.error or {"code": "verification_job_failed", "detail": "the verification job failed"}
    record.verification_state = FAILED
    record.verification_reason = str(error.get("code") or "verification_job_failed")[:64]
    record.verification_errors = _storable([{"code": record.verification_reason, "detail": str(error.get("detail"))}])
    record.checked_at = utcnow()


register_failure_handler(VERIFY_JOB, fail_verification_of_job)


def _storable(errors: list[dict]) -> list[dict]:
    """Failure details with NUL and lone surrogates replaced, so PostgreSQL's JSON can hold them.

    Details may quote what a remote party served (a did:web document, a status list).
    """

    def clean(value: Any) -> Any:
        return _UNSTORABLE.sub("\ufffd", value) if isinstance(value, str) else value

    return [{clean(name): clean(value) for name, value in error.items()} for error in errors]


def recheck_credentials(credential_ids: list[int]) -> None:
    """Mark these stored credentials pending and queue a fresh verification of each."""
    for credential_id in credential_ids:
        record = db.session.get(StoredCredential, credential_id)
        if record is None:
            continue
        record.verification_state = PENDING
        record.job_id = _start_verification(record).id


def verify_submitted(vc: Any, options: dict | None = None) -> VerificationResult:
    """Verify a credential on demand (VC API); stores nothing.

    `options` is as `CredentialVerifyIn` loads it (unknown options are refused there). Raises only
    `TooManyProofs`/`VerificationTooLarge` (422), before any work; every other problem is reported
    in the result.

    `options.expectedProofPurpose` selects the proof purpose (default assertionMethod);
    `options.challenge` and `options.domain` must be carried by every proof (Data Integrity: a
    mismatch or an absence fails). By default the issuer must be a DID authorising the key of at
    least one proof; only `options.issuerMustControlKeys: false` (a Tessera extension) checks each
    proof key against its own DID only, with the warning `issuer_not_bound`, for raw Data Integrity
    checks.
    """
    options = options or {}
    require_affordable(vc)
    # The verification may call other hosts, never inside a transaction; the caller's token stamp is kept.
    commit_before_the_edge("a verification calls other hosts with no transaction open")
    return current_engine().verify(
        vc,
        local_bit=status_lists.local_status_bit,
        proof_purpose=options.get("expectedProofPurpose", "assertionMethod"),
        bind_issuer=options.get("issuerMustControlKeys", True),
        challenge=options.get("challenge"),
        domains=options.get("domain", ()),
        presentation_header=_presentation_header(options),
    )


def _presentation_header(options: dict) -> bytes | None:
    header = options.get("presentationHeader")
    return header.encode("utf-8") if header is not None else None


def verify_submitted_presentation(caller: Caller | None, vp: Any, options: dict) -> dict[str, Any] | Job:
    """Verify a presentation on demand (VC API): its answer, or the job that verifies a large one.

    `options` is as `PresentationVerifyIn` loads it. A presentation with more proofs (its own and
    its credentials') than `VP_INLINE_MAX_PROOFS` is verified by a job of the caller's acting client
    (`credentials.verify_presentation`, the answer in its result); without a caller (the open
    endpoint) it is refused with `PresentationTooLarge` (413), and one holding text no database keeps
    (U+0000, lone surrogates) with `ValidationFailed` (422). Raises `TooManyCredentials`,
    `TooManyProofs`, `VerificationTooLarge` (422) before any work; every other problem is in the answer.
    """
    proofs = require_presentation_affordable(vp)
    if proofs > current(CredentialSettings).presentation_inline_max_proofs:
        if caller is None:
            raise PresentationTooLarge(
                f"The presentation has {proofs} proofs; one with more than "
                f"{current(CredentialSettings).presentation_inline_max_proofs} is verified by a job, which needs "
                "an API token (x-api-token) to start and read."
            )
        unstorable = unstorable_text_member(vp) if isinstance(vp, dict) else None
        if unstorable is not None:  # the job keeps the presentation; no suite signs such text reliably anyway
            message = "Must not contain U+0000 or unpaired surrogates."
            raise ValidationFailed(message, errors={f"verifiablePresentation.{unstorable}": [message]})
        payload = {"presentation": vp, "options": {**options, "domain": list(options.get("domain", ()))}}
        return enqueue_job(VERIFY_PRESENTATION_JOB, payload, client_id=caller.acting_client_id)
    commit_before_the_edge("a verification calls other hosts with no transaction open")
    return presentation_answer(vp, options, _verify_presentation(vp, options))


def require_presentation_affordable(vp: Any) -> int:
    """Refuse, before any proof is checked, a presentation over the verification budget; returns how
    many proofs it and its credentials have (what its verification costs).

    Raises `TooManyCredentials`, `TooManyProofs` or `VerificationTooLarge` (422); a shape the
    verification refuses counts for nothing here.
    """
    credentials = presentation_credentials(vp)
    limit = current(CredentialSettings).presentation_max_credentials
    if len(credentials) > limit:
        detail = f"The presentation holds {len(credentials)} credentials; at most {limit} are verified."
        raise TooManyCredentials(detail, errors={"verifiablePresentation.verifiableCredential": [detail]})
    require_affordable(vp, "verifiablePresentation")
    for index, credential in enumerate(credentials):
        require_affordable(credential, f"verifiablePresentation.verifiableCredential.{index}")
    return sum(_proof_count(document) for document in [vp, *credentials])


def _proof_count(document: Any) -> int:
    proof = document.get("proof") if isinstance(document, dict) else None
    return len(proof) if isinstance(proof, list) else int(proof is not None)


def _verify_presentation(vp: Any, options: dict, time_limit: float | None = None) -> PresentationResult:
    checks = tuple(options.get("checks", ()))
    expectations = HolderExpectations(
        challenge=options.get("challenge"),
        domains=tuple(options.get("domain", ())),
        presentation_header=_presentation_header(options),
        # A check listed is made, never skipped.
        holder_must_be_subject=options.get("holderMustBeSubject", False) or "holder_is_subject" in checks,
        checks=checks,
    )
    return current_engine().verify_presentation(
        vp,
        expectations,
        local_bit=status_lists.local_status_bit,
        bind_issuer=options.get("issuerMustControlKeys", True),
        time_limit=time_limit,
        max_credentials=current(CredentialSettings).presentation_max_credentials,
    )


def presentation_answer(vp: Any, options: dict, result: PresentationResult) -> dict[str, Any]:
    """The VC API's answer of a presentation's verification (with the presentation when asked)."""
    answer = result.as_dict()
    if options.get("returnPresentation"):
        answer["verifiablePresentation"] = vp
    return answer


def verify_presentation_from_job(job: Job) -> CallOutside:
    """Verify the presentation of a `credentials.verify_presentation` job; its answer is the job's result.

    The verification calls other hosts, so it runs with no transaction open (`CallOutside`), well
    inside the lease (half of it), so the job ends before anyone may run it again.
    """
    vp, options = job.payload.get("presentation"), job.payload.get("options") or {}
    time_limit = float(current_app.config["JOB_LEASE_SECONDS"]) / 2
    return CallOutside(
        call=partial(_verify_presentation, vp, options, time_limit),
        record=lambda _job, result: presentation_answer(vp, options, result),
    )


def presentable_credential(cid: Any, member: str, *, caller: Caller | None = None, user_id: int | None = None) -> dict:
    """The verified credential stored as `cid` for a holder: a client of the caller's subtree, or the
    user `user_id`. Raises `CredentialNotPresentable` (422, naming `member`) for anything else: unknown,
    another tenant's, still pending or failed (a revoked credential is not presented)."""
    statement = select(StoredCredential.vc_json).where(
        StoredCredential.cid == cid, StoredCredential.verification_state == VERIFIED
    )
    if caller is not None:
        statement = statement.where(StoredCredential.client_id.in_(subtree_client_ids(caller.acting_path)))
    else:
        statement = statement.where(StoredCredential.user_id == user_id)
    vc_json = db.session.scalars(statement.limit(1)).first() if isinstance(cid, str) and _CID.match(cid) else None
    if vc_json is None:
        message = "Not the id of a verified credential stored for you."
        raise CredentialNotPresentable(message, errors={member: [message]})
    return json.loads(vc_json)


def recheck_foreign_status(limit: int = 500) -> int:
    """Queue a fresh verification of verified credentials whose status lists others host.

    Picks those checked longer ago than `STATUS_RECHECK_SECONDS` (default 3600), oldest first,
    at most `limit`; returns how many were queued. Flushes only: the caller (the beat task)
    owns the transaction, and the jobs are published once it commits.
    """
    interval = timedelta(seconds=current(CredentialSettings).status_recheck_seconds)
    statement = (
        select(StoredCredential)
        .where(
            StoredCredential.foreign_status.is_(True),
            StoredCredential.verification_state == VERIFIED,
            StoredCredential.checked_at < utcnow() - interval,
        )
        .order_by(StoredCredential.checked_at)
        .limit(limit)
    )
    records = list(db.session.execute(statement).scalars())
    for record in records:
        record.job_id = _start_verification(record).id
    db.session.flush()
    return len(records)


def user_credentials_json(user_id: int) -> str:
    """`{"data": [vc, ...]}`: the user's verified, unexpired credentials, newest first, byte for byte."""
    statement = (
        select(StoredCredential.cid, StoredCredential.vc_json)
        .where(
            StoredCredential.user_id == user_id,
            StoredCredential.verification_state == VERIFIED,
            or_(StoredCredential.valid_until.is_(None), StoredCredential.valid_until > utcnow()),
        )
        .order_by(StoredCredential.created_at.desc(), StoredCredential.id.desc())
    )
    seen: set[str] = set()
    texts: list[str] = []
    for cid, vc_json in db.session.execute(statement):
        if cid not in seen:
            seen.add(cid)
            texts.append(vc_json)
    return '{"data":[' + ",".join(texts) + "]}"


def allocate_status_entry(caller: Caller, purpose: str) -> dict[str, Any]:
    """A new status entry for the caller's acting client, as the API shows it."""
    return status_lists.entry_view(status_lists.allocate_status_entry(caller.acting_client_id, purpose))


def status_entry(caller: Caller, entry_id: str) -> dict[str, Any]:
    """An entry owned by a client of the caller's subtree; `StatusEntryNotFound` otherwise."""
    return status_lists.entry_view(status_lists.require_status_entry(entry_id, subtree_client_ids(caller.acting_path)))


def change_status_entry(caller: Caller, entry_id: str, status: str) -> dict[str, Any]:
    """Revoke, suspend or reinstate an entry; stored credentials using it are checked again."""
    entry, linked = status_lists.set_entry_status(entry_id, subtree_client_ids(caller.acting_path), status)
    recheck_credentials(linked)
    return status_lists.entry_view(entry)


def status_list_credential(list_id: str) -> tuple[str, int]:
    """(signed list credential JSON text, cache lifetime in seconds) of a hosted list."""
    return status_lists.require_list_credential(list_id), status_lists.list_ttl_seconds()
