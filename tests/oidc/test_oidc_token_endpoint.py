"""The token endpoint: code exchange, single use, the race, client authentication, RFC 6749 errors."""

from __future__ import annotations

import base64
import threading
from datetime import timedelta
from urllib.parse import quote

import pytest
import requests

from app.db import as_utc, transaction, utcnow
from app.extensions import db
from app.oidc.models import AuthorizationCode
from app.security import hash_secret
from tests.support.config import set_settings, setting_of
from tests.support.oidc import (
    authorize_query,
    exchange,
    make_tenant,
    pkce_pair,
    query_of,
    sign_in,
    sign_in_over_http,
)


def _expire_code(app, code: str) -> None:
    with app.app_context(), transaction():
        db.session.get(AuthorizationCode, hash_secret(code)).expires_at = utcnow() - timedelta(seconds=1)


def _userinfo(http, token: str):
    return http.get("/v1/openidc/user", headers={"Authorization": f"Bearer {token}"})


def test_exchange_answers_spec_token_response(client, tenant):
    code = sign_in(client, tenant)["code"]
    response = exchange(client, tenant, code)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    body = response.get_json()
    assert set(body) == {"scope", "token_type", "access_token", "expire_in", "expires_in", "id_token"}
    assert body["token_type"] == "Bearer" and body["scope"] == "openid profile email"
    assert body["expire_in"] == body["expires_in"] == 3600


def test_code_has_at_least_128_bits_and_is_only_stored_hashed(app, client, tenant):
    code = sign_in(client, tenant)["code"]
    assert len(base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))) >= 16
    with app.app_context():
        hashes = {row.code_hash for row in db.session.query(AuthorizationCode).all()}
        assert code not in hashes
        db.session.rollback()


def test_form_body_and_http_basic_client_authentication(client, tenant):
    code = sign_in(client, tenant)["code"]
    basic = base64.b64encode(f"{quote(str(tenant.client_id))}:{quote(tenant.client_secret)}".encode()).decode()
    response = client.post(
        "/v1/openidc/token",
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": tenant.redirect_uri},
        headers={"Authorization": f"Basic {basic}"},
    )
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["id_token"]


def test_code_replay_is_refused_and_revokes_the_first_tokens(client, tenant):
    code = sign_in(client, tenant)["code"]
    first = exchange(client, tenant, code)
    assert first.status_code == 200
    access_token = first.get_json()["access_token"]
    assert _userinfo(client, access_token).status_code == 200

    replay = exchange(client, tenant, code)
    assert replay.status_code == 400
    assert replay.get_json()["error"] == "invalid_grant"
    assert replay.headers["Content-Type"].startswith("application/json")

    refused = _userinfo(client, access_token)
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]


def test_redirect_uri_mismatch(client, tenant):
    code = sign_in(client, tenant)["code"]
    response = exchange(client, tenant, code, redirect_uri="https://rp.example.test/other")
    assert response.status_code == 400 and response.get_json()["error"] == "invalid_grant"


def test_pkce_verifier_must_match_the_challenge(client, tenant):
    verifier, challenge = pkce_pair()
    code = sign_in(client, tenant, code_challenge=challenge, code_challenge_method="S256")["code"]
    wrong = exchange(client, tenant, code, code_verifier=pkce_pair()[0])
    assert wrong.status_code == 400 and wrong.get_json()["error"] == "invalid_grant"
    missing = exchange(client, tenant, code)
    assert missing.status_code == 400 and missing.get_json()["error"] == "invalid_grant"
    assert exchange(client, tenant, code, code_verifier=verifier).status_code == 200


def test_wrong_secret_and_unknown_client(client, tenant):
    code = sign_in(client, tenant)["code"]
    wrong = exchange(client, tenant, code, client_secret="not-the-secret")
    assert wrong.status_code == 401
    assert wrong.get_json()["error"] == "invalid_client"
    # The secret came in the body: a plain invalid_client, no Basic challenge (RFC 6749 §5.2).
    assert "WWW-Authenticate" not in wrong.headers
    unknown = exchange(client, tenant, code, client_id="999999999")
    assert unknown.status_code == 401 and unknown.get_json()["error"] == "invalid_client"
    # The failed attempts did not consume the code.
    assert exchange(client, tenant, code).status_code == 200


def test_code_of_another_client_is_refused(app, client, tenant):
    other = make_tenant(app, client)
    code = sign_in(client, tenant)["code"]
    response = exchange(client, other, code, redirect_uri=tenant.redirect_uri)
    assert response.status_code == 400 and response.get_json()["error"] == "invalid_grant"


def test_expired_code(app, client, tenant):
    code = sign_in(client, tenant)["code"]
    _expire_code(app, code)
    response = exchange(client, tenant, code)
    assert response.status_code == 400
    assert response.get_json() == {"error": "invalid_grant", "error_description": "The authorization code has expired."}


def test_code_lifetime_is_sixty_seconds(app, client, tenant):
    code = sign_in(client, tenant)["code"]
    with app.app_context():
        row = db.session.get(AuthorizationCode, hash_secret(code))
        assert (as_utc(row.expires_at) - as_utc(row.created_at)).total_seconds() == 60
        db.session.rollback()


