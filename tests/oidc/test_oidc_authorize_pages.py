"""The authorization endpoint and its hosted pages, driven with the Flask test client."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import socketserver
import threading
from datetime import timedelta
from urllib.parse import parse_qs

import pytest
import requests

from app.db import transaction, utcnow
from app.extensions import db
from app.jobs.models import Job
from app.oidc import mail
from app.oidc.authorize import validate_authorization_request
from app.oidc.errors import AuthorizationRedirectError
from app.oidc.models import AuthorizationRequest, LoginSession
from app.tenancy.models import Client
from app.tenancy.service import configure_recaptcha, disable_client
from tests.support import environment
from tests.support.config import set_settings, setting_of
from tests.support.oidc import (
    REDIRECT_URI,
    add_sub_client,
    authorize_query,
    exchange,
    form_fields,
    latest_code,
    latest_code_over_http,
    make_tenant,
    path_of,
    query_of,
    sign_in,
)
from tests.support.servers import serve_on_loopback


def _start_login(http, tenant, **params):
    response = http.get(authorize_query(tenant, **params))
    assert response.status_code == 302 and "/v1/openidc/login" in response.headers["Location"]
    page = http.get(path_of(response.headers["Location"]))
    assert page.status_code == 200
    return page


def _submit_email(http, page, email):
    response = http.post("/v1/openidc/login", data={**form_fields(page.get_data(as_text=True)), "email": email})
    return response


def _submit_code(http, page, code):
    return http.post("/v1/openidc/login/code", data={**form_fields(page.get_data(as_text=True)), "code": code})


def _outbox(http, email):
    return http.get("/dev/outbox", query_string={"to": email}).get_json()["data"]


def test_unknown_client_is_an_error_page_never_a_redirect(client, tenant):
    response = client.get(authorize_query(tenant, client_id="987654321"))
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert response.mimetype == "text/html"
    assert "not known" in response.get_data(as_text=True)


def test_client_under_a_disabled_ancestor_is_unknown(app, client, tenant):
    child_id = client.post(
        "/v1/sub_client",
        json={"name": "Child relying party", "redirect_uris": [tenant.redirect_uri]},
        headers={"x-api-token": tenant.api_token},
    ).get_json()["data"]["client_id"]
    child = dataclasses.replace(tenant, client_id=child_id)
    assert client.get(authorize_query(child)).status_code == 302
    with app.app_context(), transaction():
        disable_client(tenant.client_id)
    response = client.get(authorize_query(child))
    assert response.status_code == 400 and "Location" not in response.headers


def test_unregistered_redirect_uri_is_an_error_page_never_a_redirect(client, tenant):
    for uri in ("https://evil.example/callback", REDIRECT_URI + "/", REDIRECT_URI + "?x=1", ""):
        response = client.get(authorize_query(tenant, redirect_uri=uri))
        assert response.status_code == 400 and "Location" not in response.headers, uri


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"scope": "profile email"}, "invalid_scope"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"code_challenge": "a" * 43, "code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge_method": "S256"}, "invalid_request"),
        ({"prompt": "none login"}, "invalid_request"),
        ({"max_age": "soon"}, "invalid_request"),
        ({"max_age": "99999999999"}, "invalid_request"),
        ({"max_age": "2147483648"}, "invalid_request"),
        ({"max_age": "9" * 5000}, "invalid_request"),
        ({"request": "eyJ..."}, "invalid_request_object"),
        ({"response_type": ""}, "invalid_request"),
    ],
)
def test_invalid_requests_redirect_with_the_error_and_state(app, client, tenant, params, error):
    response = client.get(authorize_query(tenant, state="s-1", **params))
    assert response.status_code == 302
    location = response.headers["Location"]
    assert location.startswith(REDIRECT_URI)
    query = query_of(location)
    assert query["error"] == error and query["state"] == "s-1" and query["iss"] == setting_of(app, "OIDC_ISSUER")


@pytest.mark.parametrize("name", ["state", "nonce", "code_challenge", "scope", "prompt", "response_type"])
def test_nul_bytes_in_parameters_are_invalid_request(app, client, tenant, name):
    params = {"state": "s-1", name: "a\x00b"}
    if name == "code_challenge":
        params.update(code_challenge="A" * 43 + "\x00", code_challenge_method="S256")
    response = client.get(authorize_query(tenant, **params))
    assert response.status_code == 302
    query = query_of(response.headers["Location"])
    assert response.headers["Location"].startswith(REDIRECT_URI) and query["error"] == "invalid_request"
    # A state we could not store is not echoed either.
    assert query.get("state") == (None if name == "state" else "s-1")


def test_nul_bytes_in_the_redirect_uri_are_an_error_page(client, tenant):
    response = client.get(authorize_query(tenant, redirect_uri=REDIRECT_URI + "\x00"))
    assert response.status_code == 400 and "Location" not in response.headers


def test_a_login_hint_with_a_nul_byte_is_dropped(client, tenant):
    html = _start_login(client, tenant, login_hint="a\x00b@example.org").get_data(as_text=True)
    assert 'name="email"' in html and "example.org" not in html


def test_lone_surrogates_are_refused_before_any_query(app, tenant):
    base = query_of(authorize_query(tenant, state="s-1"))
    with app.app_context():
        for name in ("state", "nonce", "code_challenge", "scope"):
            with pytest.raises(AuthorizationRedirectError) as caught:
                validate_authorization_request({**base, name: "a\ud800b"})
            assert caught.value.error == "invalid_request"
            assert query_of(caught.value.location).get("state") == (None if name == "state" else "s-1")
        assert validate_authorization_request({**base, "login_hint": "\udc80@example.org"}).login_hint is None


def test_the_largest_max_age_is_accepted(app, tenant):
    page = _start_login(app.test_client(), tenant, max_age=str(2**31 - 1))
    assert 'name="email"' in page.get_data(as_text=True)


def test_repeated_parameters_are_refused(client, tenant):
    repeated_scope = client.get(authorize_query(tenant) + "&scope=openid")
    assert query_of(repeated_scope.headers["Location"])["error"] == "invalid_request"
    repeated_client = client.get(authorize_query(tenant) + f"&client_id={tenant.client_id}")
    assert repeated_client.status_code == 400 and "Location" not in repeated_client.headers


def test_pages_are_branded_and_secured(client, tenant):
    page = _start_login(client, tenant)
    html = page.get_data(as_text=True)
    assert "Example University" in html
    assert f"/privacy/{tenant.client_id}" in html
    assert 'name="csrf_token"' in html and 'name="email"' in html
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Cache-Control"] == "no-store"
    scripts = re.findall(r"<script[^>]*>", html)
    assert all('src="/v1/openidc/static/' in tag for tag in scripts), "no inline script, only the pages' own files"


def test_the_default_privacy_link_leads_to_a_page(app, client, tenant):
    html = _start_login(client, tenant).get_data(as_text=True)
    href = re.search(r'<a href="([^"]+)" id="privacy-link"', html).group(1)
    page = client.get(path_of(href))
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    assert "Example University" in text and "should publish its notice" in text
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY" and "<script" not in text


def test_privacy_page_of_an_unknown_or_disabled_client_is_404(app, client, tenant):
    assert client.get("/privacy/987654321").status_code == 404
    assert client.get("/privacy/not-a-client").status_code == 404
    assert client.get("/privacy/1%00").status_code == 404
    html = _start_login(client, tenant).get_data(as_text=True)
    href = re.search(r'<a href="([^"]+)" id="privacy-link"', html).group(1)
    with app.app_context(), transaction():
        disable_client(tenant.client_id)
    gone = client.get(path_of(href))
    assert gone.status_code == 404 and gone.mimetype == "text/html"


def test_cookies_are_http_only_and_same_site_lax(client, tenant):
    response = client.get(authorize_query(tenant))
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/v1/openidc" in cookie


def test_privacy_link_of_the_client_is_shown(app, client):
    tenant = make_tenant(app, client, name="Branded Sub Org")
    with app.app_context(), transaction():
        db.session.get(Client, tenant.client_id).privacy_link = "https://branded.example/privacy"
    html = _start_login(client, tenant).get_data(as_text=True)
    assert "https://branded.example/privacy" in html and "Branded Sub Org" in html


def test_login_hint_prefills_the_address(client, tenant):
    html = _start_login(client, tenant, login_hint=tenant.email).get_data(as_text=True)
    assert f'value="{tenant.email}"' in html


def _without_values(response, email: str) -> str:
    # The request handle differs between the two requests (form values, the privacy page's way back).
    text = re.sub(r'request%3D[^"]*"', '"', response.get_data(as_text=True))
    return re.sub(r'value="[^"]*"', "", text).replace(email, "X")


def test_the_answer_does_not_reveal_whether_an_account_exists(client, tenant):
    page = _start_login(client, tenant)
    stranger = "nobody-" + tenant.email
    known = _submit_email(client, page, tenant.email)
    unknown = _submit_email(client, _start_login(client, tenant), stranger)
    assert known.status_code == unknown.status_code == 200
    assert _without_values(known, tenant.email) == _without_values(unknown, stranger)
    assert "If an account exists" in known.get_data(as_text=True)
    assert _outbox(client, stranger) == []
    assert len(_outbox(client, tenant.email)) == 1
    # No code can sign in to an address without an account.
    for guess in ("000000", "123456"):
        assert "not right" in _submit_code(client, unknown, guess).get_data(as_text=True)


def test_login_code_is_six_digits_and_stored_hashed(app, client, tenant):
    _submit_email(client, _start_login(client, tenant), tenant.email)
    code = latest_code(client, tenant.email)
    assert re.fullmatch(r"\d{6}", code)
    message = _outbox(client, tenant.email)[0]
    assert "Example University" in message["subject"] and "10 minutes" in message["text"]
    with app.app_context():
        stored = db.session.query(AuthorizationRequest).filter_by(email=tenant.email).one()
        assert code not in (stored.login_code_hash or "") and len(stored.login_code_hash) == 64
        db.session.rollback()


def test_five_wrong_codes_kill_the_code(client, tenant):
    code_page = _submit_email(client, _start_login(client, tenant), tenant.email)
    code = latest_code(client, tenant.email)
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    for left in (4, 3, 2, 1):
        response = _submit_code(client, code_page, wrong)
        assert response.status_code == 200 and f"{left} attempt" in response.get_data(as_text=True)
    assert "Too many wrong codes" in _submit_code(client, code_page, wrong).get_data(as_text=True)
    # Even the right code is refused now, and this sign-in sends no new code: start again.
    assert "Too many wrong codes" in _submit_code(client, code_page, code).get_data(as_text=True)
    assert _submit_email(client, code_page, tenant.email).status_code == 429
    assert len(_outbox(client, tenant.email)) == 1
    fresh_page = _submit_email(client, _start_login(client, tenant), tenant.email)
    response = _submit_code(client, fresh_page, latest_code(client, tenant.email))
    assert response.status_code == 303


def test_expired_login_code(app, client, tenant):
    code_page = _submit_email(client, _start_login(client, tenant), tenant.email)
    with app.app_context(), transaction():
        row = db.session.query(AuthorizationRequest).filter_by(email=tenant.email).one()
        row.login_code_expires_at = utcnow() - timedelta(seconds=1)
    response = _submit_code(client, code_page, latest_code(client, tenant.email))
    assert response.status_code == 200 and "expired" in response.get_data(as_text=True)


def test_forms_without_the_csrf_token_are_refused(client, tenant):
    page = _start_login(client, tenant)
    fields = form_fields(page.get_data(as_text=True))
    response = client.post("/v1/openidc/login", data={"request": fields["request"], "email": tenant.email})
    assert response.status_code == 403
    response = client.post("/v1/openidc/login", data={**fields, "csrf_token": "0" * 64, "email": tenant.email})
    assert response.status_code == 403
    assert _outbox(client, tenant.email) == []


def test_a_flow_cannot_be_finished_in_another_browser(app, client, tenant):
    page = _start_login(client, tenant)
    other_browser = app.test_client()
    other_page = other_browser.get(authorize_query(tenant))  # gets its own browser cookie and CSRF token
    own_fields = form_fields(other_browser.get(path_of(other_page.headers["Location"])).get_data(as_text=True))
    stolen = form_fields(page.get_data(as_text=True))["request"]
    response = other_browser.post("/v1/openidc/login", data={**own_fields, "request": stolen, "email": tenant.email})
    assert response.status_code == 400 and "expired" in response.get_data(as_text=True)


def test_single_sign_on_prompt_and_max_age(app, client, tenant):
    sign_in(client, tenant)
    silent = client.get(authorize_query(tenant, prompt="none"))
    assert query_of(silent.headers["Location"]).get("code")
    forced = client.get(authorize_query(tenant, prompt="login"))
    assert "/v1/openidc/login" in forced.headers["Location"]
    consent_again = client.get(authorize_query(tenant, prompt="consent"))
    assert "/v1/openidc/consent" in consent_again.headers["Location"]

    with app.app_context(), transaction():
        for session in db.session.query(LoginSession).filter_by(user_id=tenant.user_id).all():
            session.auth_time = utcnow() - timedelta(seconds=120)
    assert "/v1/openidc/login" in client.get(authorize_query(tenant, max_age="60")).headers["Location"]
    assert query_of(client.get(authorize_query(tenant, max_age="600")).headers["Location"]).get("code")
    none_expired = client.get(authorize_query(tenant, prompt="none", max_age="60"))
    assert query_of(none_expired.headers["Location"])["error"] == "login_required"


def test_prompt_none_without_session(app, tenant):
    fresh = app.test_client()
    response = fresh.get(authorize_query(tenant, prompt="none", state="st"))
    query = query_of(response.headers["Location"])
    assert query["error"] == "login_required" and query["state"] == "st"


def test_consent_is_per_client_and_remembered(app, client, tenant):
    second_uri = "https://second.example.test/cb"
    sub_id, sub_secret = add_sub_client(client, tenant, redirect_uris=[second_uri])
    sign_in(client, tenant)
    sub_params = {"client_id": str(sub_id), "redirect_uri": second_uri}
    first_visit = client.get(authorize_query(tenant, **sub_params))
    assert "/v1/openidc/consent" in first_visit.headers["Location"], "SSO, but consent for the new client"
    page = client.get(path_of(first_visit.headers["Location"]))
    assert "Second App" in page.get_data(as_text=True)
    allowed = client.post("/v1/openidc/consent", data={**form_fields(page.get_data(as_text=True)), "decision": "allow"})
    code = query_of(allowed.headers["Location"])["code"]
    tokens = client.post(
        "/v1/openidc/token",
        json={
            "grant_type": "authorization_code",
            "code": code,
            "client_id": str(sub_id),
            "client_secret": sub_secret,
            "redirect_uri": second_uri,
        },
    )
    assert tokens.status_code == 200
    again = client.get(authorize_query(tenant, prompt="none", **sub_params))
    assert query_of(again.headers["Location"]).get("code")
    wider = client.get(authorize_query(tenant, prompt="none", scope="openid profile email phone", **sub_params))
    assert query_of(wider.headers["Location"])["error"] == "consent_required"


def test_consent_denied(client, tenant):
    query = sign_in(client, tenant, consent="deny", state="abc")
    assert query["error"] == "access_denied" and query["state"] == "abc"


def test_user_of_another_tree_cannot_sign_in(app, client, tenant):
    other = make_tenant(app, client)
    fresh = app.test_client()
    page = _start_login(fresh, tenant)
    code_page = _submit_email(fresh, page, other.email)
    assert _outbox(fresh, other.email) == []
    assert "not right" in _submit_code(fresh, code_page, "123456").get_data(as_text=True)


def test_post_to_the_authorization_endpoint_continues_as_get(client, tenant):
    response = client.post(
        "/v1/openidc/authorize",
        data={
            "response_type": "code",
            "client_id": str(tenant.client_id),
            "redirect_uri": tenant.redirect_uri,
            "scope": "openid",
        },
    )
    assert response.status_code == 303 and response.headers["Location"].startswith("/v1/openidc/authorize?")


def test_post_fields_named_like_url_for_arguments_are_carried_as_parameters(client, tenant):
    fields = {
        "response_type": "code",
        "client_id": str(tenant.client_id),
        "redirect_uri": tenant.redirect_uri,
        "scope": "openid",
        "endpoint": "x",
        "_scheme": "javascript",
        "_external": "1",
        "_anchor": "a",
    }
    response = client.post("/v1/openidc/authorize", data=fields)
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location.startswith("/v1/openidc/authorize?") and "#" not in location
    assert query_of(location) == fields
    assert client.get(location).status_code == 302


def test_repeated_parameters_in_a_post_are_refused(client, tenant):
    response = client.post(
        "/v1/openidc/authorize",
        data={
            "response_type": "code",
            "client_id": str(tenant.client_id),
            "redirect_uri": tenant.redirect_uri,
            "scope": ["openid", "openid email"],
            "state": "s-2",
        },
    )
    assert response.status_code == 303
    followed = client.get(response.headers["Location"])
    query = query_of(followed.headers["Location"])
    assert followed.headers["Location"].startswith(REDIRECT_URI)
    assert query["error"] == "invalid_request" and query["state"] == "s-2"


def test_nonce_and_state_round_trip(client, tenant):
    query = sign_in(client, tenant, state="state-xyz", nonce="nonce-123")
    assert query["state"] == "state-xyz"
    body = exchange(client, tenant, query["code"]).get_json()
    payload = body["id_token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["nonce"] == "nonce-123"


def test_logout_with_id_token_hint_ends_the_session(app, client, tenant):
    query = sign_in(client, tenant)
    id_token = exchange(client, tenant, query["code"]).get_json()["id_token"]
    response = client.get(
        "/v1/openidc/logout",
        query_string={
            "id_token_hint": id_token,
            "post_logout_redirect_uri": tenant.redirect_uri,
            "state": "bye",
        },
    )
    assert response.status_code == 303
    assert response.headers["Location"] == tenant.redirect_uri + "?state=bye"
    after = client.get(authorize_query(tenant, prompt="none"))
    assert query_of(after.headers["Location"])["error"] == "login_required"


def _id_token_of(http, tenant) -> str:
    return exchange(http, tenant, sign_in(http, tenant)["code"]).get_json()["id_token"]


def _still_signed_in(http, tenant) -> bool:
    return "code" in query_of(http.get(authorize_query(tenant, prompt="none")).headers["Location"])


def test_logout_with_the_id_token_of_someone_else_asks_first(app, client, tenant):
    sign_in(client, tenant)
    other_tree = make_tenant(app, client)
    same_tree = dataclasses.replace(tenant, email=f"second-{tenant.email}")
    created = client.post(
        "/v1/user/create",
        headers=tenant.headers,
        json={"profile": {"email_address": same_tree.email, "first_name": "Grace"}},
    )
    assert created.status_code == 201, created.get_data(as_text=True)
    for someone_else in (other_tree, same_tree):
        hint = _id_token_of(app.test_client(), someone_else)
        page = client.get(
            "/v1/openidc/logout",
            query_string={
                "id_token_hint": hint,
                "post_logout_redirect_uri": someone_else.redirect_uri,
                "state": "bye",
            },
        )
        assert page.status_code == 200 and "Sign out?" in page.get_data(as_text=True)
        assert "Location" not in page.headers
        assert _still_signed_in(client, tenant)
    # Confirming on the page does sign out, and still returns to the hinted client.
    fields = form_fields(page.get_data(as_text=True))
    assert fields["id_token_hint"] == hint
    done = client.post("/v1/openidc/logout", data={**fields, "confirm": "yes"})
    assert done.status_code == 303 and done.headers["Location"] == same_tree.redirect_uri + "?state=bye"
    assert not _still_signed_in(client, tenant)


def test_logout_without_hint_asks_first_and_never_redirects_to_unregistered_uris(client, tenant):
    sign_in(client, tenant)
    page = client.get("/v1/openidc/logout", query_string={"post_logout_redirect_uri": "https://evil.example/"})
    assert page.status_code == 200 and "Sign out?" in page.get_data(as_text=True)
    assert query_of(client.get(authorize_query(tenant, prompt="none")).headers["Location"]).get("code")
    fields = form_fields(page.get_data(as_text=True))
    done = client.post(
        "/v1/openidc/logout", data={**fields, "confirm": "yes", "post_logout_redirect_uri": "https://evil.example/"}
    )
    assert done.status_code == 200 and "signed out" in done.get_data(as_text=True)
    assert query_of(client.get(authorize_query(tenant, prompt="none")).headers["Location"])["error"] == "login_required"


@pytest.mark.parametrize("email", ["a\x00b@x.org", "a b@x.org", "a\tb@x.org", "ab@x.org\x00"])
def test_an_address_with_nul_or_whitespace_is_refused_on_the_page(client, tenant, email):
    response = _submit_email(client, _start_login(client, tenant), email)
    assert response.status_code == 400 and response.mimetype == "text/html"
    assert "Enter a valid e-mail address." in response.get_data(as_text=True)


def test_dev_outbox_refuses_a_nul_byte(client):
    response = client.get("/dev/outbox?to=a%00")
    assert response.status_code == 422 and "to" in response.get_json()["errors"]


def test_dev_outbox_is_off_unless_enabled(app, client):
    app.config["DEV_OUTBOX"] = False
    try:
        response = client.get("/dev/outbox")
        assert response.status_code == 404
    finally:
        app.config["DEV_OUTBOX"] = True


class _FakeRecaptcha:
    """A loopback stand-in for the reCAPTCHA siteverify API: the response token names the score."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        calls = self.requests

        def answer(_method: str, _path: str, body: bytes) -> tuple[str, bytes]:
            form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
            calls.append(form)
            score = float(form["response"].split(":")[1]) if form["response"].startswith("score:") else 0.0
            return "application/json", json.dumps(
                {
                    "success": form["secret"] == "captcha-secret",
                    "score": score,
                    "action": "login",
                    "hostname": "127.0.0.1",
                }
            ).encode()

        self.server = serve_on_loopback(answer)
        self.url = f"http://127.0.0.1:{self.server.server_port}/recaptcha/api/siteverify"


