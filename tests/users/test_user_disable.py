"""`flask users disable`: a disabled user cannot sign in, and their codes, refresh tokens and access
tokens stop working (through the CLI and the OpenID HTTP surface)."""

from __future__ import annotations

import pytest

from tests.support.oidc import authorize_query, exchange, form_fields, make_tenant, path_of, sign_in


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()

    def run(*args: str, expect: int = 0):
        result = runner.invoke(args=["users", *args])
        assert result.exit_code == expect, (result.output, result.exception)
        return result

    return run


def _introspect(http, tenant, token: str) -> dict:
    response = http.post(
        "/v1/openidc/introspect", data={"token": token}, auth=(str(tenant.client_id), tenant.client_secret)
    )
    assert response.status_code == 200
    return response.get_json()


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


def _outbox_size(http, email: str) -> int:
    return len(http.get("/dev/outbox", query_string={"to": email}).get_json()["data"])


def test_a_disabled_user_loses_tokens_codes_and_sign_in(app, client, cli):
    tenant = make_tenant(app, client)
    bystander = make_tenant(app, client, name="Bystander")
    tokens = exchange(client, tenant, sign_in(client, tenant, scope="openid profile offline_access")["code"]).get_json()
    assert "refresh_token" in tokens
    pending_code = sign_in(client, tenant)["code"]  # through the browser's single sign-on session
    kept = exchange(client, bystander, sign_in(client, bystander, scope="openid offline_access")["code"]).get_json()

    output = cli("disable", tenant.email.upper()).output
    assert f"Disabled user {tenant.user_id}" in output and "1 sign-in session(s) ended" in output

    refreshed = _refresh(client, tenant, tokens["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.get_json()["error"] == "invalid_grant"
    userinfo = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert userinfo.status_code == 401
    assert _introspect(client, tenant, tokens["access_token"]) == {"active": False}
    assert _introspect(client, tenant, tokens["refresh_token"]) == {"active": False}
    late = exchange(client, tenant, pending_code)
    assert late.status_code == 400 and late.get_json()["error"] == "invalid_grant"

    # The single sign-on session has ended, and a new sign-in mails no code.
    response = client.get(authorize_query(tenant))
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    before = _outbox_size(client, tenant.email)
    fields = form_fields(client.get(path_of(response.headers["Location"])).get_data(as_text=True))
    page = client.post("/v1/openidc/login", data={**fields, "email": tenant.email})
    assert page.status_code == 200
    assert _outbox_size(client, tenant.email) == before

    # Other users are untouched; a second disable changes nothing.
    assert _refresh(client, bystander, kept["refresh_token"]).status_code == 200
    assert "Already disabled" in cli("disable", str(tenant.user_id)).output

    # Enabled again, the user signs in anew; the tokens and sessions the disable ended stay ended.
    assert f"Enabled: user {tenant.user_id}" in cli("enable", tenant.email).output
    assert "Not disabled" in cli("enable", str(tenant.user_id)).output
    fresh = exchange(client, tenant, sign_in(client, tenant)["code"])
    assert fresh.status_code == 200
    assert _refresh(client, tenant, tokens["refresh_token"]).status_code == 400
    assert _introspect(client, tenant, tokens["access_token"]) == {"active": False}


def test_a_code_mailed_before_the_user_was_disabled_does_not_sign_in(app, client, cli):
    from tests.support.oidc import latest_code

    tenant = make_tenant(app, client)
    response = client.get(authorize_query(tenant))
    fields = form_fields(client.get(path_of(response.headers["Location"])).get_data(as_text=True))
    page = client.post("/v1/openidc/login", data={**fields, "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    code = latest_code(client, tenant.email)
    cli("disable", str(tenant.user_id))
    answer = client.post("/v1/openidc/login/code", data={**fields, "code": code})
    assert answer.status_code != 303 and "not right" in answer.get_data(as_text=True)


def test_disable_refuses_unknown_and_ambiguous_users(app, client, cli):
    tenant = make_tenant(app, client)
    other = make_tenant(app, client, name="Other tree")
    created = client.post(
        "/v1/user/create",
        headers={"x-api-token": other.api_token},
        json={"profile": {**tenant.profile, "user_name": "twin"}},
    )
    assert created.status_code == 201, created.get_json()
    twin = created.get_json()["data"]["user_id"]

    ambiguous = cli("disable", tenant.email, expect=1).output
    assert f"ids {tenant.user_id}, {twin}" in ambiguous
    assert "No user" in cli("disable", "2147483000", expect=1).output
    assert "No user" in cli("disable", "nobody@example.org", expect=1).output
    # Nothing was disabled by the refusals: the user still signs in.
    assert "code" in sign_in(client, tenant)
