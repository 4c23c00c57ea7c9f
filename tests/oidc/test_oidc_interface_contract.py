"""The interface's contract around the gate: grants per client, PKCE per client, machine subjects,
the e-mail credential under the gate, logout ending refresh tokens, and invalid_client answers
that say nothing to a stranger (issue: the interface's contract, exactly)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.support.oidc import authorize_query, exchange, make_tenant, pkce_pair, query_of, sign_in


def _claims_of(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _configure(http, tenant, **members) -> dict:
    response = http.put(f"/v1/sub_client/{tenant.client_id}", json=members, headers=tenant.headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()["data"]


def _machine_token(http, tenant, **extra):
    return http.post(
        "/v1/openidc/token",
        data={"grant_type": "client_credentials", **extra},
        auth=(str(tenant.client_id), tenant.client_secret),
    )


def _refresh(http, tenant, refresh_token: str):
    return http.post(
        "/v1/openidc/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )


def test_client_credentials_only_for_a_client_that_enables_it(app, client):
    tenant = make_tenant(app, client)
    assert client.get(f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers).get_json()["data"][
        "grant_types"
    ] == ["authorization_code", "refresh_token"]
    refused = _machine_token(client, tenant)
    assert refused.status_code == 400 and refused.get_json()["error"] == "unauthorized_client"
    # A stranger learns nothing about the grant: authentication comes first.
    stranger = client.post(
        "/v1/openidc/token", data={"grant_type": "client_credentials"}, auth=(str(tenant.client_id), "not-the-secret")
    )
    assert stranger.status_code == 401 and stranger.get_json()["error"] == "invalid_client"

    settings = _configure(client, tenant, grant_types=["client_credentials"], client_credentials_scopes=["a:read"])
    assert settings["grant_types"] == ["authorization_code", "refresh_token", "client_credentials"]
    granted = _machine_token(client, tenant)
    assert granted.status_code == 200, granted.get_json()
    # The code flow is never taken away by the setting.
    assert exchange(client, tenant, sign_in(client, tenant, scope="openid")["code"]).status_code == 200

    _configure(client, tenant, grant_types=["authorization_code"])
    assert _machine_token(client, tenant).get_json()["error"] == "unauthorized_client"
    unknown = client.put(
        f"/v1/sub_client/{tenant.client_id}", json={"grant_types": ["password"]}, headers=tenant.headers
    )
    assert unknown.status_code == 422 and "grant_types.0" in unknown.get_json()["errors"]


def test_the_operator_sets_what_a_client_may_receive_and_use(app, client):
    tenant = make_tenant(app, client)
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=[
            "clients",
            "set-release",
            str(tenant.client_id),
            "--id-token-claim",
            "edu_mail=email_address",
            "--no-reads-credentials",
            "--grant-type",
            "client_credentials",
            "--require-pkce",
        ]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "client_id": tenant.client_id,
        "id_token_claims": {"edu_mail": "email_address"},
        "reads_credentials": False,
        "grant_types": ["authorization_code", "refresh_token", "client_credentials"],
        "require_pkce": True,
    }
    data = client.get(f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers).get_json()["data"]
    assert data["id_token_claims"] == {"edu_mail": "email_address"} and data["reads_credentials"] is False
    assert data["require_pkce"] is True
    nothing = runner.invoke(args=["clients", "set-release", str(tenant.client_id)])
    assert nothing.exit_code == 2 and "Nothing to change" in nothing.output
    missing = runner.invoke(args=["clients", "set-release", "999999999", "--require-pkce"])
    assert missing.exit_code == 1 and "No client 999999999" in missing.output
    created = runner.invoke(args=["clients", "create-master", "--name", "No lists", "--no-reads-credentials", "--json"])
    assert created.exit_code == 0, created.output


def test_a_client_may_require_pkce(app, client):
    tenant = make_tenant(app, client)
    _configure(client, tenant, require_pkce=True)
    refused = client.get(authorize_query(tenant, scope="openid"))
    assert refused.status_code == 302
    error = query_of(refused.headers["Location"])
    assert refused.headers["Location"].startswith(tenant.redirect_uri)
    assert error["error"] == "invalid_request" and "PKCE" in error["error_description"]
    verifier, challenge = pkce_pair()
    code = sign_in(client, tenant, scope="openid", code_challenge=challenge, code_challenge_method="S256")["code"]
    assert exchange(client, tenant, code, code_verifier=verifier).status_code == 200


def test_a_machine_token_never_looks_like_a_user_token(app, client):
    tenant = make_tenant(app, client)
    _configure(client, tenant, grant_types=["client_credentials"], client_credentials_scopes=["a:read"])
    machine = _machine_token(client, tenant).get_json()["access_token"]
    user = exchange(client, tenant, sign_in(client, tenant, scope="openid")["code"]).get_json()["access_token"]
    auth = (str(tenant.client_id), tenant.client_secret)
    machine_seen = client.post("/v1/openidc/introspect", data={"token": machine}, auth=auth).get_json()
    user_seen = client.post("/v1/openidc/introspect", data={"token": user}, auth=auth).get_json()
    assert machine_seen["subject_type"] == "client" and user_seen["subject_type"] == "user"
    assert machine_seen["sub"] == f"client:{tenant.client_id}" and user_seen["sub"] == str(tenant.user_id)
    assert not machine_seen["sub"].isdigit()


def test_the_email_credential_follows_the_gate(app, client):
    tenant = make_tenant(app, client)
    without = exchange(client, tenant, sign_in(client, tenant, scope="openid")["code"]).get_json()["access_token"]
    bearer = {"Authorization": f"Bearer {without}"}
    refused = client.post(f"/v1/user/{tenant.user_id}/credentials/email", headers=bearer)
    assert refused.status_code == 403 and refused.get_json()["code"] == "insufficient_scope"
    assert "email" not in client.get("/v1/openidc/user", headers=bearer).get_json()
    with_email = exchange(client, tenant, sign_in(client, tenant, scope="openid email")["code"]).get_json()
    bearer = {"Authorization": f"Bearer {with_email['access_token']}"}
    issued = client.post(f"/v1/user/{tenant.user_id}/credentials/email", headers=bearer)
    assert issued.status_code == 201, issued.get_json()
    assert issued.get_json()["verifiableCredential"]["credentialSubject"]["email"] == tenant.email


@pytest.mark.parametrize("offline", [False, True])
def test_logout_ends_the_session_refresh_tokens(app, client, offline):
    tenant = make_tenant(app, client)
    _configure(client, tenant, issue_refresh_tokens=True)
    scope = "openid offline_access" if offline else "openid"
    issued = exchange(client, tenant, sign_in(client, tenant, scope=scope)["code"]).get_json()
    sid = _claims_of(issued["id_token"])["sid"]
    rotated = _refresh(client, tenant, issued["refresh_token"]).get_json()
    assert _claims_of(rotated["id_token"])["sid"] == sid

    logout = client.get("/v1/openidc/logout", query_string={"id_token_hint": issued["id_token"]})
    assert logout.status_code in (200, 303)
    after = _refresh(client, tenant, rotated["refresh_token"])
    if not offline:
        assert after.status_code == 400 and after.get_json()["error"] == "invalid_grant"
        assert (
            client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {rotated['access_token']}"}).status_code
            == 401
        )
    else:
        # Offline access outlives the session, but no id_token names the ended session.
        assert after.status_code == 200, after.get_json()
        assert "sid" not in _claims_of(after.get_json()["id_token"])


def test_invalid_client_challenges_only_a_basic_request_and_says_nothing_to_a_stranger(app, client):
    tenant = make_tenant(app, client)
    code = sign_in(client, tenant, scope="openid")["code"]
    base = {"grant_type": "authorization_code", "code": code, "redirect_uri": tenant.redirect_uri}
    basic = client.post("/v1/openidc/token", data=base, auth=(str(tenant.client_id), "wrong"))
    assert basic.status_code == 401 and basic.headers["WWW-Authenticate"].startswith("Basic")
    posted = client.post(
        "/v1/openidc/token", data={**base, "client_id": str(tenant.client_id), "client_secret": "wrong"}
    )
    assert posted.status_code == 401 and "WWW-Authenticate" not in posted.headers
    assert posted.get_json() == {"error": "invalid_client", "error_description": "Client authentication failed."}
    unknown = client.post("/v1/openidc/token", data={**base, "client_id": "999999999", "client_secret": "wrong"})
    assert unknown.get_json() == posted.get_json() and unknown.status_code == 401

    # An assertion for an existing client of another method, and for no client: the same answer.
    forged = (
        "eyJhbGciOiJIUzI1NiJ9."
        + base64.urlsafe_b64encode(
            json.dumps(
                {
                    "iss": str(tenant.client_id),
                    "sub": str(tenant.client_id),
                    "aud": "x",
                    "exp": 9999999999,
                    "jti": "j",
                }
            ).encode()
        )
        .decode()
        .rstrip("=")
        + ".c2ln"
    )
    assertion = {"client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}
    existing = client.post("/v1/openidc/token", data={**base, **assertion, "client_assertion": forged})
    assert existing.status_code == 401 and "WWW-Authenticate" not in existing.headers
    assert existing.get_json() == posted.get_json()
    stranger_claims = {"iss": "999999999", "sub": "999999999", "aud": "x", "exp": 9999999999, "jti": "j"}
    stranger = (
        "eyJhbGciOiJIUzI1NiJ9."
        + base64.urlsafe_b64encode(json.dumps(stranger_claims).encode()).decode().rstrip("=")
        + ".c2ln"
    )
    answered = client.post("/v1/openidc/token", data={**base, **assertion, "client_assertion": stranger})
    assert answered.get_json() == existing.get_json() and answered.status_code == 401
    # None of it consumed the code.
    assert exchange(client, tenant, code).status_code == 200