def test_recaptcha_v3_when_the_client_enables_it(app, client, tenant):
    fake = _FakeRecaptcha()
    with app.app_context(), transaction():
        configure_recaptcha(
            tenant.client_id, site_key="site-key-1", secret="captcha-secret", threshold=0.7, enabled=True
        )
    previous = setting_of(app, "RECAPTCHA_VERIFY_URL")
    set_settings(app, RECAPTCHA_VERIFY_URL=fake.url)
    try:
        page = _start_login(client, tenant)
        html = page.get_data(as_text=True)
        assert "render=site-key-1" in html and 'name="g-recaptcha-response"' in html
        assert "https://www.google.com/recaptcha/" in page.headers["Content-Security-Policy"]
        fields = form_fields(html)
        low = client.post(
            "/v1/openidc/login", data={**fields, "email": tenant.email, "g-recaptcha-response": "score:0.3"}
        )
        assert low.status_code == 400 and "robot" in low.get_data(as_text=True)
        missing = client.post("/v1/openidc/login", data={**fields, "email": tenant.email})
        assert missing.status_code == 400
        assert _outbox(client, tenant.email) == []
        high = client.post(
            "/v1/openidc/login", data={**fields, "email": tenant.email, "g-recaptcha-response": "score:0.9"}
        )
        assert high.status_code == 200 and len(_outbox(client, tenant.email)) == 1
        assert fake.requests[-1]["secret"] == "captcha-secret"
    finally:
        set_settings(app, RECAPTCHA_VERIFY_URL=previous)
        fake.server.shutdown()


