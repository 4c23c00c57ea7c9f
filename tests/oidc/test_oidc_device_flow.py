"""The device authorization grant (RFC 8628) through its real surface: the device authorization
endpoint, the hosted device page with the code flow's sign-in and consent, and polling at the token
endpoint (pending, slow_down, denied, expired, redeemed once)."""

from __future__ import annotations

import base64
import json
import re
import secrets
from urllib.parse import urlsplit

import pytest
from sqlalchemy import update

from app.db import transaction
from app.extensions import db
from app.oidc.models import DeviceAuthorization
from tests.support.config import set_settings
from tests.support.oidc import form_fields, latest_code, path_of, query_of

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
USER_CODE = re.compile(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}")


@pytest.fixture(autouse=True)
def device_settings(app):
    set_settings(app, OIDC_DEVICE_USER_CODE_ATTEMPTS=100000)
    yield
    set_settings(app, OIDC_DEVICE_USER_CODE_ATTEMPTS=10, OIDC_DEVICE_FLOW=True)


@pytest.fixture
def device_tenant(client, tenant):
    """The tenant's client with the device grant enabled."""
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"grant_types": [DEVICE_GRANT]}
    )
    assert response.status_code == 200, response.get_json()
    assert DEVICE_GRANT in response.get_json()["data"]["grant_types"]
    return tenant


def _start(client, tenant, **extra) -> dict:
    response = client.post(
        "/v1/openidc/device_authorization", data=extra, auth=(str(tenant.client_id), tenant.client_secret)
    )
    assert response.status_code == 200, response.get_json()
    assert response.headers["Cache-Control"] == "no-store"
    return response.get_json()


def _poll(client, tenant, device_code: str):
    return client.post(
        "/v1/openidc/token",
        data={"grant_type": DEVICE_GRANT, "device_code": device_code},
        auth=(str(tenant.client_id), tenant.client_secret),
    )


def _error(response) -> str:
    assert response.status_code == 400, (response.status_code, response.get_json())
    return response.get_json()["error"]


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _enter_code(client, started: dict, **environ):
    """Open `verification_uri_complete` and submit the prefilled code; the answer to the submission."""
    page = client.get(path_of(started["verification_uri_complete"]))
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert f'value="{started["user_code"]}"' in html
    return client.post(
        "/v1/openidc/device",
        data={**form_fields(html), "user_code": started["user_code"]},
        environ_overrides=environ,
    )


def _sign_in_to_consent(client, tenant, started: dict) -> str:
    """Enter the user code, sign in by e-mail code; the consent page's HTML."""
    response = _enter_code(client, started)
    assert response.status_code == 303, response.get_data(as_text=True)
    location = response.headers["Location"]
    if "/login" in location:
        page = client.get(path_of(location))
        fields = form_fields(page.get_data(as_text=True))
        page = client.post("/v1/openidc/login", data={**fields, "email": tenant.email})
        assert page.status_code == 200
        fields = form_fields(page.get_data(as_text=True))
        response = client.post("/v1/openidc/login/code", data={**fields, "code": latest_code(client, tenant.email)})
        assert response.status_code == 303
        location = response.headers["Location"]
    assert "/v1/openidc/consent" in location
    page = client.get(path_of(location))
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="device-notice"' in html
    return html


def _decide(client, consent_page: str, decision: str) -> str:
    response = client.post("/v1/openidc/consent", data={**form_fields(consent_page), "decision": decision})
    assert response.status_code == 303
    return response.headers["Location"]


def test_the_device_signs_in_after_the_user_approves(app, client, device_tenant):
    tenant = device_tenant
    started = _start(client, tenant, scope="openid profile offline_access")
    assert set(started) == {
        "device_code",
        "user_code",
        "verification_uri",
        "verification_uri_complete",
        "expires_in",
        "interval",
    }
    assert USER_CODE.fullmatch(started["user_code"])
    assert urlsplit(started["verification_uri"]).path == "/v1/openidc/device"
    assert started["expires_in"] == 600 and started["interval"] == 5

    assert _error(_poll(client, tenant, started["device_code"])) == "authorization_pending"
    too_fast = _poll(client, tenant, started["device_code"])
    assert _error(too_fast) == "slow_down"
    with app.app_context():
        row = db.session.query(DeviceAuthorization).filter_by(client_id=tenant.client_id).one()
        assert row.poll_interval == 10  # five seconds more for this and every later poll
        assert started["device_code"] not in (row.device_code_hash, row.user_code_hash)

    consent = _sign_in_to_consent(client, tenant, started)
    done = _decide(client, consent, "allow")
    assert urlsplit(done).path == "/v1/openidc/device/done" and query_of(done)["result"] == "approved"
    page = client.get(path_of(done))
    assert page.status_code == 200 and "Your device is connected" in page.get_data(as_text=True)
    assert "Example University" in page.get_data(as_text=True)  # branded with the device's client
    forged = client.get(f"/v1/openidc/device/done?result=approved&client={tenant.client_id}-forged")
    assert "Example University" not in forged.get_data(as_text=True)  # names are not read by walking ids

    tokens = _poll(client, tenant, started["device_code"])
    assert tokens.status_code == 200, tokens.get_json()
    body = tokens.get_json()
    assert body["token_type"] == "Bearer" and body["scope"] == "openid profile offline_access"
    assert body["refresh_token"]
    id_token = _claims(body["id_token"])
    assert id_token["sub"] == str(tenant.user_id) and id_token["user_id"] == tenant.user_id
    assert id_token["aud"] == str(tenant.client_id) and id_token["sid"] and "nonce" not in id_token
    userinfo = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert userinfo.status_code == 200 and userinfo.get_json()["given_name"] == "Ada"

    again = _poll(client, tenant, started["device_code"])
    assert _error(again) == "invalid_grant"  # redeemed exactly once

    refreshed = client.post(
        "/v1/openidc/token",
        data={"grant_type": "refresh_token", "refresh_token": body["refresh_token"]},
        auth=(str(tenant.client_id), tenant.client_secret),
    )
    assert refreshed.status_code == 200, refreshed.get_json()


