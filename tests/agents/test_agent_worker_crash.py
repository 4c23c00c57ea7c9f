"""A worker killed in the middle of host-card or deregister: all of the transaction or none of it.

The test holds a row lock on the agent's public card, so the job blocks after it has already
written the charge (and, for host-card, the private copy) but before it commits. The worker is
then killed with SIGKILL; nothing of the job may remain. After a restart the job is re-published
(as the outbox sweep does once the lease of the dead worker has expired) and completes once.
"""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager

import pytest
from sqlalchemy import func, select, text

from app.client.library import TesseraClient
from tests.support.agents import registration_card
from tests.support.environment import republish_abandoned

pytestmark = pytest.mark.realworker


@contextmanager
def public_card_locked(app, did: str):
    from app.extensions import db

    with app.app_context():
        connection = db.engine.connect()
        transaction = connection.begin()
        connection.execute(text("SELECT did FROM agent_public_cards WHERE did = :did FOR UPDATE"), {"did": did}).all()
        try:
            yield
        finally:
            transaction.rollback()
            connection.close()


def wait_until_blocked_on_lock(app, timeout: float = 30.0) -> None:
    from app.extensions import db

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with app.app_context():
            waiting = db.session.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query ILIKE '%agent_public_cards%'"
                )
            ).scalar()
            db.session.rollback()
        if waiting:
            return
        time.sleep(0.05)
    raise AssertionError("the job never reached the locked row")


def snapshot(app, did: str, job_id: str) -> dict:
    from app.agents.models import AgentAccount, CreditEntry, PrivateCard, PublicCard, RegistryRecord
    from app.extensions import db

    with app.app_context():
        account = db.session.execute(select(AgentAccount).where(AgentAccount.did == did)).scalar_one()
        private = db.session.get(PrivateCard, did)
        public = db.session.get(PublicCard, did)
        state = {
            "balance": account.balance,
            "deactivated": account.deactivated_at is not None,
            "record": db.session.get(RegistryRecord, did) is not None,
            "private": private.body if private else None,
            "public": public.body if public else None,
            "entries_for_job": db.session.scalar(
                select(func.count()).select_from(CreditEntry).where(CreditEntry.job_id == job_id)
            ),
        }
        db.session.rollback()
        return state


def crash_during(app, real_worker, did: str, start_job) -> str:
    with public_card_locked(app, did):
        job = start_job()
        wait_until_blocked_on_lock(app)
        real_worker.stop(signal.SIGKILL)
    return job["id"]


def test_worker_killed_during_host_card(app, real_worker, live_server, claimed_key, wait_for_job):
    client = TesseraClient(live_server.url, api_key=claimed_key, poll_interval=0.05, job_timeout=60)
    first = registration_card("first")
    second = registration_card("second", edited=True)
    client.host_card(first)
    try:
        job_id = crash_during(app, real_worker, client.did, lambda: client.host_card(second, wait=False))
        assert snapshot(app, client.did, job_id) == {
            "balance": 990,
            "deactivated": False,
            "record": True,
            "private": first,
            "public": first,
            "entries_for_job": 0,
        }
    finally:
        real_worker.start()
    republish_abandoned(app, job_id)
    assert wait_for_job(job_id, timeout=60)["state"] == "succeeded"
    assert snapshot(app, client.did, job_id) == {
        "balance": 980,
        "deactivated": False,
        "record": True,
        "private": second,
        "public": second,
        "entries_for_job": 1,
    }
    client.close()


def test_worker_killed_during_deregister(app, real_worker, live_server, claimed_key, wait_for_job):
    client = TesseraClient(live_server.url, api_key=claimed_key, poll_interval=0.05, job_timeout=60)
    card = registration_card("short-lived")
    client.host_card(card)
    try:
        job_id = crash_during(app, real_worker, client.did, lambda: client.deregister_agent(wait=False))
        assert snapshot(app, client.did, job_id) == {
            "balance": 990,
            "deactivated": False,
            "record": True,
            "private": card,
            "public": card,
            "entries_for_job": 0,
        }
    finally:
        real_worker.start()
    republish_abandoned(app, job_id)
    assert wait_for_job(job_id, timeout=60)["state"] == "succeeded"
    assert snapshot(app, client.did, job_id) == {
        "balance": 990,
        "deactivated": True,
        "record": False,
        "private": None,
        "public": None,
        "entries_for_job": 1,
    }
    with live_server.http() as http:
        assert http.get(f"/api/did/{client.did}").status_code == 410
    client.close()
