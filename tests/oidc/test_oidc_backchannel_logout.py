"""Back-channel logout: ending a session sends a signed logout token from a worker job to each client
of the session that registered a backchannel_logout_uri, retrying transient failures."""

from __future__ import annotations

import base64
import json

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests.support.config import set_settings, setting_of
from tests.support.environment import USING_POSTGRES
from tests.support.oidc import add_sub_client, exchange, sign_in
from tests.support.servers import LogoutReceiver as Receiver


@pytest.fixture
def receiver(app, real_worker):
    receiver = Receiver()
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=receiver.host)
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start(extra_env={"OIDC_OUTBOUND_ALLOW_HOSTS": receiver.host})
    yield receiver
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")
    receiver.server.shutdown()
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start()


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _verified(client, token: str) -> dict:
    jwks = client.get("/certs/jwks.json").get_json()
    return dict(jwt.decode(token, KeySet.import_key_set(jwks)).claims)


def _register(client, tenant, uri: str) -> None:
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"backchannel_logout_uri": uri}
    )
    assert response.status_code == 200, response.get_json()


def test_logout_tokens_reach_every_client_of_the_session(app, client, tenant, receiver):
    _register(client, tenant, receiver.url)
    second_id, second_secret = add_sub_client(client, tenant, redirect_uris=[tenant.redirect_uri])
    response = client.put(
        f"/v1/sub_client/{second_id}",
        headers=tenant.headers,
        json={"backchannel_logout_uri": receiver.url + "?app=second"},
    )
    assert response.status_code == 200

    id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
    sid = _claims(id_token)["sid"]
    second = type(tenant)(
        second_id, second_secret, tenant.api_token, tenant.redirect_uri, tenant.user_id, tenant.email, tenant.did
    )
    second_token = exchange(client, second, sign_in(client, second)["code"]).get_json()["id_token"]
    assert _claims(second_token)["sid"] == sid  # single sign-on: the same session

    logout = client.get("/v1/openidc/logout", query_string={"id_token_hint": id_token})
    assert logout.status_code in (200, 303)
    tokens = receiver.wait_for(2)
    assert len(tokens) == 2
    audiences = set()
    for token in tokens:
        header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
        assert header["typ"] == "logout+jwt"
        claims = _verified(client, token)
        assert claims["sid"] == sid and claims["sub"] == str(tenant.user_id)
        assert claims["iss"] == setting_of(app, "OIDC_ISSUER")
        assert claims["events"] == {"http://schemas.openid.net/event/backchannel-logout": {}}
        assert "nonce" not in claims and claims["jti"]
        audiences.add(claims["aud"])
    assert audiences == {str(tenant.client_id), str(second_id)}


def test_a_failing_logout_endpoint_is_retried(app, client, tenant, receiver):
    receiver.failures = 2
    _register(client, tenant, receiver.url)
    id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
    client.get("/v1/openidc/logout", query_string={"id_token_hint": id_token})
    tokens = receiver.wait_for(1, timeout=60)
    assert len(tokens) == 1 and receiver.calls == 3
    assert _claims(tokens[0])["sid"] == _claims(id_token)["sid"]


def _logout_jobs(app, client_id: int) -> list[str]:
    from sqlalchemy import select

    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        jobs = db.session.execute(select(Job).where(Job.kind == "oidc.backchannel_logout")).scalars().all()
        return [job.id for job in jobs if job.payload.get("client_id") == client_id]


def test_a_client_without_backchannel_uri_gets_nothing(app, client, tenant, receiver):
    id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
    client.get("/v1/openidc/logout", query_string={"id_token_hint": id_token})
    assert _logout_jobs(app, tenant.client_id) == []
    assert receiver.calls == 0


def test_a_non_public_logout_uri_is_refused_by_the_outbound_guard(app, client, tenant, wait_for_job):
    """Without the allow-list, loopback is refused: the job fails without contacting it."""
    receiver = Receiver()
    try:
        _register(client, tenant, receiver.url)
        id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
        client.get("/v1/openidc/logout", query_string={"id_token_hint": id_token})
        (job_id,) = _logout_jobs(app, tenant.client_id)
        job = wait_for_job(job_id)
        assert job["state"] == "failed" and job["error"]["code"] == "backchannel_logout_refused"
        assert receiver.calls == 0
    finally:
        receiver.server.shutdown()


def test_disabling_the_user_ends_their_sessions_with_logout_tokens(app, client, tenant, receiver):
    _register(client, tenant, receiver.url)
    id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
    result = app.test_cli_runner().invoke(args=["users", "disable", str(tenant.user_id)])
    assert result.exit_code == 0 and "1 sign-in session(s) ended" in result.output, result.output
    (token,) = receiver.wait_for(1)
    claims = _verified(client, token)
    assert claims["sid"] == _claims(id_token)["sid"] and claims["sub"] == str(tenant.user_id)
    assert claims["aud"] == str(tenant.client_id)
