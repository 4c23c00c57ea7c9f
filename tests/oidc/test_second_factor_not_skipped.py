"""The second factor cannot be skipped with the first (issue 38, item 3): under
`passkey_second_factor` a person holding only a user's e-mail code gets no session, no account page,
no passkey registration or removal, and cannot finish the passkey step; and methods one person
passed never count for another person's sign-in in the same request.

Driven through the hosted pages with Flask test clients (two browsers: the user's and the other
person's); a software authenticator answers the pages' real ceremony options."""

from __future__ import annotations

import html
import json
import re

import pytest

from app.db import transaction
from app.extensions import db
from app.oidc.tokens import b64_json
from app.passkeys.models import Passkey
from app.passkeys.settings import PasskeySettings
from app.settings import current
from app.tenancy import service as tenancy_service
from tests.support.oidc import authorize_query, exchange, form_fields, latest_code, make_tenant, path_of, query_of
from tests.support.passkeys import SoftAuthenticator, b64url

MFA = "urn:tessera:acr:mfa"


def _set_policy(app, tenant, policy: str) -> None:
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, policy)


def _authenticator(app) -> SoftAuthenticator:
    with app.app_context():
        settings = current(PasskeySettings)
        return SoftAuthenticator(origin=settings.origins.split()[0], rp_id=settings.rp_id)


def _options(page: str, kind: str) -> dict:
    found = re.search(rf'data-passkey-{kind}="([^"]*)"', page)
    assert found, f"no passkey {kind} options on the page"
    return json.loads(html.unescape(found.group(1)))


def _passkey_ids(app, user_id: int) -> list[int]:
    with app.app_context():
        return sorted(db.session.execute(db.select(Passkey.id).where(Passkey.user_id == user_id)).scalars())


def _code_step(http, tenant, email: str | None = None, **params):
    """Start an authorization and pass the e-mail code of `email` (the tenant's user by default)."""
    email = email or tenant.email
    response = http.get(authorize_query(tenant, **params))
    page = http.get(path_of(response.headers["Location"]))
    page = http.post("/v1/openidc/login", data={**form_fields(page.get_data(as_text=True)), "email": email})
    fields = form_fields(page.get_data(as_text=True))
    return http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, email)})


def _finish(http, response) -> dict:
    """Follow the consent page (allowing) to the redirect back to the client; its query."""
    assert response.status_code == 303, response.get_data(as_text=True)
    location = response.headers["Location"]
    if "/v1/openidc/consent" in location:
        page = http.get(path_of(location))
        response = http.post(
            "/v1/openidc/consent", data={**form_fields(page.get_data(as_text=True)), "decision": "allow"}
        )
        location = response.headers["Location"]
    return query_of(location)


def _post_passkey(http, page: str, credential: str):
    fields = form_fields(page)
    return http.post(
        "/v1/openidc/login/passkey",
        data={"csrf_token": fields["csrf_token"], "request": fields["request"], "credential": credential},
    )


def _register(http, authenticator: SoftAuthenticator, name: str = "Laptop") -> None:
    text = http.get("/v1/openidc/account").get_data(as_text=True)
    answer = http.post(
        "/v1/openidc/account/passkeys",
        data={
            "csrf_token": form_fields(text)["csrf_token"],
            "credential": authenticator.create(_options(text, "create")),
            "name": name,
        },
    )
    assert "Your passkey was added." in answer.get_data(as_text=True)


def _amr(http, tenant, query: dict) -> list[str]:
    response = exchange(http, tenant, query["code"])
    assert response.status_code == 200, response.get_data(as_text=True)
    return b64_json(response.get_json()["id_token"].split(".")[1])["amr"]


@pytest.fixture
def victim(app):
    """A user of a `passkey_second_factor` tree with a passkey, added while the tree let the e-mail
    code alone sign in, and signed in since with both; returns (tenant, the user's browser, the
    user's authenticator)."""
    http = app.test_client()
    tenant = make_tenant(app, http, name="Second Factor University")
    authenticator = _authenticator(app)
    _finish(http, _code_step(http, tenant))
    _register(http, authenticator, name="Victim's laptop")
    _set_policy(app, tenant, "passkey_second_factor")
    step = http.get(path_of(_code_step(http, tenant, prompt="login").headers["Location"])).get_data(as_text=True)
    _finish(http, _post_passkey(http, step, authenticator.get(_options(step, "get"))))
    return tenant, http, authenticator


def test_the_e_mail_code_alone_opens_no_session_and_no_account_page(app, victim):
    tenant, _, _ = victim
    other = app.test_client()
    response = _code_step(other, tenant)
    assert response.status_code == 303 and "/v1/openidc/login/passkey" in response.headers["Location"]
    assert "tessera_sso" not in " ".join(response.headers.getlist("Set-Cookie")), "a pending step has no session"

    account = other.get("/v1/openidc/account", follow_redirects=True)
    text = account.get_data(as_text=True)
    assert account.request.path == "/v1/openidc/account/sign-in", "the account page asks to sign in"
    assert tenant.email not in text and "Victim&#39;s laptop" not in text and "Victim's laptop" not in text
    assert 'id="passkeys"' not in text and "data-passkey-create" not in text
    silent = query_of(other.get(authorize_query(tenant, prompt="none")).headers["Location"])
    assert silent["error"] == "login_required"


