"""Slow peers of the OpenID provider: a `jwks_uri` or a back-channel logout endpoint that drips its answer
one byte at a time holds no database transaction and stops no other work; the call ends at
`OUTBOUND_DEADLINE` (issue #24, items 1, 2 and 12)."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from tests.support.config import config_changed, set_settings, setting_of
from tests.support.environment import USING_POSTGRES
from tests.support.oidc import add_sub_client, exchange, make_tenant, sign_in
from tests.support.servers import DripServer

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
KEYS_UNAVAILABLE = "The client's keys could not be obtained from its jwks_uri."
DEADLINE = 1.0
# How long another write may take while a slow peer is being called: far below the peer's drip.
PROMPT = 2.5


class Timed(threading.Thread):
    """Runs `call` in a thread; `answer` and `seconds` once joined."""

    def __init__(self, call) -> None:
        super().__init__(daemon=True)
        self.call, self.answer, self.seconds = call, None, None

    def run(self) -> None:
        started = time.monotonic()
        self.answer = self.call()
        self.seconds = time.monotonic() - started


def _timed(call) -> tuple[object, float]:
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def _idle_in_transaction(app) -> int:
    """Connections to the test database idle inside a transaction (PostgreSQL), other than this one's."""
    from sqlalchemy import text

    from app.extensions import db

    with app.app_context(), db.engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
            )
        ).scalar()


def _create_user(app, tenant):
    profile = {"email_address": f"other-{uuid.uuid4().hex[:10]}@example.org"}
    return app.test_client().post("/v1/user/create", json={"profile": profile}, headers=tenant.headers)


@pytest.fixture
def drip():
    server = DripServer(interval=0.3, duration=12.0)
    yield server
    server.stop()


@pytest.fixture
def slow_peer_settings(app, drip, real_worker):
    """The drip server allow-listed and a short deadline, in this process and in the worker."""
    values = {"OIDC_OUTBOUND_ALLOW_HOSTS": drip.host, "OUTBOUND_DEADLINE": DEADLINE, "JOB_RETRY_BACKOFF_MAX": 0.2}
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start(extra_env={name: str(value) for name, value in values.items()})
    try:
        with config_changed(app, **values):
            yield
    finally:
        if USING_POSTGRES:
            real_worker.stop()
            real_worker.start()


def _assertion(issuer: str, client_id: int, key: ECKey) -> str:
    now = int(time.time())
    claims = {
        "iss": str(client_id),
        "sub": str(client_id),
        "aud": issuer,
        "iat": now,
        "exp": now + 60,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode({"alg": "ES256", "kid": "k1"}, claims, key, algorithms=["ES256"])


def _private_key_jwt_tenant(app, client, jwks_uri: str):
    tenant = make_tenant(app, client, name="Slow keys")
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={
            "token_endpoint_auth_method": "private_key_jwt",
            "jwks_uri": jwks_uri,
            "client_credentials_scopes": ["a"],
        },
    )
    assert response.status_code == 200, response.get_json()
    return tenant


def _token_request(app, tenant, key: ECKey):
    issuer = setting_of(app, "OIDC_ISSUER")
    return app.test_client().post(
        "/v1/openidc/token",
        data={
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": _assertion(issuer, tenant.client_id, key),
        },
    )


def test_a_dripping_jwks_uri_is_cut_at_the_deadline_and_blocks_no_write(app, client, drip, slow_peer_settings):
    tenant = _private_key_jwt_tenant(app, client, drip.url("/jwks.json"))
    key = ECKey.generate_key("P-256", private=True)

    token = Timed(lambda: _token_request(app, tenant, key))
    token.start()
    time.sleep(0.4)  # the token request is now waiting on the drip
    idle = [_idle_in_transaction(app) for _ in range(3)] if USING_POSTGRES else []
    created, seconds = _timed(lambda: _create_user(app, tenant))
    token.join(timeout=30)

    assert created.status_code == 201, created.get_json()
    assert seconds < PROMPT, f"a user creation waited {seconds:.1f}s behind the jwks_uri fetch"
    assert idle == [0] * len(idle), "the token request held a transaction open while fetching"
    assert drip.connections == 1
    assert token.seconds < DEADLINE + PROMPT, f"the token request took {token.seconds:.1f}s"
    # Item 12: the caller learns nothing of what the remote did, only that the keys are unavailable.
    assert token.answer.status_code == 401
    assert token.answer.get_json() == {"error": "invalid_client", "error_description": KEYS_UNAVAILABLE}
    assert drip.wait_until_idle(2.0), "the fetch went on after the request was answered"

    # The failure is remembered for a while: the next requests answer at once without calling the peer.
    again, seconds = _timed(lambda: _token_request(app, tenant, key))
    assert again.status_code == 401 and seconds < DEADLINE and drip.connections == 1