def test_a_signed_in_browser_goes_straight_to_consent(client, device_tenant):
    tenant = device_tenant
    first = _start(client, tenant)
    _decide(client, _sign_in_to_consent(client, tenant, first), "allow")
    assert _poll(client, tenant, first["device_code"]).status_code == 200

    second = _start(client, tenant)
    response = _enter_code(client, second)
    assert response.status_code == 303 and "/v1/openidc/consent" in response.headers["Location"]
    _decide(client, client.get(path_of(response.headers["Location"])).get_data(as_text=True), "allow")
    assert _poll(client, tenant, second["device_code"]).status_code == 200


def test_a_denied_device_gets_access_denied(client, device_tenant):
    tenant = device_tenant
    started = _start(client, tenant)
    done = _decide(client, _sign_in_to_consent(client, tenant, started), "deny")
    assert query_of(done)["error"] == "access_denied"
    page = client.get(path_of(done))
    assert "You denied the device access" in page.get_data(as_text=True)
    assert _error(_poll(client, tenant, started["device_code"])) == "access_denied"
    # A decided code cannot be entered again.
    assert _enter_code(client, started).status_code == 400


def test_an_expired_device_code_gets_expired_token(app, client, device_tenant):
    tenant = device_tenant
    started = _start(client, tenant)
    with app.app_context(), transaction():
        db.session.execute(
            update(DeviceAuthorization)
            .where(DeviceAuthorization.client_id == tenant.client_id)
            .values(expires_at=DeviceAuthorization.created_at)
        )
    assert _error(_poll(client, tenant, started["device_code"])) == "expired_token"
    refused = _enter_code(client, started)
    assert refused.status_code == 400 and "expired" in refused.get_data(as_text=True)


def test_a_client_without_the_device_grant_is_refused(client, tenant):
    refused = client.post("/v1/openidc/device_authorization", auth=(str(tenant.client_id), tenant.client_secret))
    assert _error(refused) == "unauthorized_client"
    assert _error(_poll(client, tenant, "anything")) == "unauthorized_client"


def test_the_device_authorization_endpoint_authenticates_the_client(client, device_tenant):
    refused = client.post("/v1/openidc/device_authorization", auth=(str(device_tenant.client_id), "wrong"))
    assert refused.status_code == 401 and refused.get_json()["error"] == "invalid_client"
    bad_scope = client.post(
        "/v1/openidc/device_authorization",
        data={"scope": "profile"},
        auth=(str(device_tenant.client_id), device_tenant.client_secret),
    )
    assert _error(bad_scope) == "invalid_scope"


def test_device_codes_are_the_client_s_own(app, client, device_tenant):
    from tests.support.oidc import make_tenant

    started = _start(client, device_tenant)
    other = make_tenant(app, client, name="Other device maker")
    client.put(f"/v1/sub_client/{other.client_id}", headers=other.headers, json={"grant_types": [DEVICE_GRANT]})
    assert _error(_poll(client, other, started["device_code"])) == "invalid_grant"
    assert _error(_poll(client, device_tenant, "not-a-device-code")) == "invalid_grant"
    missing = client.post(
        "/v1/openidc/token",
        data={"grant_type": DEVICE_GRANT},
        auth=(str(device_tenant.client_id), device_tenant.client_secret),
    )
    assert _error(missing) == "invalid_request"


def _network() -> str:
    """An IPv6 address of a /64 no other test uses (the limit counts per network, in the database)."""
    return f"2001:db8:{secrets.randbelow(0xFFFF):x}:{secrets.randbelow(0xFFFF):x}::1"


def test_wrong_user_codes_are_limited_per_network(app, client, device_tenant):
    set_settings(app, OIDC_DEVICE_USER_CODE_ATTEMPTS=3)
    address, elsewhere = _network(), _network()
    page = client.get("/v1/openidc/device")
    fields = form_fields(page.get_data(as_text=True))
    environ = {"REMOTE_ADDR": address}
    answers = [
        client.post("/v1/openidc/device", data={**fields, "user_code": code}, environ_overrides=environ)
        for code in ("BCDF-GHJK", "nonsense", "ZZZZ-ZZZZ")
    ]
    assert [answer.status_code for answer in answers] == [400, 400, 400]
    started = _start(client, device_tenant)
    limited = _enter_code(client, started, REMOTE_ADDR=address)
    assert limited.status_code == 429  # even the right code, once the network used its attempts
    assert _enter_code(client, started, REMOTE_ADDR=elsewhere).status_code == 303  # other networks are not limited


def test_the_device_page_needs_its_csrf_token(client):
    client.get("/v1/openidc/device")
    refused = client.post("/v1/openidc/device", data={"user_code": "BCDF-GHJK"})
    assert refused.status_code == 403


def test_the_operator_may_turn_the_device_flow_off(app, client, device_tenant):
    set_settings(app, OIDC_DEVICE_FLOW=False)
    metadata = client.get("/.well-known/openid-configuration").get_json()
    assert "device_authorization_endpoint" not in metadata
    assert DEVICE_GRANT not in metadata["grant_types_supported"]
    off = client.post(
        "/v1/openidc/device_authorization", auth=(str(device_tenant.client_id), device_tenant.client_secret)
    )
    assert off.status_code == 404
    assert _error(_poll(client, device_tenant, "anything")) == "unsupported_grant_type"
    assert client.get("/v1/openidc/device").status_code == 404
