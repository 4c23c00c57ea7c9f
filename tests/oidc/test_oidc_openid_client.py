"""openid-client (npm, OpenID Certified relying-party library) against a live server: code flow with
refresh rotation, client_credentials, client_secret_jwt, private_key_jwt, PAR, request objects (JAR, alone
and inside PAR), DPoP with JARM and signed userinfo, RP-initiated plus back-channel logout (the logout
token validated by the RP with jose against the published keys), the device authorization grant and
pairwise subjects, and the acr/amr of a sign-in as asked for.

The Node driver and its pinned dependencies live in tests/oidc/rp_node (package-lock.json); the
`node_rp` fixture (tests/oidc/conftest.py) installs them there on first use.
"""

from __future__ import annotations

import base64
import json

import pytest
import requests
from joserfc.jwk import ECKey

from app.db import transaction
from app.tenancy import service as tenancy_service
from tests.support.config import set_settings
from tests.support.environment import USING_POSTGRES
from tests.support.oidc import approve_device_over_http, make_tenant, sign_in_over_http
from tests.support.servers import LogoutReceiver, serve_on_loopback


class _KeySetServer:
    """A client's jwks_uri on loopback."""

    def __init__(self, document: dict) -> None:
        body = json.dumps(document).encode()
        self.server = serve_on_loopback(lambda _method, _path, _body: ("application/json", body))
        self.host = f"127.0.0.1:{self.server.server_port}"


def test_openid_client_private_key_jwt_with_a_jwks_uri(app, client, live_server, callback_server, node_rp):
    tenant, auth = _configured_tenant(app, client, callback_server.url + "/callback", "private_key_jwt")
    jwks = client.get(f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers).get_json()["data"]["jwks"]
    keys = _KeySetServer(jwks)
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={"jwks": None, "jwks_uri": f"http://{keys.host}/jwks.json"},
    )
    assert response.status_code == 200
    set_settings(live_server.app, OIDC_OUTBOUND_ALLOW_HOSTS=keys.host)
    try:
        result = node_rp(
            "client_credentials",
            {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "scope": "reports:write"},
        )
    finally:
        set_settings(live_server.app, OIDC_OUTBOUND_ALLOW_HOSTS="")
        keys.server.shutdown()
    assert result["ok"], result
    assert result["scope"] == "reports:write" and result["introspected"]["active"] is True


def _configured_tenant(app, client, redirect_uri: str, method: str, **settings) -> tuple[object, dict]:
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri])
    auth: dict = {"method": method, "secret": tenant.client_secret}
    members: dict = {
        "grant_types": ["client_credentials"],
        "client_credentials_scopes": ["reports:read", "reports:write"],
        **settings,
    }
    if method != "client_secret_basic":
        members["token_endpoint_auth_method"] = method
    if method == "private_key_jwt":
        key = ECKey.generate_key("P-256", private=True)
        kid = key.thumbprint()
        members["jwks"] = {"keys": [{**key.as_dict(private=False), "kid": kid, "alg": "ES256", "use": "sig"}]}
        auth = {"method": method, "privateJwk": {**key.as_dict(private=True), "kid": kid}}
    response = client.put(f"/v1/sub_client/{tenant.client_id}", json=members, headers=tenant.headers)
    assert response.status_code == 200, response.get_json()
    return tenant, auth


