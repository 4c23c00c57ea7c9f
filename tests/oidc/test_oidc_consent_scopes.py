"""What a client may see is what its registration offers and the user consented to (app/oidc/grants.py):
with `scope=openid` alone its own claims and the credential list; and the privacy page that names it."""

from __future__ import annotations

import base64
import json
import re

from app.extensions import db
from app.tenancy.models import Client
from app.tenancy.service import privacy_link
from tests.support.oidc import authorize_query, exchange, form_fields, make_tenant, path_of, query_of, sign_in


def _claims_of(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _tokens(http, tenant, **params) -> dict:
    response = exchange(http, tenant, sign_in(http, tenant, **params)["code"])
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _consent_page(http, tenant, **params):
    """Sign in (if needed) and stop on the consent page of a fresh authorization request."""
    sign_in(http, tenant, scope="openid")
    response = http.get(authorize_query(tenant, prompt="consent", **params))
    assert "/v1/openidc/consent" in response.headers["Location"], response.headers["Location"]
    page = http.get(path_of(response.headers["Location"]))
    assert page.status_code == 200
    return page.get_data(as_text=True)


def _listed(html: str, attribute: str) -> set[str]:
    return set(re.findall(rf'{attribute}="([^"]+)"', html))


def _remap(http, tenant, mapping: dict, **members) -> None:
    response = http.put(
        f"/v1/sub_client/{tenant.client_id}", json={"id_token_claims": mapping, **members}, headers=tenant.headers
    )
    assert response.status_code == 200, response.get_data(as_text=True)


def _credentials_listed(http, access_token: str):
    return http.get("/v1/openidc/credentials", headers=_bearer(access_token))


def test_a_client_of_the_interface_gets_its_claims_and_the_credential_list_with_openid(app, client):
    """Spec 2.1 and 4.4, design 6: `scope=openid` and the client id and secret in the body are all
    such a client sends; after consent it gets its field in the id_token and userinfo, and the list."""
    tenant = make_tenant(app, client, id_token_claims={"edu_username": "user_name", "edu_mail": "email_address"})
    html = _consent_page(client, tenant, scope="openid")
    assert _listed(html, "data-scope") == {"openid", "app_claims", "credentials"}
    assert _listed(html, "data-claim") == {"edu_username", "edu_mail"}
    assert "your user name" in html and "your email address" in html and "Your verified credentials" in html
    allowed = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    response = exchange(client, tenant, query_of(allowed.headers["Location"])["code"])
    issued = response.get_json()
    assert issued["scope"] == "openid" and issued["token_type"] == "Bearer" and issued["expire_in"] > 0
    identity = _claims_of(issued["id_token"])
    assert identity["user_id"] == tenant.user_id
    assert identity["edu_username"] == tenant.profile["user_name"] and identity["edu_mail"] == tenant.email
    info = client.get("/v1/openidc/user", headers=_bearer(issued["access_token"])).get_json()
    assert info["edu_username"] == tenant.profile["user_name"] and info["edu_mail"] == tenant.email
    listed = _credentials_listed(client, issued["access_token"])
    assert listed.status_code == 200 and listed.get_json()["data"] == []
    # Standard claims still come only with their scopes.
    assert "email" not in identity and "given_name" not in info


def test_nothing_of_the_release_without_consent(app, client):
    tenant = make_tenant(app, client)
    denied = sign_in(client, tenant, scope="openid", consent="deny")
    assert denied["error"] == "access_denied" and "code" not in denied
    silent = client.get(authorize_query(tenant, scope="openid", prompt="none"))
    assert query_of(silent.headers["Location"])["error"] == "consent_required"


def test_naming_app_claims_or_credentials_narrows_the_release(app, client):
    tenant = make_tenant(app, client)
    html = _consent_page(client, tenant, scope="openid credentials")
    assert _listed(html, "data-scope") == {"openid", "credentials"} and _listed(html, "data-claim") == set()
    allowed = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    narrowed = exchange(client, tenant, query_of(allowed.headers["Location"])["code"]).get_json()
    assert "edu_username" not in _claims_of(narrowed["id_token"])
    assert _credentials_listed(client, narrowed["access_token"]).status_code == 200

    html = _consent_page(client, tenant, scope="openid app_claims")
    assert _listed(html, "data-scope") == {"openid", "app_claims"}
    allowed = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    claims_only = exchange(client, tenant, query_of(allowed.headers["Location"])["code"]).get_json()
    assert _claims_of(claims_only["id_token"])["edu_username"] == tenant.profile["user_name"]
    refused = _credentials_listed(client, claims_only["access_token"])
    assert refused.status_code == 403 and refused.get_json()["code"] == "insufficient_scope"


def test_a_client_that_does_not_read_credentials_never_lists_them(app, client):
    tenant = make_tenant(app, client)
    _remap(client, tenant, {"edu_username": "user_name"}, reads_credentials=False)
    html = _consent_page(client, tenant, scope="openid credentials")
    assert "credentials" not in _listed(html, "data-scope")
    allowed = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    issued = exchange(client, tenant, query_of(allowed.headers["Location"])["code"]).get_json()
    refused = _credentials_listed(client, issued["access_token"])
    assert refused.status_code == 403 and refused.mimetype == "application/problem+json"
    assert refused.get_json()["code"] == "insufficient_scope"
    challenge = refused.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer") and 'error="insufficient_scope"' in challenge

    # Turned on again, the list needs the user's consent first: earlier tokens still cannot read it.
    _remap(client, tenant, {"edu_username": "user_name"}, reads_credentials=True)
    assert _credentials_listed(client, issued["access_token"]).status_code == 403
    silent = client.get(authorize_query(tenant, scope="openid", prompt="none"))
    assert query_of(silent.headers["Location"])["error"] == "consent_required"
    again = _tokens(client, tenant, scope="openid")
    assert _credentials_listed(client, again["access_token"]).status_code == 200


def test_a_changed_mapping_asks_for_consent_again(app, client):
    tenant = make_tenant(app, client)
    before = _tokens(client, tenant, scope="openid")
    assert _claims_of(before["id_token"])["edu_username"] == tenant.profile["user_name"]
    remembered = client.get(authorize_query(tenant, scope="openid", prompt="none"))
    stale_code = query_of(remembered.headers["Location"])["code"]

    _remap(client, tenant, {"edu_username": "user_name", "edu_surname": "last_name"})

    # Tokens and codes from before the change release nothing the user has not seen.
    info = client.get("/v1/openidc/user", headers=_bearer(before["access_token"])).get_json()
    assert "edu_username" not in info and "edu_surname" not in info
    stale = exchange(client, tenant, stale_code).get_json()
    assert "edu_username" not in _claims_of(stale["id_token"])
    # The credential list was not part of the change: it stays readable.
    assert _credentials_listed(client, before["access_token"]).status_code == 200
    silent = client.get(authorize_query(tenant, scope="openid", prompt="none"))
    assert query_of(silent.headers["Location"])["error"] == "consent_required"

    again = client.get(authorize_query(tenant, scope="openid"))
    assert "/v1/openidc/consent" in again.headers["Location"]
    html = client.get(path_of(again.headers["Location"])).get_data(as_text=True)
    assert _listed(html, "data-claim") == {"edu_username", "edu_surname"}
    allowed = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    after = exchange(client, tenant, query_of(allowed.headers["Location"])["code"]).get_json()
    identity = _claims_of(after["id_token"])
    assert identity["edu_username"] == tenant.profile["user_name"] and identity["edu_surname"] == "Lovelace"
    silent = client.get(authorize_query(tenant, scope="openid", prompt="none"))
    assert "code" in query_of(silent.headers["Location"])


def test_consent_to_a_registration_that_changed_meanwhile_is_refused(app, client):
    tenant = make_tenant(app, client)
    html = _consent_page(client, tenant, scope="openid")
    _remap(client, tenant, {"edu_username": "user_name", "edu_birthday": "date_of_birth"})
    response = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    assert response.status_code == 409 and response.mimetype == "text/html"
    assert "changed while you were deciding" in response.get_data(as_text=True)
    silent = client.get(authorize_query(tenant, scope="openid", prompt="none"))
    assert query_of(silent.headers["Location"])["error"] == "consent_required"

    html = _consent_page(client, tenant, scope="openid")
    _remap(client, tenant, {"edu_username": "user_name", "edu_birthday": "date_of_birth"}, reads_credentials=False)
    response = client.post("/v1/openidc/consent", data={**form_fields(html), "decision": "allow"})
    assert response.status_code == 409


def test_discovery_advertises_the_dedicated_scopes(client):
    meta = client.get("/.well-known/openid-configuration").get_json()
    assert {"openid", "app_claims", "credentials"} <= set(meta["scopes_supported"])


def test_privacy_pages_cannot_be_listed_by_walking_client_ids(app, client):
    tenant = make_tenant(app, client, name="Hidden Name University")
    for guess in (str(tenant.client_id), f"{tenant.client_id}-", f"{tenant.client_id}-{'0' * 32}"):
        response = client.get(f"/privacy/{guess}")
        assert response.status_code == 404 and "Hidden Name University" not in response.get_data(as_text=True)
    with app.app_context():
        link = privacy_link(db.session.get(Client, tenant.client_id))
        db.session.rollback()
    reference = link.rsplit("/", 1)[1]
    other = make_tenant(app, client, name="Other University")
    tag = reference.split("-", 1)[1]
    assert client.get(f"/privacy/{other.client_id}-{tag}").status_code == 404
    # The link the API and the sign-in pages give leads to the page.
    listed = client.get(f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers).get_json()["data"]
    assert listed["privacy_link"] == link
    page = client.get(path_of(link))
    assert page.status_code == 200 and "Hidden Name University" in page.get_data(as_text=True)
