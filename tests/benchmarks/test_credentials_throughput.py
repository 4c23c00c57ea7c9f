"""Credential verification: per-suite latency through `POST /v1/vc/verify`, and stored credentials
verified per second by two worker processes (PostgreSQL + Redis).

Prints figures; never fails on time. Run:
  pytest -m benchmark tests/benchmarks/test_credentials_throughput.py -s                (latency)
  DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
    pytest -m benchmark tests/benchmarks/test_credentials_throughput.py -s             (both)
"""

from __future__ import annotations

import json
import statistics
import time

import pytest

from tests.support import environment
from tests.support.bench import percentile
from tests.support.issuing import Issuer, allocate_status, create_user
from tests.support.vectors import VECTORS

pytestmark = pytest.mark.benchmark

LATENCY_RUNS = 200
BATCH = 600
WARMUP_JOBS = 20


def _signed_credentials(client, headers) -> dict[str, tuple[dict, dict]]:
    """suite label → (credential, verify options); a typical credential with a hosted status entry."""
    status = allocate_status(client, headers)["credentialStatus"]
    cases: dict[str, tuple[dict, dict]] = {}
    for label, suite, key_type in [
        ("eddsa-rdfc-2022", "eddsa-rdfc-2022", "Ed25519"),
        ("eddsa-jcs-2022", "eddsa-jcs-2022", "Ed25519"),
        ("ecdsa-rdfc-2019 P-256", "ecdsa-rdfc-2019", "P-256"),
        ("ecdsa-rdfc-2019 P-384", "ecdsa-rdfc-2019", "P-384"),
        ("ecdsa-jcs-2019 P-256", "ecdsa-jcs-2019", "P-256"),
    ]:
        issuer = Issuer(key_type)
        vc = issuer.credential("did:example:holder", status=status, birthDate="1815-12-10", city="London")
        cases[label] = (issuer.sign(vc, suite), {})
    raw = {"issuerMustControlKeys": False}
    for label, path in [
        ("ecdsa-sd-2023 derived (W3C employ)", "ecdsa/ecdsa-sd-2023/employ/derivedRevealDocument.json"),
        ("bbs-2023 derived (W3C windsurf)", "bbs-2023/derivedRevealDocument.json"),
        ("bbs-2023 base (W3C windsurf)", "bbs-2023/addSignedSDBase.json"),
    ]:
        cases[label] = (json.loads((VECTORS / path).read_text(encoding="utf-8")), raw)
    return cases


def _engine_timings(app, vc: dict, options: dict) -> list[float]:
    from app.credentials import status_lists
    from app.credentials.engine import current_engine
    from app.extensions import db

    timings = []
    with app.test_request_context():
        engine = current_engine()
        for run in range(LATENCY_RUNS + 5):
            started = time.perf_counter()
            result = engine.verify(
                vc, local_bit=status_lists.local_status_bit, bind_issuer=options.get("issuerMustControlKeys", True)
            )
            elapsed = (time.perf_counter() - started) * 1000
            assert result.verified, result.errors
            if run >= 5:
                timings.append(elapsed)
        db.session.rollback()
    return timings


def _http_timings(client, headers, vc: dict, options: dict) -> list[float]:
    request = {"verifiableCredential": vc, "options": options}
    timings = []
    for run in range(LATENCY_RUNS + 5):
        started = time.perf_counter()
        response = client.post("/v1/vc/verify", json=request, headers=headers)
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.get_data(as_text=True)
        if run >= 5:
            timings.append(elapsed)
    return timings


def test_verify_latency_per_suite(app, client, master):
    lines = []
    for label, (vc, options) in _signed_credentials(client, master.headers).items():
        engine = _engine_timings(app, vc, options)
        http = _http_timings(client, master.headers, vc, options)
        lines.append(
            f"  {label:36s} engine p50 {statistics.median(engine):6.2f} ms p99 {percentile(engine, 0.99):6.2f} ms"
            f"   HTTP p50 {statistics.median(http):6.2f} ms p99 {percentile(http, 0.99):6.2f} ms"
        )
    print(
        f"\nverification latency per suite, status check included (n={LATENCY_RUNS}; engine = the verification "
        "with its database status read, HTTP = POST /v1/vc/verify through the Flask test client):\n" + "\n".join(lines)
    )


def _job_times(app, job_ids: list[str]) -> list[tuple[float, float]]:
    from sqlalchemy import select

    from app.db import as_utc
    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        rows = db.session.execute(
            select(Job.started_at, Job.finished_at).where(Job.id.in_(job_ids), Job.state == "succeeded")
        ).all()
        db.session.rollback()
    return sorted((as_utc(start).timestamp(), as_utc(end).timestamp()) for start, end in rows)


def _verified_count(app, cids: list[str]) -> int:
    from sqlalchemy import func, select

    from app.credentials.models import StoredCredential
    from app.extensions import db

    with app.app_context():
        count = db.session.scalar(
            select(func.count())
            .select_from(StoredCredential)
            .where(StoredCredential.cid.in_(cids), StoredCredential.verification_state == "verified")
        )
        db.session.rollback()
    return count


def _job_ids(app, cids: list[str]) -> list[str]:
    from sqlalchemy import select

    from app.credentials.models import StoredCredential
    from app.extensions import db

    with app.app_context():
        ids = db.session.execute(select(StoredCredential.job_id).where(StoredCredential.cid.in_(cids))).scalars().all()
        db.session.rollback()
    return list(ids)


@pytest.mark.realworker
def test_stored_credentials_verified_per_second_by_two_workers(app, client, master, real_worker):
    user = create_user(client, master.headers)
    status = allocate_status(client, master.headers)["credentialStatus"]
    issuer = Issuer()
    bodies = [
        json.dumps({"vc": issuer.sign(issuer.credential(user["did"], status=status, serial=index))})
        for index in range(BATCH)
    ]
    real_worker.stop()
    cids = []
    workers = []
    try:
        for body in bodies:
            response = client.post(
                "/v1/vc/issuer/store", data=body, content_type="application/json", headers=master.headers
            )
            assert response.status_code == 201, response.get_data(as_text=True)
            cids.append(response.json["data"]["cid"])
        workers = [environment.start_worker(concurrency=1) for _ in range(2)]
        deadline = time.monotonic() + 300
        while _verified_count(app, cids) < len(cids):
            assert time.monotonic() < deadline, "verification jobs did not finish"
            time.sleep(0.1)
    finally:
        for process in workers:
            environment.stop_process(process)
        real_worker.start()

    times = _job_times(app, _job_ids(app, cids))
    assert len(times) == BATCH
    finished = sorted(end for _, end in times)
    steady = (len(finished) - WARMUP_JOBS) / (finished[-1] - finished[WARMUP_JOBS - 1])
    overall = len(finished) / (finished[-1] - times[0][0])
    per_job = [(end - start) * 1000 for start, end in times]
    print(
        f"\nstored credentials verified by 2 worker processes (eddsa-rdfc-2022 with a hosted status entry, "
        f"PostgreSQL + Redis, n={BATCH}): {steady:.0f} credentials/s steady "
        f"({overall:.0f}/s including each worker's first jobs); job run time p50 "
        f"{statistics.median(per_job):.1f} ms, p99 {percentile(per_job, 0.99):.1f} ms"
    )
