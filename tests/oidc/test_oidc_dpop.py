"""DPoP (RFC 9449) through the real endpoints: proofs at the token endpoint (every grant), server
nonces, `token_type: DPoP` with `cnf.jkt` in the access token and introspection, DPoP-bound tokens
at userinfo and the credential list (and refused as Bearer), clients that require DPoP, codes bound
to a key by `dpop_jkt`, and the operator's switch."""

from __future__ import annotations

import base64
import json
import time

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from app.db import transaction
from app.extensions import db
from app.tenancy.models import Client
from tests.support.config import change_settings
from tests.support.dpop import PUBLIC_URL, TOKEN_URL, Holder
from tests.support.oidc import authorize_query, exchange, query_of, sign_in

USERINFO_URL = f"{PUBLIC_URL}/v1/openidc/user"
CREDENTIALS_URL = f"{PUBLIC_URL}/v1/openidc/credentials"


def _claims(token: str) -> dict:
    segment = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def _token_request(http, holder: Holder, body: dict, *, proof: str | None = None):
    """POST the token request with a proof; a first `use_dpop_nonce` answer is retried with its nonce."""
    response = http.post("/v1/openidc/token", data=body, headers={"DPoP": proof or holder.proof(TOKEN_URL)})
    if proof is None and response.status_code == 400 and response.get_json()["error"] == "use_dpop_nonce":
        holder.nonce = response.headers["DPoP-Nonce"]
        response = http.post("/v1/openidc/token", data=body, headers={"DPoP": holder.proof(TOKEN_URL)})
    return response