def test_a_jwks_uri_failure_does_not_echo_the_remote_answer(app, client):
    """Item 12: a redirect (or any other answer) of the jwks_uri is not described to the caller."""
    from tests.support.servers import serve_on_loopback

    def moved(_method: str, _path: str, _body: bytes) -> tuple[str, bytes]:
        return "text/html", b"<html>internal admin console</html>"

    server = serve_on_loopback(moved)
    host = f"127.0.0.1:{server.server_port}"
    try:
        set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=host)
        tenant = _private_key_jwt_tenant(app, client, f"http://{host}/admin")
        answer = _token_request(app, tenant, ECKey.generate_key("P-256", private=True))
    finally:
        set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")
        server.shutdown()
    assert answer.status_code == 401
    assert answer.get_json() == {"error": "invalid_client", "error_description": KEYS_UNAVAILABLE}


def _logout_jobs(app, client_ids: set[int]) -> list[str]:
    from sqlalchemy import select

    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        jobs = db.session.execute(select(Job).where(Job.kind == "oidc.backchannel_logout")).scalars().all()
        found = [job.id for job in jobs if job.payload.get("client_id") in client_ids]
        db.session.rollback()
        return found


def _session_ended(app, sid: str) -> bool:
    from sqlalchemy import select

    from app.extensions import db
    from app.oidc.models import LoginSession

    with app.app_context():
        ended_at = db.session.scalar(select(LoginSession.ended_at).where(LoginSession.sid == sid))
        db.session.rollback()
        return ended_at is not None


def _sid(id_token: str) -> str:
    payload = id_token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sid"]


def test_a_dripping_logout_endpoint_stops_neither_jobs_nor_writes(
    app, client, tenant, drip, slow_peer_settings, wait_for_job
):
    uri = drip.url("/backchannel-logout")
    clients = {tenant.client_id}
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"backchannel_logout_uri": uri}
    )
    assert response.status_code == 200, response.get_json()
    if USING_POSTGRES:  # two logouts: as many as the worker has slots
        second_id, second_secret = add_sub_client(client, tenant, redirect_uris=[tenant.redirect_uri])
        response = client.put(
            f"/v1/sub_client/{second_id}", headers=tenant.headers, json={"backchannel_logout_uri": uri + "?app=second"}
        )
        assert response.status_code == 200
        clients.add(second_id)
    id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
    if USING_POSTGRES:
        second = type(tenant)(
            second_id, second_secret, tenant.api_token, tenant.redirect_uri, tenant.user_id, tenant.email, tenant.did
        )
        assert exchange(client, second, sign_in(client, second)["code"]).status_code == 200

    logout = Timed(lambda: client.get("/v1/openidc/logout", query_string={"id_token_hint": id_token}))
    logout.start()
    deadline = time.monotonic() + 40  # the worker restarted with the test's settings: it may still be starting
    while drip.connections == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert drip.connections >= 1, "no logout reached the endpoint"
    idle = [_idle_in_transaction(app) for _ in range(3)] if USING_POSTGRES else []
    created, create_seconds = _timed(lambda: _create_user(app, tenant))
    canary_started = time.monotonic()
    canary = app.test_client().post("/v1/jobs/canary", json={}, headers=tenant.headers)
    assert canary.status_code == 202, canary.get_json()
    ran = wait_for_job(canary.get_json()["data"]["id"], timeout=30)
    canary_seconds = time.monotonic() - canary_started
    logout.join(timeout=60)

    assert created.status_code == 201, created.get_json()
    assert create_seconds < PROMPT, f"a user creation waited {create_seconds:.1f}s behind a logout job"
    assert idle == [0] * len(idle), "a logout job held a transaction open while posting"
    assert ran["state"] == "succeeded"
    assert canary_seconds < 2 * PROMPT, f"a canary took {canary_seconds:.1f}s behind the logout jobs"
    assert logout.answer.status_code in (200, 303)
    assert _session_ended(app, _sid(id_token)), "the user's session was not ended"

    # Each attempt ends at the deadline; the job retries, then gives up: it never runs forever.
    for job_id in _logout_jobs(app, clients):
        job = wait_for_job(job_id, timeout=30)
        assert job["state"] == "failed" and job["error"]["code"] == "retries_exhausted", job
    assert drip.wait_until_idle(2.0)