@pytest.mark.parametrize("par", [False, True])
def test_openid_client_request_objects(app, client, live_server, callback_server, node_rp, par):
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(app, client, redirect_uri, "client_secret_basic")
    key = ECKey.generate_key("P-256", private=True)
    kid = key.thumbprint()
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={
            "jwks": {"keys": [{**key.as_dict(private=False), "kid": kid, "alg": "ES256", "use": "sig"}]},
            "require_signed_request_object": True,
        },
    )
    assert response.status_code == 200, response.get_json()
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    started = node_rp(
        "start",
        {**common, "scope": "openid email", "par": par, "requestObjectJwk": {**key.as_dict(private=True), "kid": kid}},
    )
    assert started["ok"], started
    assert ("request_uri=urn" if par else "request=") in started["url"] and "redirect_uri" not in started["url"]
    callback = sign_in_over_http(requests.Session(), live_server.url, started["url"], tenant.email)
    assert callback.startswith(redirect_uri), callback
    finished = {"callbackUrl": callback, "verifier": started["verifier"], "state": started["state"],
                "nonce": started["nonce"]}  # fmt: skip
    result = node_rp("finish", {**common, **finished})
    assert result["ok"], result
    assert result["claims"]["sub"] == str(tenant.user_id) and result["userinfo"]["email"] == tenant.email


@pytest.mark.parametrize(
    ("method", "par"),
    [
        ("client_secret_basic", False),
        ("client_secret_post", True),
        ("client_secret_jwt", True),
        ("private_key_jwt", False),
    ],
)
def test_openid_client_code_flow_with_refresh_rotation(app, client, live_server, callback_server, node_rp, method, par):
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(app, client, redirect_uri, method, require_pushed_authorization_requests=par)
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    started = node_rp("start", {**common, "scope": "openid profile email offline_access", "par": par})
    assert started["ok"], started
    if par:
        assert "request_uri=urn" in started["url"] and "redirect_uri" not in started["url"]
    callback = sign_in_over_http(requests.Session(), live_server.url, started["url"], tenant.email)
    assert callback.startswith(redirect_uri)

    result = node_rp(
        "finish",
        {
            **common,
            "callbackUrl": callback,
            "verifier": started["verifier"],
            "state": started["state"],
            "nonce": started["nonce"],
        },
    )
    assert result["ok"], result
    assert result["claims"]["sub"] == str(tenant.user_id) and result["claims"]["sid"]
    assert result["userinfo"]["email"] == tenant.email
    assert result["refreshToken"] and result["rotated"]["refreshToken"] != result["refreshToken"]
    assert result["rotated"]["claims"]["sub"] == str(tenant.user_id)
    assert result["introspected"]["active"] is True
    # Reuse of the rotated token is refused, and revokes the family (the newer token too).
    assert result["reuse"]["error"] == "invalid_grant"
    assert result["afterReuse"]["error"] == "invalid_grant"


EMAIL_CODE, PASSKEY = "urn:tessera:acr:email-code", "urn:tessera:acr:passkey"


def test_openid_client_sees_the_acr_and_amr_of_the_sign_in(app, client, live_server, callback_server, node_rp):
    """acr_values are voluntary: a passkey preferred but not offered by the tenant, the e-mail code is
    what the id_token claims, with its amr and an auth_time openid-client checks against max_age."""
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(app, client, redirect_uri, "client_secret_basic")
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    extra = {"acr_values": f"{PASSKEY} {EMAIL_CODE}", "max_age": "600"}
    started = node_rp("start", {**common, "scope": "openid profile", "par": False, "extra": extra})
    assert started["ok"], started
    callback = sign_in_over_http(requests.Session(), live_server.url, started["url"], tenant.email)
    checks = {"verifier": started["verifier"], "state": started["state"], "nonce": started["nonce"], "maxAge": 600}
    result = node_rp("finish", {**common, "callbackUrl": callback, **checks})
    assert result["ok"], result
    assert result["claims"]["acr"] == EMAIL_CODE and result["claims"]["amr"] == ["otp"]
    assert isinstance(result["claims"]["auth_time"], int)


def test_openid_client_is_refused_an_essential_acr_the_tenant_cannot_meet(
    app, client, live_server, callback_server, node_rp
):
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(app, client, redirect_uri, "client_secret_basic")
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "email_code")
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    claims = json.dumps({"id_token": {"acr": {"essential": True, "values": [PASSKEY]}}})
    started = node_rp("start", {**common, "scope": "openid", "par": False, "extra": {"claims": claims}})
    assert started["ok"], started
    callback = requests.get(started["url"], allow_redirects=False, timeout=10).headers["Location"]
    assert callback.startswith(redirect_uri)
    checks = {"verifier": started["verifier"], "state": started["state"], "nonce": started["nonce"]}
    result = node_rp("finish", {**common, "callbackUrl": callback, **checks})
    assert not result["ok"] and result["error"] == "unmet_authentication_requirements", result