def test_a_pending_step_can_neither_add_nor_remove_a_passkey(app, victim):
    tenant, http, _ = victim
    before = _passkey_ids(app, tenant.user_id)
    # Registration options as the user's own account page offers them, answered by another device.
    options = _options(http.get("/v1/openidc/account").get_data(as_text=True), "create")
    intruder = _authenticator(app)
    other = app.test_client()
    step = other.get(path_of(_code_step(other, tenant).headers["Location"])).get_data(as_text=True)
    csrf = form_fields(step)["csrf_token"]

    added = other.post(
        "/v1/openidc/account/passkeys",
        data={"csrf_token": csrf, "credential": intruder.create(options), "name": "Mine now"},
    )
    assert added.status_code == 401 and "Mine now" not in added.get_data(as_text=True)
    removed = other.post("/v1/openidc/account/passkeys/remove", data={"csrf_token": csrf, "passkey_id": before[0]})
    assert removed.status_code == 401
    assert _passkey_ids(app, tenant.user_id) == before

    # The step itself takes only the user's own passkey.
    refused = _post_passkey(other, step, intruder.get(_options(step, "get"), credential=intruder.credentials[0]))
    assert refused.status_code == 200 and "not accepted" in refused.get_data(as_text=True)
    assert other.get("/v1/openidc/account").status_code == 303


def test_the_second_step_finishes_the_sign_in_and_opens_the_account(app, victim):
    tenant, _, authenticator = victim
    other = app.test_client()  # another browser of the same user, this time with the passkey
    step = other.get(path_of(_code_step(other, tenant).headers["Location"])).get_data(as_text=True)
    answer = _post_passkey(other, step, authenticator.get(_options(step, "get")))
    assert "tessera_sso" in " ".join(answer.headers.getlist("Set-Cookie"))
    assert _amr(other, tenant, _finish(other, answer)) == ["otp", "hwk", "user", "mfa"]
    account = other.get("/v1/openidc/account")
    assert account.status_code == 200 and tenant.email in account.get_data(as_text=True)


def test_a_session_below_a_tightened_policy_no_longer_opens_the_account(app):
    http = app.test_client()
    tenant = make_tenant(app, http)
    _finish(http, _code_step(http, tenant))
    assert http.get("/v1/openidc/account").status_code == 200
    _set_policy(app, tenant, "passkey_second_factor")
    assert http.get("/v1/openidc/account").headers["Location"].endswith("/v1/openidc/account/sign-in")
    csrf = form_fields(http.get("/v1/openidc/account/sign-in").get_data(as_text=True))["csrf_token"]
    assert http.post("/v1/openidc/account/passkeys", data={"csrf_token": csrf, "credential": "{}"}).status_code == 401


def test_one_persons_passkey_never_counts_for_another_persons_code(app, victim):
    """Someone signs in fully as themselves, then, in the same request, types the user's address and
    code: the code alone is all they hold for the user, which is not a sign-in under this policy."""
    tenant, _, _ = victim
    other = app.test_client()
    profile = {"email_address": f"other-{tenant.user_id}@example.org"}
    created = other.post("/v1/user/create", json={"profile": profile}, headers=tenant.headers)
    assert created.status_code == 201
    own_key = _authenticator(app)
    _set_policy(app, tenant, "passkey_alone")
    _finish(other, _code_step(other, tenant, profile["email_address"]))
    _register(other, own_key, name="Own key")
    _set_policy(app, tenant, "passkey_second_factor")

    step_location = _code_step(other, tenant, profile["email_address"], prompt="login consent").headers["Location"]
    step = other.get(path_of(step_location)).get_data(as_text=True)
    consent = _post_passkey(other, step, own_key.get(_options(step, "get")))
    assert "/v1/openidc/consent" in consent.headers["Location"]
    handle = query_of(consent.headers["Location"])["request"]

    # Still in that request (its consent page open), the user's address and the code mailed to it.
    fields = form_fields(other.get(path_of(consent.headers["Location"])).get_data(as_text=True))
    page = other.post("/v1/openidc/login", data={**fields, "request": handle, "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    answer = other.post("/v1/openidc/login/code", data={**fields, "code": latest_code(other, tenant.email)})
    assert answer.status_code == 303 and "/v1/openidc/login/passkey" in answer.headers["Location"]
    step = other.get(path_of(answer.headers["Location"])).get_data(as_text=True)
    asked = [item["id"] for item in _options(step, "get")["allowCredentials"]]
    assert asked and b64url(own_key.credentials[0].credential_id) not in asked, "the user's passkeys, not theirs"
    refused = _post_passkey(other, step, own_key.get(_options(step, "get"), credential=own_key.credentials[0]))
    assert "not accepted" in refused.get_data(as_text=True)
    assert tenant.email not in other.get("/v1/openidc/account").get_data(as_text=True)


def test_a_passkey_then_another_persons_code_claims_only_the_code(app):
    """Where the e-mail code alone is a sign-in (`passkey_alone`), a code typed after someone else's
    passkey in the same request signs its owner in with the code only: never `mfa`."""
    http = app.test_client()
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    profile = {"email_address": f"holder-{tenant.user_id}@example.org"}
    assert http.post("/v1/user/create", json={"profile": profile}, headers=tenant.headers).status_code == 201
    key = _authenticator(app)
    _finish(http, _code_step(http, tenant, profile["email_address"]))
    _register(http, key)

    page = http.get(path_of(http.get(authorize_query(tenant, prompt="login consent")).headers["Location"]))
    consent = _post_passkey(http, page.get_data(as_text=True), key.get(_options(page.get_data(as_text=True), "get")))
    handle = query_of(consent.headers["Location"])["request"]
    fields = form_fields(http.get(path_of(consent.headers["Location"])).get_data(as_text=True))
    page = http.post("/v1/openidc/login", data={**fields, "request": handle, "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    answer = http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, tenant.email)})
    query = _finish(http, answer)
    response = exchange(http, tenant, query["code"])
    identity = b64_json(response.get_json()["id_token"].split(".")[1])
    assert identity["sub"] == str(tenant.user_id)
    assert identity["amr"] == ["otp"] and identity["acr"] == "urn:tessera:acr:email-code"
