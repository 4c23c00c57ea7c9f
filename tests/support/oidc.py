"""Helpers of the OpenID tests: tenants with a user, driving the hosted pages, reading mail."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
import uuid
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

from app.db import transaction
from app.extensions import db
from app.tenancy import service
from app.tenancy.models import DEVICE_CODE_GRANT, Client

REDIRECT_URI = "https://rp.example.test/callback"


@dataclass
class Tenant:
    """A master client acting as relying party, with one user in its tree."""

    client_id: int
    client_secret: str
    api_token: str
    redirect_uri: str
    user_id: int
    email: str
    did: str
    profile: dict = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-token": self.api_token}


def make_tenant(
    app,
    http,
    *,
    redirect_uris: list[str] | None = None,
    signing_alg: str = "RS256",
    id_token_claims: dict | None = None,
    name: str = "Example University",
) -> Tenant:
    """A master client with redirect URIs and a user created through the API."""
    uris = redirect_uris or [REDIRECT_URI]
    with app.app_context(), transaction():
        created, secret = service.create_master_client(
            name, redirect_uris=uris, id_token_claims=id_token_claims or {"edu_username": "user_name"}
        )
        db.session.get(Client, created.id).signing_alg = signing_alg
        issued = service.issue_api_token(created.id, name="test")
        client_id, token = created.id, issued.plaintext
    email = f"user-{uuid.uuid4().hex[:10]}@example.org"
    profile = {
        "email_address": email,
        "first_name": "Ada",
        "last_name": "Lovelace",
        "user_name": f"ada{uuid.uuid4().hex[:6]}",
        "gender": "female",
        "residence_country": "GB",
    }
    response = http.post("/v1/user/create", json={"profile": profile}, headers={"x-api-token": token})
    assert response.status_code == 201, response.get_data(as_text=True)
    data = response.get_json()["data"]
    return Tenant(client_id, secret, token, uris[0], data["user_id"], email, data["did"], profile)


def add_sub_client(http, parent: Tenant, *, redirect_uris: list[str], name: str = "Second App") -> tuple[int, str]:
    """A sub-client of `parent`'s tree made through the API, with its client secret: (client_id, secret)."""
    created = http.post("/v1/sub_client", json={"name": name, "redirect_uris": redirect_uris}, headers=parent.headers)
    assert created.status_code == 201, created.get_data(as_text=True)
    client_id = created.get_json()["data"]["client_id"]
    secret = http.post(f"/v1/sub_client/{client_id}/client_secret", headers=parent.headers)
    assert secret.status_code == 200, secret.get_data(as_text=True)
    return client_id, secret.get_json()["data"]["client_secret"]


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize_query(tenant: Tenant, **extra) -> str:
    params = {
        "response_type": "code",
        "client_id": str(tenant.client_id),
        "redirect_uri": tenant.redirect_uri,
        "scope": "openid profile email",
        "state": secrets.token_urlsafe(8),
        "nonce": secrets.token_urlsafe(8),
    }
    params.update({key: value for key, value in extra.items() if value is not None})
    return "/v1/openidc/authorize?" + urlencode(params)


def form_fields(page: str) -> dict[str, str]:
    """Hidden fields (csrf_token, request) of the first form of an HTML page."""
    fields = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page):
        fields.setdefault(name, html.unescape(value))
    return fields


def latest_code(http, email: str) -> str:
    response = http.get("/dev/outbox", query_string={"to": email})
    assert response.status_code == 200
    messages = response.get_json()["data"]
    assert messages, f"no mail to {email}"
    return re.search(r"\b(\d{6})\b", messages[0]["text"]).group(1)


def query_of(location: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def path_of(location: str) -> str:
    parts = urlsplit(location)
    return parts.path + ("?" + parts.query if parts.query else "")


def sign_in(http, tenant: Tenant, *, consent: str | None = "allow", **authorize_params) -> dict[str, str]:
    """Drive the hosted pages with a Flask test client; returns the query sent back to the client."""
    response = http.get(authorize_query(tenant, **authorize_params))
    assert response.status_code == 302, response.get_data(as_text=True)
    location = response.headers["Location"]
    if location.startswith(tenant.redirect_uri):
        return query_of(location)
    page = http.get(path_of(location))
    if "/login" in location:
        assert page.status_code == 200
        fields = form_fields(page.get_data(as_text=True))
        page = http.post("/v1/openidc/login", data={**fields, "email": tenant.email})
        assert page.status_code == 200, page.get_data(as_text=True)
        fields = form_fields(page.get_data(as_text=True))
        response = http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, tenant.email)})
        assert response.status_code == 303, response.get_data(as_text=True)
        location = response.headers["Location"]
        if location.startswith(tenant.redirect_uri):
            return query_of(location)
        page = http.get(path_of(location))
    assert "/consent" in location and page.status_code == 200, page.get_data(as_text=True)
    fields = form_fields(page.get_data(as_text=True))
    response = http.post("/v1/openidc/consent", data={**fields, "decision": consent})
    assert response.status_code == 303
    return query_of(response.headers["Location"])