class _FakeSmtp(socketserver.ThreadingTCPServer):
    """Just enough of an SMTP server on loopback to receive one message."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self) -> None:
        self.messages: list[str] = []
        messages = self.messages

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.wfile.write(b"220 fake ESMTP\r\n")
                while line := self.rfile.readline():
                    verb = line.decode().strip().split(" ")[0].upper()
                    if verb in {"EHLO", "HELO"}:
                        self.wfile.write(b"250 fake\r\n")
                    elif verb == "DATA":
                        self.wfile.write(b"354 go on\r\n")
                        lines = []
                        while (data := self.rfile.readline()) not in (b".\r\n", b""):
                            lines.append(data.decode())
                        messages.append("".join(lines))
                        self.wfile.write(b"250 queued\r\n")
                    elif verb == "QUIT":
                        self.wfile.write(b"221 bye\r\n")
                        return
                    else:
                        self.wfile.write(b"250 ok\r\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_smtp_backend_sends_from_a_job_with_the_code_sealed(app, client, tenant, real_worker, wait_for_job):
    smtp = _FakeSmtp()
    server = {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(smtp.server_address[1]), "SMTP_STARTTLS": "0", "SMTP_SSL": "0"}
    changes = {
        "MAIL_BACKEND": "smtp",
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": smtp.server_address[1],
        "SMTP_STARTTLS": False,
        "SMTP_SSL": False,
    }
    previous = {name: setting_of(app, name) for name in changes}
    set_settings(app, **changes)
    if environment.USING_POSTGRES:  # the worker process reads the SMTP server from its environment
        real_worker.stop()
        real_worker.start(extra_env=server)
    try:
        assert _submit_email(client, _start_login(client, tenant), tenant.email).status_code == 200
        with app.app_context():
            job = db.session.query(Job).filter_by(kind=mail.SEND_MAIL_TASK).order_by(Job.created_at.desc()).first()
            assert job is not None and tenant.email not in json.dumps(job.payload)
            job_id = job.id
            db.session.rollback()
        done = wait_for_job(job_id, timeout=60)
        assert done["state"] == "succeeded", done
        assert done["result"] == {"sent_to": tenant.email}
        assert any(tenant.email in message and re.search(r"\b\d{6}\b", message) for message in smtp.messages)
        assert _outbox(client, tenant.email) == []
    finally:
        set_settings(app, **previous)
        smtp.shutdown()
        if environment.USING_POSTGRES:
            real_worker.stop()
            real_worker.start()


def test_sign_in_attempts_are_rate_limited(app, client, live_server):
    tenant = make_tenant(app, client)
    browser = requests.Session()
    response = browser.get(live_server.url + authorize_query(tenant), allow_redirects=False, timeout=10)
    page = browser.get(live_server.url + path_of(response.headers["Location"]), timeout=10)
    fields = form_fields(page.text)
    previous = setting_of(live_server.app, "OIDC_LOGIN_RATE_LIMIT")
    set_settings(live_server.app, OIDC_LOGIN_RATE_LIMIT="2 per minute")
    try:
        responses = [
            browser.post(live_server.url + "/v1/openidc/login", data={**fields, "email": tenant.email}, timeout=10)
            for _ in range(3)
        ]
    finally:
        set_settings(live_server.app, OIDC_LOGIN_RATE_LIMIT=previous)
    assert [response.status_code for response in responses] == [200, 200, 429]
    limited = responses[-1]
    assert limited.headers["Content-Type"].startswith("text/html") and int(limited.headers["Retry-After"]) > 0
    assert "Too many sign-in attempts" in limited.text


def test_concurrent_guesses_cannot_exceed_the_attempt_limit(app, client, live_server):
    tenant = make_tenant(app, client)
    browser = requests.Session()
    response = browser.get(live_server.url + authorize_query(tenant), allow_redirects=False, timeout=10)
    page = browser.get(live_server.url + path_of(response.headers["Location"]), timeout=10)
    code_page = browser.post(
        live_server.url + "/v1/openidc/login", data={**form_fields(page.text), "email": tenant.email}, timeout=10
    )
    code = latest_code_over_http(browser, live_server.url, tenant.email)
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    fields = {**form_fields(code_page.text), "code": wrong}
    barrier = threading.Barrier(12)
    answers: list[str] = []

    def guess() -> None:
        barrier.wait()
        answer = browser.post(live_server.url + "/v1/openidc/login/code", data=fields, timeout=30)
        answers.append(answer.text)

    threads = [threading.Thread(target=guess) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Keep guessing one at a time until the code is dead (requests refused by a busy SQLite count for nothing).
    for _ in range(12):
        answer = browser.post(live_server.url + "/v1/openidc/login/code", data=fields, timeout=10).text
        answers.append(answer)
        if "Too many wrong codes" in answer:
            break
    # Four wrong answers say "not right", the fifth kills the code: never more, however concurrent.
    assert sum("not right" in text for text in answers) <= 4
    assert (
        "Too many wrong codes"
        in browser.post(live_server.url + "/v1/openidc/login/code", data={**fields, "code": code}, timeout=10).text
    )
