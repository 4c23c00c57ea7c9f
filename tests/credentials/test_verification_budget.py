"""One budget per credential across all its proofs; verification jobs always end (SQLite and PostgreSQL)."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select

from tests.support.config import change_settings
from tests.support.credentials import wait_for_verification
from tests.support.issuing import Issuer, create_user
from tests.support.rows import row_count
from tests.support.tenancy import assert_problem

VERIFY_PATHS = ["/v1/vc/verify", "/credentials/verify"]


@pytest.fixture
def user(client, master):
    return create_user(client, master.headers)


def _many_proofs(subject_did: str, count: int) -> dict:
    issuer = Issuer()
    vc = issuer.credential(subject_did)
    for _ in range(count):
        vc = issuer.sign(vc)
    return vc


def _store(client, headers, vc: dict):
    return client.post("/v1/vc/issuer/store", json={"vc": vc}, headers=headers)


def _stored_count(app, client_id: int) -> int:
    from app.credentials.models import StoredCredential

    return row_count(app, StoredCredential, StoredCredential.client_id == client_id)


@pytest.mark.parametrize("path", VERIFY_PATHS)
def test_a_verify_with_too_many_proofs_is_a_422_naming_the_limit(client, master, path):
    vc = _many_proofs("did:example:holder", 35)
    response = client.post(path, json={"verifiableCredential": vc, "options": {}}, headers=master.headers)
    problem = assert_problem(response, 422)
    assert problem["code"] == "too_many_proofs"
    assert "35 proofs" in problem["detail"]


def test_a_35_proof_credential_stored_twice_ends_at_once_with_a_reason_while_canaries_complete(
    app, client, master, user, wait_for_job
):
    canaries = [client.post("/v1/jobs/canary", json={"delay_ms": 0}, headers=master.headers) for _ in range(3)]
    vc = _many_proofs(user["did"], 35)
    for _ in range(2):
        problem = assert_problem(_store(client, master.headers, vc), 422)
        assert problem["code"] == "too_many_proofs"
        assert "vc.proof" in problem["errors"]
    assert _stored_count(app, master.client_id) == 0
    for response in canaries:
        assert response.status_code == 202, response.get_data(as_text=True)
        assert wait_for_job(response.json["data"]["id"])["state"] == "succeeded"


def test_stored_credentials_over_the_budget_end_failed_with_the_limit_as_reason(
    app, client, master, user, wait_for_job
):
    """Credentials stored before the budget (or under a larger one) fail their next check at once."""
    from app.credentials.models import StoredCredential
    from app.credentials.service import recheck_credentials
    from app.db import transaction
    from app.extensions import db

    cids = []
    for _ in range(2):
        issuer = Issuer()
        response = _store(client, master.headers, issuer.sign(issuer.credential(user["did"])))
        assert response.status_code == 201, response.get_data(as_text=True)
        cids.append(response.json["data"]["cid"])
        assert wait_for_verification(client, master.headers, cids[-1])["verification"]["state"] == "verified"
    many = json.dumps(_many_proofs(user["did"], 35))
    with app.app_context(), transaction():
        records = db.session.execute(select(StoredCredential).where(StoredCredential.cid.in_(cids))).scalars().all()
        for record in records:
            record.vc_json = many
        recheck_credentials([record.id for record in records])
    canaries = [client.post("/v1/jobs/canary", json={"delay_ms": 0}, headers=master.headers) for _ in range(3)]
    for cid in cids:
        verification = wait_for_verification(client, master.headers, cid)["verification"]
        assert verification["state"] == "failed"
        assert verification["reason"] == "too_many_proofs"
    for response in canaries:
        assert wait_for_job(response.json["data"]["id"])["state"] == "succeeded"


@pytest.mark.parametrize("path", VERIFY_PATHS)
def test_proofs_that_would_transform_too_much_are_refused_before_any_work(client, master, path):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    vc["credentialSubject"]["items"] = [{"n": index} for index in range(9_000)]
    # Never checked: the estimate (about 18,000 values for each of 4 proofs) refuses first.
    vc["proof"] = [dict(vc["proof"], id=f"urn:uuid:{uuid.uuid4()}") for _ in range(4)]
    response = client.post(path, json={"verifiableCredential": vc, "options": {}}, headers=master.headers)
    assert assert_problem(response, 422)["code"] == "verification_size_limit"


def test_a_credential_over_the_size_budget_is_not_stored(app, client, master, user):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential(user["did"]))
    vc["credentialSubject"]["items"] = [{"n": index} for index in range(9_000)]
    vc["proof"] = [dict(vc["proof"], id=f"urn:uuid:{uuid.uuid4()}") for _ in range(4)]
    assert assert_problem(_store(client, master.headers, vc), 422)["code"] == "verification_size_limit"
    assert _stored_count(app, master.client_id) == 0


def test_proofs_past_the_time_budget_fail_with_the_limits_code(app, client, master, monkeypatch):
    change_settings(monkeypatch, app, VC_VERIFY_TIME_LIMIT="0.000000001")
    vc = _many_proofs("did:example:holder", 2)
    response = client.post("/v1/vc/verify", json={"verifiableCredential": vc, "options": {}}, headers=master.headers)
    assert response.status_code == 400
    codes = [error["code"] for error in response.json["errors"]]
    assert codes and set(codes) == {"verification_time_limit"}, response.json


def test_a_failed_verification_is_recorded_once_and_never_retried(app, client, master, user, wait_for_job):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential(user["did"]))
    vc["credentialSubject"]["firstName"] = "Eve"
    response = _store(client, master.headers, vc)
    assert response.status_code == 201, response.get_data(as_text=True)
    record = wait_for_verification(client, master.headers, response.json["data"]["cid"])
    assert record["verification"]["state"] == "failed"
    assert record["verification"]["reason"] == "invalid_signature"
    job_id = _record_job_id(app, response.json["data"]["cid"])
    job = wait_for_job(job_id)
    assert job["state"] == "succeeded"
    assert _job_attempts(app, job_id) == 1


def _record_job_id(app, cid: str) -> str:
    from app.credentials.models import StoredCredential
    from app.extensions import db

    with app.app_context():
        job_id = db.session.scalar(select(StoredCredential.job_id).where(StoredCredential.cid == cid))
        db.session.rollback()
        return job_id


def _job_attempts(app, job_id: str) -> int:
    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        attempts = db.session.get(Job, job_id).attempts
        db.session.rollback()
        return attempts


def test_a_verification_job_started_again_and_again_fails_and_so_does_its_credential(
    app, client, master, user, wait_for_job
):
    """A job whose runs kept outliving the lease (each worker killed) is failed, not run forever."""
    from app.credentials.models import StoredCredential
    from app.db import transaction, utcnow
    from app.extensions import db
    from app.jobs.models import RUNNING, Job
    from app.jobs.service import publish_job

    issuer = Issuer()
    response = _store(client, master.headers, issuer.sign(issuer.credential(user["did"])))
    cid = response.json["data"]["cid"]
    assert wait_for_verification(client, master.headers, cid)["verification"]["state"] == "verified"
    with app.app_context(), transaction():
        record = db.session.execute(select(StoredCredential).where(StoredCredential.cid == cid)).scalar_one()
        job = Job(
            id=str(uuid.uuid4()),
            kind="credentials.verify",
            state=RUNNING,
            payload={"credential_id": record.id, "cid": cid},
            client_id=record.client_id,
            attempts=6,
            created_at=utcnow(),
            started_at=utcnow() - timedelta(minutes=10),
            lease_expires_at=utcnow() - timedelta(minutes=1),
        )
        db.session.add(job)
        record.verification_state = "pending"
        record.job_id = job.id
        job_id = job.id
    with app.app_context():
        # What the outbox sweep does with a running job whose lease has expired.
        assert publish_job(job_id, "credentials.verify")
    failed = wait_for_job(job_id)
    assert failed["state"] == "failed"
    assert failed["error"]["code"] == "attempts_exhausted"
    verification = wait_for_verification(client, master.headers, cid)["verification"]
    assert verification["state"] == "failed"
    assert verification["reason"] == "attempts_exhausted"


def test_jsonld_work_in_one_thread_never_waits_for_another():
    """A large canonicalisation in progress does not hold up a small one in another thread."""
    from app.credentials.jsonld.canon import canonicalize
    from app.credentials.jsonld.loader import DocumentLoader

    slow_url = "https://slow.example/context.jsonld"
    entered, release = threading.Event(), threading.Event()

    class HeldLoader(DocumentLoader):
        def __call__(self, url, options=None):
            if url == slow_url:
                entered.set()
                release.wait(30)
            return super().__call__(url, options)

    loader = HeldLoader({slow_url: {"@context": {"name": "https://schema.org/name"}}})
    held_result: list = []
    held = threading.Thread(
        target=lambda: held_result.append(canonicalize({"@context": slow_url, "name": "held"}, loader, time_limit=60))
    )
    held.start()
    try:
        assert entered.wait(30)
        small_result: list = []
        small = threading.Thread(
            target=lambda: small_result.append(
                canonicalize({"@context": {"name": "https://schema.org/name"}, "name": "small"}, loader)
            )
        )
        small.start()
        small.join(30)
        assert small_result == ['_:c14n0 <https://schema.org/name> "small" .\n']
        assert held.is_alive() and held_result == []
    finally:
        release.set()
        held.join(30)
    assert held_result == ['_:c14n0 <https://schema.org/name> "held" .\n']


def test_the_budget_is_checked_before_any_proof():
    from app.credentials.cryptosuites.base import ProofCheckFailed
    from app.credentials.verifier import VerificationBudget, check_verification_budget

    vc = json.loads(json.dumps(_many_proofs("did:example:holder", 3)))
    check_verification_budget(vc, VerificationBudget(max_proofs=3))
    with pytest.raises(ProofCheckFailed) as failure:
        check_verification_budget(vc, VerificationBudget(max_proofs=2))
    assert failure.value.code == "too_many_proofs"
    with pytest.raises(ProofCheckFailed) as failure:
        check_verification_budget(copy.deepcopy(vc), VerificationBudget(max_values=50))
    assert failure.value.code == "verification_size_limit"