def _code_body(tenant, code: str, **extra) -> dict:
    return {"grant_type": "authorization_code", "code": code, "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret, "redirect_uri": tenant.redirect_uri, **extra}  # fmt: skip


def _bound_tokens(http, tenant, holder: Holder, scope: str = "openid") -> dict:
    code = sign_in(http, tenant, scope=scope)["code"]
    response = _token_request(http, holder, _code_body(tenant, code))
    assert response.status_code == 200, response.get_json()
    holder.nonce = response.headers["DPoP-Nonce"]  # a client keeps the newest nonce it was given
    return response.get_json()


def _userinfo(http, holder: Holder, access_token: str, *, scheme: str = "DPoP", proof: str | None = None):
    headers = {"Authorization": f"{scheme} {access_token}"}
    if scheme == "DPoP":
        headers["DPoP"] = proof or holder.proof(USERINFO_URL, htm="GET", access_token=access_token)
    return http.get("/v1/openidc/user", headers=headers)


def _set_client(app, client_id: int, **values) -> None:
    with app.app_context(), transaction():
        client = db.session.get(Client, client_id)
        for name, value in values.items():
            setattr(client, name, value)


def _challenge(response) -> str:
    return response.headers["WWW-Authenticate"]


def test_discovery_advertises_dpop_and_the_operator_turns_it_off(app, client, monkeypatch):
    document = client.get("/.well-known/openid-configuration").get_json()
    assert document["dpop_signing_alg_values_supported"] == ["ES256", "ES384", "PS256", "RS256", "EdDSA"]
    change_settings(monkeypatch, app, OIDC_DPOP_ENABLED=False)
    assert "dpop_signing_alg_values_supported" not in client.get("/.well-known/openid-configuration").get_json()


def test_a_code_exchange_with_a_proof_issues_a_token_bound_to_its_key(client, tenant):
    holder = Holder()
    first = client.post("/v1/openidc/token", data=_code_body(tenant, sign_in(client, tenant)["code"]),
                        headers={"DPoP": holder.proof(TOKEN_URL)})  # fmt: skip
    assert first.status_code == 400 and first.get_json()["error"] == "use_dpop_nonce"
    assert first.headers["DPoP-Nonce"] and first.headers["Cache-Control"] == "no-store"
    issued = _bound_tokens(client, tenant, holder)
    assert issued["token_type"] == "DPoP"
    assert _claims(issued["access_token"])["cnf"] == {"jkt": holder.jkt}
    introspected = client.post(
        "/v1/openidc/introspect",
        data={"token": issued["access_token"]},
        auth=(str(tenant.client_id), tenant.client_secret),
    ).get_json()
    assert introspected["active"] is True
    assert introspected["token_type"] == "DPoP" and introspected["cnf"] == {"jkt": holder.jkt}


def test_an_exchange_without_a_proof_stays_bearer(client, tenant):
    issued = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()
    assert issued["token_type"] == "Bearer" and "cnf" not in _claims(issued["access_token"])
    introspected = client.post(
        "/v1/openidc/introspect",
        data={"token": issued["access_token"]},
        auth=(str(tenant.client_id), tenant.client_secret),
    ).get_json()
    assert introspected["token_type"] == "Bearer" and "cnf" not in introspected


@pytest.mark.parametrize(
    "name, make",
    [
        ("typ", lambda h: h.proof(TOKEN_URL, header={"typ": "JWT"})),
        ("htm", lambda h: h.proof(TOKEN_URL, htm="GET")),
        ("htu", lambda h: h.proof(f"{PUBLIC_URL}/v1/openidc/par")),
        ("htu of the Host sent", lambda h: h.proof("http://localhost/v1/openidc/token")),
        ("iat stale", lambda h: h.proof(TOKEN_URL, iat=int(time.time()) - 3600)),
        ("iat ahead", lambda h: h.proof(TOKEN_URL, iat=int(time.time()) + 3600)),
        ("no jti", lambda h: h.proof(TOKEN_URL, jti=None)),
        ("signature", lambda h: h.proof(TOKEN_URL)[:-4] + "AAAA"),
        ("jwk of another key", lambda h: h.proof(TOKEN_URL, header={"jwk": Holder().key.as_dict(private=False)})),
        ("private jwk", lambda h: h.proof(TOKEN_URL, header={"jwk": h.key.as_dict(private=True)})),
        ("not a JWT", lambda _h: "not-a-proof"),
        (
            "symmetric alg",
            lambda _h: jwt.encode(
                {"typ": "dpop+jwt", "alg": "HS256", "jwk": {"kty": "oct", "k": "c2VjcmV0"}},
                {"jti": "x", "htm": "POST", "htu": TOKEN_URL, "iat": int(time.time())},
                OctKey.import_key("secret-secret-secret-secret-secret"),
                algorithms=["HS256"],
            ),
        ),
    ],
)
def test_a_token_request_with_a_bad_proof_is_refused_and_spends_nothing(client, tenant, name, make):
    holder = Holder()
    _bound_tokens(client, tenant, holder)  # holds a current nonce now
    code = sign_in(client, tenant)["code"]
    refused = client.post("/v1/openidc/token", data=_code_body(tenant, code), headers={"DPoP": make(holder)})
    assert refused.status_code == 400, name
    assert refused.get_json()["error"] == "invalid_dpop_proof", (name, refused.get_json())
    assert _token_request(client, holder, _code_body(tenant, code)).status_code == 200, name


def test_a_proof_for_the_host_the_caller_sent_is_not_a_proof_for_this_server(client, tenant):
    """`htu` is compared with the endpoint's public URL (under `BASE_URL`), never one built from the
    request's `Host`, which the caller chooses."""
    holder = Holder()
    tokens = _bound_tokens(client, tenant, holder)
    evil = {"Host": "evil.example"}
    code = sign_in(client, tenant)["code"]
    refused = client.post("/v1/openidc/token", data=_code_body(tenant, code),
                          headers={**evil, "DPoP": holder.proof("http://evil.example/v1/openidc/token")})  # fmt: skip
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_dpop_proof", refused.get_json()
    assert "htu" in refused.get_json()["error_description"]

    access_token = tokens["access_token"]
    proof = holder.proof("http://evil.example/v1/openidc/user", htm="GET", access_token=access_token)
    resource = client.get("/v1/openidc/user", headers={**evil, "Authorization": f"DPoP {access_token}", "DPoP": proof})
    assert resource.status_code == 401 and 'error="invalid_dpop_proof"' in _challenge(resource)
    assert _userinfo(client, holder, access_token).status_code == 200


def test_a_proof_with_a_foreign_or_stale_nonce_asks_for_the_current_one(client, tenant):
    holder = Holder()
    _bound_tokens(client, tenant, holder)
    for nonce in ("12.forged", f"{int(time.time()) // 300 - 5}.{'0' * 32}", None):
        code = sign_in(client, tenant)["code"]
        refused = client.post(
            "/v1/openidc/token", data=_code_body(tenant, code), headers={"DPoP": holder.proof(TOKEN_URL, nonce=nonce)}
        )
        assert refused.status_code == 400 and refused.get_json()["error"] == "use_dpop_nonce", nonce
        assert refused.headers["DPoP-Nonce"] not in ("", nonce)


def test_a_replayed_proof_is_refused_and_rolls_the_exchange_back(client, tenant):
    holder = Holder()
    _bound_tokens(client, tenant, holder)
    proof = holder.proof(TOKEN_URL)
    first = client.post("/v1/openidc/token", data=_code_body(tenant, sign_in(client, tenant)["code"]),
                        headers={"DPoP": proof})  # fmt: skip
    assert first.status_code == 200
    code = sign_in(client, tenant)["code"]
    replayed = client.post("/v1/openidc/token", data=_code_body(tenant, code), headers={"DPoP": proof})
    assert replayed.status_code == 400 and replayed.get_json()["error"] == "invalid_dpop_proof"
    assert "already used" in replayed.get_json()["error_description"]
    assert _token_request(client, holder, _code_body(tenant, code)).status_code == 200


def test_two_dpop_headers_are_refused(client, tenant):
    holder = Holder()
    _bound_tokens(client, tenant, holder)
    refused = client.post(
        "/v1/openidc/token",
        data=_code_body(tenant, sign_in(client, tenant)["code"]),
        headers=[("DPoP", holder.proof(TOKEN_URL)), ("DPoP", holder.proof(TOKEN_URL))],
    )
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_dpop_proof"


def test_userinfo_and_the_credential_list_take_a_bound_token_with_a_proof(client, tenant):
    holder = Holder(RSAKey.generate_key(2048), alg="PS256")
    token = _bound_tokens(client, tenant, holder)["access_token"]
    answer = _userinfo(client, holder, token)
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["user_id"] == tenant.user_id
    listed = client.get(
        "/v1/openidc/credentials",
        headers={
            "Authorization": f"DPoP {token}",
            "DPoP": holder.proof(CREDENTIALS_URL, htm="GET", access_token=token),
        },
    )
    assert listed.status_code == 200, listed.get_json()
    assert listed.get_json() == {"data": []}


def test_a_bound_token_is_refused_as_bearer_and_without_a_good_proof(client, tenant):
    holder = Holder()
    token = _bound_tokens(client, tenant, holder)["access_token"]
    as_bearer = _userinfo(client, holder, token, scheme="Bearer")
    assert as_bearer.status_code == 401 and as_bearer.get_json()["code"] == "invalid_token"
    assert _challenge(as_bearer).startswith('DPoP realm="tessera", error="invalid_token"')
    assert 'algs="ES256 ES384 PS256 RS256 EdDSA"' in _challenge(as_bearer)
    refusals = {
        "no proof": client.get("/v1/openidc/user", headers={"Authorization": f"DPoP {token}"}),
        "no ath": _userinfo(client, holder, token, proof=holder.proof(USERINFO_URL, htm="GET")),
        "ath of another token": _userinfo(
            client, holder, token, proof=holder.proof(USERINFO_URL, htm="GET", access_token=token + "x")
        ),
        "another key": _userinfo(
            client, holder, token, proof=Holder().proof(USERINFO_URL, htm="GET", access_token=token, nonce=holder.nonce)
        ),
        "another endpoint": _userinfo(
            client, holder, token, proof=holder.proof(CREDENTIALS_URL, htm="GET", access_token=token)
        ),
        "another method": _userinfo(client, holder, token, proof=holder.proof(USERINFO_URL, access_token=token)),
    }
    for name, refused in refusals.items():
        assert refused.status_code == 401, name
        assert refused.get_json()["code"] == "invalid_dpop_proof", (name, refused.get_json())
        assert _challenge(refused).startswith('DPoP realm="tessera", error="invalid_dpop_proof"'), name
    proof = holder.proof(USERINFO_URL, htm="GET", access_token=token)
    assert _userinfo(client, holder, token, proof=proof).status_code == 200
    replayed = _userinfo(client, holder, token, proof=proof)
    assert replayed.status_code == 401 and replayed.get_json()["code"] == "invalid_dpop_proof"


def test_a_resource_asks_for_the_current_nonce(client, tenant):
    holder = Holder()
    token = _bound_tokens(client, tenant, holder)["access_token"]
    stale = holder.proof(USERINFO_URL, htm="GET", access_token=token, nonce="1.stale")
    refused = _userinfo(client, holder, token, proof=stale)
    assert refused.status_code == 401 and refused.get_json()["code"] == "use_dpop_nonce"
    assert _challenge(refused).startswith('DPoP realm="tessera", error="use_dpop_nonce"')
    holder.nonce = refused.headers["DPoP-Nonce"]
    assert _userinfo(client, holder, token).status_code == 200


def test_a_bearer_token_is_refused_under_the_dpop_scheme(client, tenant):
    holder = Holder()
    token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["access_token"]
    refused = _userinfo(client, holder, token)
    assert refused.status_code == 401 and refused.get_json()["code"] == "invalid_token"
    assert _challenge(refused).startswith('DPoP realm="tessera", error="invalid_token"')
    assert client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_a_refresh_with_a_proof_binds_the_new_access_token(client, tenant):
    holder = Holder()
    issued = _bound_tokens(client, tenant, holder, scope="openid offline_access")
    body = {"grant_type": "refresh_token", "refresh_token": issued["refresh_token"],
            "client_id": str(tenant.client_id), "client_secret": tenant.client_secret}  # fmt: skip
    rotated = _token_request(client, holder, body)
    assert rotated.status_code == 200, rotated.get_json()
    assert rotated.get_json()["token_type"] == "DPoP"
    assert _claims(rotated.get_json()["access_token"])["cnf"] == {"jkt": holder.jkt}
    assert _userinfo(client, holder, rotated.get_json()["access_token"]).status_code == 200


def test_client_credentials_with_a_proof(app, client, tenant):
    _set_client(app, tenant.client_id, grant_types=["client_credentials"], client_credentials_scopes=["reports.read"])
    holder = Holder()
    body = {
        "grant_type": "client_credentials",
        "client_id": str(tenant.client_id),
        "client_secret": tenant.client_secret,
    }
    issued = _token_request(client, holder, body)
    assert issued.status_code == 200, issued.get_json()
    assert issued.get_json()["token_type"] == "DPoP"
    assert _claims(issued.get_json()["access_token"])["cnf"] == {"jkt": holder.jkt}


def _set_dpop(app, client_id: int, option: str) -> dict:
    result = app.test_cli_runner().invoke(args=["clients", "set-dpop", str(client_id), option])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_client_that_requires_dpop_is_refused_bearer_requests(app, client, tenant):
    assert _set_dpop(app, tenant.client_id, "--bound-access-tokens") == {
        "client_id": tenant.client_id,
        "dpop_bound_access_tokens": True,
    }
    for _ in range(2):  # both doors: the hot route's statement refuses too
        refused = exchange(client, tenant, sign_in(client, tenant)["code"])
        assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_dpop_proof"
    _set_client(app, tenant.client_id, grant_types=["client_credentials"], client_credentials_scopes=["a"])
    body = {
        "grant_type": "client_credentials",
        "client_id": str(tenant.client_id),
        "client_secret": tenant.client_secret,
    }
    assert client.post("/v1/openidc/token", data=body).get_json()["error"] == "invalid_dpop_proof"
    assert _bound_tokens(client, tenant, Holder())["token_type"] == "DPoP"
    _set_dpop(app, tenant.client_id, "--any-access-tokens")
    assert exchange(client, tenant, sign_in(client, tenant)["code"]).status_code == 200


def test_with_dpop_off_a_proof_is_ignored_but_bound_tokens_stay_bound(app, client, tenant, monkeypatch):
    holder = Holder()
    bound = _bound_tokens(client, tenant, holder)["access_token"]
    change_settings(monkeypatch, app, OIDC_DPOP_ENABLED=False)
    code = sign_in(client, tenant)["code"]
    issued = client.post("/v1/openidc/token", data=_code_body(tenant, code), headers={"DPoP": holder.proof(TOKEN_URL)})
    assert issued.status_code == 200 and issued.get_json()["token_type"] == "Bearer"
    assert "DPoP-Nonce" not in issued.headers
    assert _userinfo(client, holder, bound, scheme="Bearer").status_code == 401
    assert _userinfo(client, holder, bound).status_code == 200


def test_without_server_nonces_a_proof_needs_none(app, client, tenant, monkeypatch):
    change_settings(monkeypatch, app, OIDC_DPOP_NONCE=False)
    holder = Holder()
    code = sign_in(client, tenant)["code"]
    issued = client.post("/v1/openidc/token", data=_code_body(tenant, code), headers={"DPoP": holder.proof(TOKEN_URL)})
    assert issued.status_code == 200 and issued.get_json()["token_type"] == "DPoP"
    assert "DPoP-Nonce" not in issued.headers
    token = issued.get_json()["access_token"]
    assert _userinfo(client, holder, token).status_code == 200


@pytest.mark.parametrize("through", ["the sign-in pages", "a pushed request"])
def test_a_code_bound_by_dpop_jkt_is_redeemed_only_with_a_proof_of_that_key(app, client, tenant, through):
    holder, stranger = Holder(), Holder()
    _bound_tokens(client, tenant, holder)  # holds a current nonce now
    stranger.nonce = holder.nonce
    browser = app.test_client()  # signs in afresh: the request row carries dpop_jkt to the code
    if through == "a pushed request":
        pushed = client.post(
            "/v1/openidc/par",
            data={
                "response_type": "code",
                "client_id": str(tenant.client_id),
                "redirect_uri": tenant.redirect_uri,
                "scope": "openid",
                "dpop_jkt": holder.jkt,
            },  # fmt: skip
            auth=(str(tenant.client_id), tenant.client_secret),
        )
        assert pushed.status_code == 201, pushed.get_json()
        # The pushed parameters replace whatever else the authorization request carries.
        code = sign_in(browser, tenant, request_uri=pushed.get_json()["request_uri"])["code"]
    else:
        code = sign_in(browser, tenant, dpop_jkt=holder.jkt)["code"]
    for refused in (
        exchange(client, tenant, code),
        exchange(client, tenant, code),  # the first exchange of a process may be the view's, the next the hot route's
        client.post("/v1/openidc/token", data=_code_body(tenant, code), headers={"DPoP": stranger.proof(TOKEN_URL)}),
    ):
        assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_grant", refused.get_json()
        assert "dpop_jkt" in refused.get_json()["error_description"]
    issued = _token_request(client, holder, _code_body(tenant, code))
    assert issued.status_code == 200, issued.get_json()
    assert _claims(issued.get_json()["access_token"])["cnf"] == {"jkt": holder.jkt}


def test_a_malformed_dpop_jkt_is_refused_at_the_authorization_endpoint(client, tenant):
    answer = client.get(authorize_query(tenant, dpop_jkt="not-a-thumbprint"))
    assert answer.status_code == 302
    assert query_of(answer.headers["Location"])["error"] == "invalid_request"


def test_the_credential_endpoints_of_the_issuer_take_a_bound_token_as_dpop_only(client, tenant):
    holder = Holder()
    token = _bound_tokens(client, tenant, holder, scope="openid email")["access_token"]
    for path, status in ((f"/v1/user/{tenant.user_id}/credentials/email", 201),
                         (f"/v1/user/{tenant.user_id}/credentials/social/platform_b", 404)):  # fmt: skip
        as_bearer = client.post(path, headers={"Authorization": f"Bearer {token}"})
        assert as_bearer.status_code == 401 and _challenge(as_bearer).startswith("DPoP "), path
        proof = holder.proof(f"{PUBLIC_URL}{path}", access_token=token)
        answer = client.post(path, headers={"Authorization": f"DPoP {token}", "DPoP": proof})
        assert answer.status_code == status, (path, answer.get_data(as_text=True))


def test_a_pushed_request_with_a_proof_binds_its_code_to_the_key(app, client, tenant):
    holder = Holder()
    _bound_tokens(client, tenant, holder)  # holds a current nonce now
    par_url = f"{PUBLIC_URL}/v1/openidc/par"
    body = {"response_type": "code", "client_id": str(tenant.client_id), "redirect_uri": tenant.redirect_uri,
            "scope": "openid"}  # fmt: skip
    auth = (str(tenant.client_id), tenant.client_secret)
    mismatch = client.post("/v1/openidc/par", data={**body, "dpop_jkt": Holder().jkt}, auth=auth,
                           headers={"DPoP": holder.proof(par_url)})  # fmt: skip
    assert mismatch.status_code == 400 and mismatch.get_json()["error"] == "invalid_dpop_proof"
    wrong_url = client.post("/v1/openidc/par", data=body, auth=auth, headers={"DPoP": holder.proof(TOKEN_URL)})
    assert wrong_url.status_code == 400 and wrong_url.get_json()["error"] == "invalid_dpop_proof"
    pushed = client.post("/v1/openidc/par", data=body, auth=auth, headers={"DPoP": holder.proof(par_url)})
    assert pushed.status_code == 201, pushed.get_json()
    code = sign_in(app.test_client(), tenant, request_uri=pushed.get_json()["request_uri"])["code"]
    refused = exchange(client, tenant, code)
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_grant"
    assert _token_request(client, holder, _code_body(tenant, code)).get_json()["token_type"] == "DPoP"