def test_openid_client_dpop_jarm_and_signed_userinfo(app, client, live_server, callback_server, node_rp):
    """openid-client with a DPoP key for every request, the response as a JARM JWT and the userinfo
    signed with ES256: it checks the proofs' nonces, the response and the userinfo JWT itself."""
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(app, client, redirect_uri, "client_secret_basic")
    signing = app.test_cli_runner().invoke(
        args=["clients", "set-userinfo-signing", str(tenant.client_id), "--alg", "ES256"]
    )
    assert signing.exit_code == 0, signing.output
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri,
              "metadata": {"userinfo_signed_response_alg": "ES256"}}  # fmt: skip
    started = node_rp("start", {**common, "scope": "openid email offline_access", "par": False, "responseMode": "jwt"})
    assert started["ok"], started
    callback = sign_in_over_http(requests.Session(), live_server.url, started["url"], tenant.email)
    assert callback.startswith(redirect_uri + "?response=")
    checks = {"verifier": started["verifier"], "state": started["state"], "nonce": started["nonce"]}
    result = node_rp("finish", {**common, **checks, "callbackUrl": callback, "dpop": True, "jarm": True})
    assert result["ok"], result
    assert result["tokenType"].lower() == "dpop" and result["rotated"]["tokenType"].lower() == "dpop"
    assert result["userinfo"]["email"] == tenant.email and result["userinfo"]["sub"] == str(tenant.user_id)
    payload = result["accessToken"].split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["cnf"]["jkt"]
    # Reuse of the rotated refresh token still revokes the family, with proofs too.
    assert result["reuse"]["error"] == "invalid_grant"


@pytest.mark.parametrize(
    "method", ["client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt"]
)
def test_openid_client_client_credentials(app, client, live_server, callback_server, node_rp, method):
    tenant, auth = _configured_tenant(app, client, callback_server.url + "/callback", method)
    result = node_rp(
        "client_credentials",
        {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "scope": "reports:read"},
    )
    assert result["ok"], result
    assert result["scope"] == "reports:read" and result["tokenType"].lower() == "bearer"
    assert result["introspected"]["active"] is True
    assert result["introspected"]["client_id"] == str(tenant.client_id)
    assert result["introspected"]["sub"] == f"client:{tenant.client_id}"
    assert result["introspected"]["subject_type"] == "client"
    assert result["afterRevocation"]["active"] is False


@pytest.fixture
def logout_receiver(app, live_server, real_worker):
    """The RP's backchannel_logout_uri on loopback, reachable through the outbound guard of the
    live server and of whichever process runs the jobs."""
    receiver = LogoutReceiver()
    for flask_app in (app, live_server.app):
        set_settings(flask_app, OIDC_OUTBOUND_ALLOW_HOSTS=receiver.host)
    if USING_POSTGRES:
        real_worker.stop()
        # The worker signs the logout tokens: it must name the live server as their issuer.
        real_worker.start(extra_env={"OIDC_OUTBOUND_ALLOW_HOSTS": receiver.host, "OIDC_ISSUER": live_server.url})
    yield receiver
    for flask_app in (app, live_server.app):
        set_settings(flask_app, OIDC_OUTBOUND_ALLOW_HOSTS="")
    receiver.server.shutdown()
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start()