def test_request_errors_follow_rfc_6749(client, tenant):
    missing_grant = client.post("/v1/openidc/token", json={"code": "x"})
    assert missing_grant.status_code == 400 and missing_grant.get_json()["error"] == "invalid_request"
    unsupported = client.post("/v1/openidc/token", json={"grant_type": "password"})
    assert unsupported.status_code == 400 and unsupported.get_json()["error"] == "unsupported_grant_type"
    no_code = exchange(client, tenant, None)
    assert no_code.status_code == 400 and no_code.get_json()["error"] == "invalid_request"
    unknown_code = exchange(client, tenant, "no-such-code")
    assert unknown_code.status_code == 400 and unknown_code.get_json()["error"] == "invalid_grant"
    not_json = client.post("/v1/openidc/token", data="{", content_type="application/json")
    assert not_json.status_code == 400 and not_json.get_json()["error"] == "invalid_request"
    assert not_json.headers["Cache-Control"] == "no-store"


def test_token_endpoint_is_rate_limited_per_client(app, client, live_server):
    # The live server's issuer has a port of its own, so its buckets are fresh on every run.
    first, second = make_tenant(app, client), make_tenant(app, client)
    url = live_server.url + "/v1/openidc/token"

    def attempt(tenant):
        return requests.post(
            url,
            timeout=10,
            data={
                "grant_type": "authorization_code",
                "code": "nope",
                "redirect_uri": tenant.redirect_uri,
                "client_id": str(tenant.client_id),
                "client_secret": tenant.client_secret,
            },
        )

    previous = setting_of(live_server.app, "OIDC_TOKEN_RATE_LIMIT")
    set_settings(live_server.app, OIDC_TOKEN_RATE_LIMIT="3 per minute")
    try:
        assert [attempt(first).status_code for _ in range(3)] == [400, 400, 400]
        limited = attempt(first)
        assert limited.status_code == 429
        assert limited.json()["error"] == "slow_down" and int(limited.headers["Retry-After"]) > 0
        assert attempt(second).status_code == 400  # another client has its own budget
    finally:
        set_settings(live_server.app, OIDC_TOKEN_RATE_LIMIT=previous)


@pytest.mark.parametrize("encoding", ["data", "json"])  # a form is answered before dispatch, JSON by the view
def test_concurrent_exchanges_exactly_one_succeeds(app, client, live_server, encoding):
    tenant = make_tenant(app, client)
    browser = requests.Session()
    base = live_server.url
    token_url = base + "/v1/openidc/token"
    sign_in_over_http(browser, base, base + authorize_query(tenant), tenant.email)
    contenders = 6
    for _round in range(25):
        location = browser.get(base + authorize_query(tenant), allow_redirects=False, timeout=10).headers["Location"]
        code = query_of(location)["code"]
        barrier = threading.Barrier(contenders)
        results: list[requests.Response] = []
        lock = threading.Lock()

        def contend(code=code, barrier=barrier, results=results, lock=lock):
            body = {
                "grant_type": "authorization_code",
                "code": code,
                "client_id": str(tenant.client_id),
                "client_secret": tenant.client_secret,
                "redirect_uri": tenant.redirect_uri,
            }
            barrier.wait()
            response = requests.post(token_url, timeout=30, **{encoding: body})
            with lock:
                results.append(response)

        threads = [threading.Thread(target=contend) for _ in range(contenders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [response for response in results if response.status_code == 200]
        losers = [response for response in results if response.status_code != 200]
        assert len(winners) == 1, [(r.status_code, r.text) for r in results]
        assert all(r.status_code == 400 and r.json()["error"] == "invalid_grant" for r in losers)
        # The code was used more than once, so the winner's token is revoked as for any replay.
        revoked = requests.get(
            base + "/v1/openidc/user",
            timeout=10,
            headers={"Authorization": f"Bearer {winners[0].json()['access_token']}"},
        )
        assert revoked.status_code == 401


def test_nul_bytes_and_lone_surrogates_in_the_body_are_invalid_request(client, tenant):
    for code in ("a\x00b", "a\ud800b"):
        response = exchange(client, tenant, code, as_json=True)
        assert response.status_code == 400 and response.get_json()["error"] == "invalid_request", code
    form = client.post(
        "/v1/openidc/token",
        data={"grant_type": "authorization_code", "code": "x", "redirect_uri": tenant.redirect_uri + "\x00"},
    )
    assert form.status_code == 400 and form.get_json()["error"] == "invalid_request"


def test_junk_requests_from_elsewhere_do_not_spend_a_clients_budget(app, client, tenant):
    code = sign_in(client, tenant)["code"]
    attacker = app.test_client()
    victim = app.test_client()
    junk = {
        "grant_type": "authorization_code",
        "code": "nope",
        "redirect_uri": tenant.redirect_uri,
        "client_id": str(tenant.client_id),
        "client_secret": "wrong",
    }
    real = {**junk, "code": code, "client_secret": tenant.client_secret}
    previous = setting_of(app, "OIDC_TOKEN_RATE_LIMIT")
    set_settings(app, OIDC_TOKEN_RATE_LIMIT="3 per minute")
    try:
        answers = [
            attacker.post("/v1/openidc/token", data=junk, environ_base={"REMOTE_ADDR": "203.0.113.66"})
            for _ in range(4)
        ]
        assert [answer.status_code for answer in answers] == [401, 401, 401, 429]
        exchanged = victim.post("/v1/openidc/token", data=real, environ_base={"REMOTE_ADDR": "198.51.100.10"})
        assert exchanged.status_code == 200, exchanged.get_json()
    finally:
        set_settings(app, OIDC_TOKEN_RATE_LIMIT=previous)