def exchange(http, tenant: Tenant, code: str, *, as_json: bool = False, headers: dict | None = None, **overrides):
    """Redeem `code` at the token endpoint: a form body (RFC 6749; answered before dispatch when it
    succeeds, see the hot route of app/oidc/routes.py), or a JSON one (always the Flask view);
    `headers` are sent too (a `DPoP` proof)."""
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": str(tenant.client_id),
        "client_secret": tenant.client_secret,
        "redirect_uri": tenant.redirect_uri,
    }
    body.update(overrides)
    body = {key: value for key, value in body.items() if value is not None}
    if as_json:
        return http.post("/v1/openidc/token", json=body, headers=headers)
    return http.post("/v1/openidc/token", data=body, headers=headers)


def sign_in_over_http(browser, base_url: str, authorize_url: str, email: str, *, consent: str = "allow") -> str:
    """Drive the hosted pages with a `requests.Session` as the browser; returns the final redirect URL."""
    response = browser.get(authorize_url, allow_redirects=False, timeout=10)
    assert response.status_code == 302, response.text
    location = response.headers["Location"]
    if not location.startswith(base_url) and not location.startswith("/"):
        return location
    page = browser.get(base_url + path_of(location), timeout=10)
    if "/login" in location:
        fields = form_fields(page.text)
        page = browser.post(base_url + "/v1/openidc/login", data={**fields, "email": email}, timeout=10)
        assert page.status_code == 200, page.text
        code = latest_code_over_http(browser, base_url, email)
        response = browser.post(
            base_url + "/v1/openidc/login/code",
            data={**form_fields(page.text), "code": code},
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 303, response.text
        location = response.headers["Location"]
        if not location.startswith("/v1/openidc/consent"):
            return location
        page = browser.get(base_url + location, timeout=10)
    response = browser.post(
        base_url + "/v1/openidc/consent",
        data={**form_fields(page.text), "decision": consent},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text
    return response.headers["Location"]


def latest_code_over_http(browser, base_url: str, email: str) -> str:
    response = browser.get(base_url + "/dev/outbox", params={"to": email}, timeout=10)
    assert response.status_code == 200
    messages = response.json()["data"]
    assert messages, f"no mail to {email}"
    return re.search(r"\b(\d{6})\b", messages[0]["text"]).group(1)


def approve_device_over_http(browser, base_url: str, verification_uri_complete: str, email: str) -> str:
    """Enter a device's user code on the device page with a `requests.Session` as the browser, sign
    in and allow; returns where the device page's sign-in ended."""
    page = browser.get(verification_uri_complete, timeout=10)
    user_code = re.search(r'name="user_code" value="([^"]+)"', page.text).group(1)
    response = browser.post(
        base_url + "/v1/openidc/device",
        data={**form_fields(page.text), "user_code": user_code},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text
    location = response.headers["Location"]
    if "/login" in location:
        page = browser.get(base_url + path_of(location), timeout=10)
        page = browser.post(base_url + "/v1/openidc/login", data={**form_fields(page.text), "email": email}, timeout=10)
        assert page.status_code == 200, page.text
        response = browser.post(
            base_url + "/v1/openidc/login/code",
            data={**form_fields(page.text), "code": latest_code_over_http(browser, base_url, email)},
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 303, response.text
        location = response.headers["Location"]
    page = browser.get(base_url + path_of(location), timeout=10)
    response = browser.post(
        base_url + "/v1/openidc/consent",
        data={**form_fields(page.text), "decision": "allow"},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text
    return response.headers["Location"]


def device_tokens(http, relying_party: Tenant, *, scope: str = "openid") -> dict:
    """The device flow driven with a Flask test client: the client (credentials in the body) starts
    it, the browser enters the code, signs in when it must and allows; the tokens of the first poll."""
    credentials = {"client_id": str(relying_party.client_id), "client_secret": relying_party.client_secret}
    started = http.post("/v1/openidc/device_authorization", data={**credentials, "scope": scope})
    assert started.status_code == 200, started.get_json()
    started = started.get_json()
    page = http.get(path_of(started["verification_uri_complete"]))
    response = http.post(
        "/v1/openidc/device", data={**form_fields(page.get_data(as_text=True)), "user_code": started["user_code"]}
    )
    assert response.status_code == 303, response.get_data(as_text=True)
    location = response.headers["Location"]
    if "/login" in location:
        page = http.get(path_of(location))
        page = http.post(
            "/v1/openidc/login", data={**form_fields(page.get_data(as_text=True)), "email": relying_party.email}
        )
        fields = form_fields(page.get_data(as_text=True))
        response = http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, relying_party.email)})
        assert response.status_code == 303, response.get_data(as_text=True)
        location = response.headers["Location"]
    page = http.get(path_of(location))
    response = http.post("/v1/openidc/consent", data={**form_fields(page.get_data(as_text=True)), "decision": "allow"})
    assert response.status_code == 303, response.get_data(as_text=True)
    tokens = http.post(
        "/v1/openidc/token",
        data={**credentials, "grant_type": DEVICE_CODE_GRANT, "device_code": started["device_code"]},
    )
    assert tokens.status_code == 200, tokens.get_json()
    return tokens.get_json()