def test_openid_client_back_channel_logout(app, client, live_server, callback_server, node_rp, logout_receiver):
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(
        app, client, redirect_uri, "client_secret_basic", backchannel_logout_uri=logout_receiver.url
    )
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    started = node_rp("start", {**common, "scope": "openid profile", "par": False})
    assert started["ok"], started
    browser = requests.Session()
    callback = sign_in_over_http(browser, live_server.url, started["url"], tenant.email)
    signed_in = node_rp(
        "finish",
        {
            **common,
            "callbackUrl": callback,
            "verifier": started["verifier"],
            "state": started["state"],
            "nonce": started["nonce"],
        },
    )
    assert signed_in["ok"], signed_in
    sid = signed_in["claims"]["sid"]
    assert sid and logout_receiver.tokens == []

    ending = node_rp("end_session", {**common, "idToken": signed_in["idToken"]})
    assert ending["ok"] and ending["url"].startswith(live_server.url + "/v1/openidc/logout?"), ending
    assert browser.get(ending["url"], allow_redirects=False, timeout=10).status_code in (200, 303)

    (logout_token,) = logout_receiver.wait_for(1)
    validated = node_rp("backchannel_logout", {**common, "logoutToken": logout_token})
    assert validated["ok"], validated
    assert validated["header"]["typ"] == "logout+jwt"
    assert validated["claims"]["sid"] == sid
    assert validated["claims"]["sub"] == signed_in["claims"]["sub"] == str(tenant.user_id)
    # The RP refuses a token that is not for it.
    foreign = node_rp("backchannel_logout", {**common, "clientId": "999999", "logoutToken": logout_token})
    assert not foreign["ok"] and "aud" in foreign["message"], foreign


def test_openid_client_device_authorization_grant(app, client, live_server, callback_server, node_rp):
    tenant, auth = _configured_tenant(
        app, client, callback_server.url + "/callback", "client_secret_basic",
        grant_types=["urn:ietf:params:oauth:grant-type:device_code"],
    )  # fmt: skip
    # Every test enters user codes from 127.0.0.1, whose limit is tested on its own.
    set_settings(live_server.app, OIDC_DEVICE_POLL_INTERVAL=1, OIDC_DEVICE_USER_CODE_ATTEMPTS=100000)
    try:
        common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth}
        started = node_rp("device_start", {**common, "scope": "openid email offline_access"})
        assert started["ok"], started
        response = started["response"]
        assert response["interval"] == 1 and response["verification_uri"] == live_server.url + "/v1/openidc/device"
        done = approve_device_over_http(
            requests.Session(), live_server.url, response["verification_uri_complete"], tenant.email
        )
        assert "result=approved" in done
        result = node_rp("device_poll", {**common, "response": response})
    finally:
        set_settings(live_server.app, OIDC_DEVICE_POLL_INTERVAL=5, OIDC_DEVICE_USER_CODE_ATTEMPTS=10)
    assert result["ok"], result
    assert result["claims"]["sub"] == str(tenant.user_id) and result["claims"]["aud"] == str(tenant.client_id)
    assert result["userinfo"]["email"] == tenant.email and result["refreshToken"]


def test_openid_client_with_pairwise_subjects(app, client, live_server, callback_server, node_rp):
    redirect_uri = callback_server.url + "/callback"
    tenant, auth = _configured_tenant(app, client, redirect_uri, "client_secret_basic")
    made = app.test_cli_runner().invoke(args=["clients", "set-subject", str(tenant.client_id), "pairwise"])
    assert made.exit_code == 0, made.output
    common = {"issuer": live_server.url, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    started = node_rp("start", {**common, "scope": "openid email"})
    callback = sign_in_over_http(requests.Session(), live_server.url, started["url"], tenant.email)
    result = node_rp(
        "finish",
        {**common, "callbackUrl": callback, "verifier": started["verifier"], "state": started["state"],
         "nonce": started["nonce"]},
    )  # fmt: skip
    # openid-client checks that userinfo names the id_token's subject.
    assert result["ok"], result
    assert result["claims"]["sub"] != str(tenant.user_id) and "user_id" not in result["claims"]
    assert result["userinfo"]["sub"] == result["claims"]["sub"] and result["userinfo"]["email"] == tenant.email
