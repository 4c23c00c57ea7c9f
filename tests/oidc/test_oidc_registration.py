"""Dynamic client registration (RFC 7591) and its management (RFC 7592) on the client tree: initial
access tokens of master clients, registered sub-clients that sign users in, and every refusal."""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from joserfc.jwk import ECKey

from app.db import transaction, utcnow
from app.extensions import db
from app.registration.models import InitialAccessToken
from tests.support.config import change_settings
from tests.support.oidc import REDIRECT_URI, Tenant, exchange, make_tenant, sign_in
from tests.support.servers import serve_on_loopback

REGISTER = "/v1/openidc/register"
NEW_URI = "https://rp.example.test/new"


def _initial_token(http, tenant) -> str:
    response = http.post("/v1/openidc/initial_access_tokens", json={"name": "ci"}, headers=tenant.headers)
    assert response.status_code == 201, response.get_json()
    assert response.headers["Cache-Control"] == "no-store"
    return response.get_json()["data"]["token"]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _register(http, token: str, **metadata):
    body = {"redirect_uris": [REDIRECT_URI], "client_name": "Registered RP", **metadata}
    return http.post(REGISTER, json=body, headers=_bearer(token))


@pytest.fixture
def registrar(client, tenant) -> tuple[Tenant, str]:
    return tenant, _initial_token(client, tenant)


def test_a_registered_client_is_a_sub_client_of_the_master_and_signs_users_in(client, registrar):
    tenant, token = registrar
    response = _register(
        client, token, token_endpoint_auth_method="client_secret_post", contacts=["ops@example.org"], software_id="x"
    )
    assert response.status_code == 201, response.get_json()
    assert response.headers["Cache-Control"] == "no-store"
    body = response.get_json()
    client_id = body["client_id"]
    assert body["client_secret"] and body["client_secret_expires_at"] == 0
    assert body["registration_access_token"] and isinstance(body["client_id_issued_at"], int)
    assert body["registration_client_uri"].endswith(f"{REGISTER}/{client_id}")
    assert body["redirect_uris"] == [REDIRECT_URI] and body["response_types"] == ["code"]
    assert body["token_endpoint_auth_method"] == "client_secret_post" and body["application_type"] == "web"
    assert "contacts" not in body and "software_id" not in body  # unknown metadata is ignored

    # The master sees it as a sub-client of its own.
    sub_client = client.get(f"/v1/sub_client/{client_id}", headers=tenant.headers)
    assert sub_client.status_code == 200 and sub_client.get_json()["data"]["parent_client_id"] == tenant.client_id
    assert sub_client.get_json()["data"]["name"] == "Registered RP"

    # A user of the master's tree signs in to it, and its secret redeems the code.
    registered = Tenant(
        int(client_id), body["client_secret"], tenant.api_token, REDIRECT_URI, tenant.user_id, tenant.email, tenant.did
    )
    query = sign_in(client, registered, scope="openid")
    tokens = exchange(client, registered, query["code"])
    assert tokens.status_code == 200, tokens.get_json()


def test_registration_needs_a_live_initial_access_token(app, client, registrar):
    tenant, token = registrar
    missing = client.post(REGISTER, json={"redirect_uris": [REDIRECT_URI]})
    assert missing.status_code == 401 and missing.get_json()["error"] == "invalid_token"
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert _register(client, "tit_not-a-token").status_code == 401
    assert _register(client, tenant.api_token).status_code == 401  # an API token is not an initial access token

    runner = app.test_cli_runner()
    issued = runner.invoke(args=["clients", "registration-token", str(tenant.client_id), "--json"])
    assert issued.exit_code == 0, issued.output
    from_cli = json.loads(issued.output)
    assert _register(client, from_cli["token"]).status_code == 201
    revoked = runner.invoke(args=["clients", "revoke-registration-token", str(from_cli["id"])])
    assert revoked.exit_code == 0, revoked.output
    assert _register(client, from_cli["token"]).status_code == 401


def test_initial_access_tokens_are_for_master_clients_only(app, client, registrar):
    tenant, token = registrar
    created = _register(client, token).get_json()
    sub_token = client.post("/v1/api_tokens", json={"name": "sub"}, headers={
        **tenant.headers, "x-api-subclient-id": created["client_id"]})  # fmt: skip
    assert sub_token.status_code == 201, sub_token.get_json()
    refused = client.post(
        "/v1/openidc/initial_access_tokens", json={}, headers={"x-api-token": sub_token.get_json()["data"]["token"]}
    )
    assert refused.status_code == 403 and refused.get_json()["code"] == "master_client_required"
    cli = app.test_cli_runner().invoke(args=["clients", "registration-token", created["client_id"]])
    assert cli.exit_code == 1 and "master" in cli.output


def test_an_initial_access_token_belongs_to_the_node_the_subclient_header_selects(app, client, tenant):
    node = client.post("/v1/sub_client", json={"name": "Partner desk"}, headers=tenant.headers)
    assert node.status_code == 201, node.get_json()
    node_id = node.get_json()["data"]["client_id"]
    issued = client.post(
        "/v1/openidc/initial_access_tokens",
        json={"name": "desk"},
        headers={**tenant.headers, "x-api-subclient-id": str(node_id)},
    )
    assert issued.status_code == 201, issued.get_json()
    assert issued.get_json()["data"]["client_id"] == node_id
    registered = _register(client, issued.get_json()["data"]["token"])
    assert registered.status_code == 201, registered.get_json()
    child = client.get(f"/v1/sub_client/{registered.get_json()['client_id']}", headers=tenant.headers).get_json()
    assert child["data"]["parent_client_id"] == node_id

    other = make_tenant(app, client, name="Another tenant")
    for selected, status in ((str(other.client_id), 404), ("999999999", 404), ("not-a-node", 422)):
        refused = client.post(
            "/v1/openidc/initial_access_tokens", json={}, headers={**tenant.headers, "x-api-subclient-id": selected}
        )
        assert refused.status_code == status, (selected, refused.get_json())
    assert (
        client.post("/v1/openidc/initial_access_tokens", json={}, headers=tenant.headers).get_json()["data"][
            "client_id"
        ]
        == tenant.client_id
    )


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": ["http://rp.example.test/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://rp.example.test/cb#fragment"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://localhost:8080/cb"]}, "invalid_redirect_uri"),  # web clients: never localhost
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": "https://rp.example.test/cb"}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"grant_types": ["client_credentials"], "response_types": ["code"]}, "invalid_client_metadata"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": "none"}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
        ({"jwks": {"keys": []}}, "invalid_client_metadata"),
        ({"jwks": {"keys": [{"kty": "EC", "kid": "k", "d": "secret"}]}}, "invalid_client_metadata"),
        (
            {"jwks": {"keys": [{"kty": "EC", "kid": "k"}]}, "jwks_uri": "https://rp.example.test/jwks"},
            "invalid_client_metadata",
        ),  # fmt: skip
        ({"id_token_signed_response_alg": "none"}, "invalid_client_metadata"),
        ({"application_type": "desktop"}, "invalid_client_metadata"),
        ({"client_name": "x" * 71}, "invalid_client_metadata"),
        ({"require_signed_request_object": "yes"}, "invalid_client_metadata"),
        ({"scope": "reports.read"}, "invalid_client_metadata"),  # without the client_credentials grant
        ({"grant_types": ["client_credentials"], "scope": 'bad"scope'}, "invalid_client_metadata"),
    ],
)
def test_metadata_is_checked_as_the_registration_specs_say(client, registrar, metadata, error):
    _tenant, token = registrar
    response = _register(client, token, **metadata)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"] == error and response.get_json()["error_description"]


def test_a_body_that_is_not_a_json_object_is_invalid_metadata(client, registrar):
    _tenant, token = registrar
    response = client.post(REGISTER, json=["https://rp.example.test/cb"], headers=_bearer(token))
    assert response.status_code == 400 and response.get_json()["error"] == "invalid_client_metadata"


def test_native_clients_may_redirect_to_loopback_and_machine_clients_need_none(client, registrar):
    _tenant, token = registrar
    native = _register(client, token, application_type="native", redirect_uris=["http://127.0.0.1:53111/cb"])
    assert native.status_code == 201 and native.get_json()["application_type"] == "native"
    assert native.get_json()["token_endpoint_auth_method"] == "client_secret_basic"  # the default
    allowed = client.put("/v1/openidc/registration_policy", headers=_tenant.headers,
                         json={"client_credentials_scopes": ["reports.read", "reports.write"]})  # fmt: skip
    assert allowed.status_code == 200, allowed.get_json()
    machine = client.post(
        REGISTER,
        json={
            "grant_types": ["client_credentials"],
            "token_endpoint_auth_method": "client_secret_post",
            "scope": "reports.read reports.write",
        },
        headers=_bearer(token),
    )
    assert machine.status_code == 201, machine.get_json()
    body = machine.get_json()
    issued = client.post(
        "/v1/openidc/token",
        data={
            "grant_type": "client_credentials",
            "client_id": body["client_id"],
            "client_secret": body["client_secret"],
        },
    )
    assert issued.status_code == 200, issued.get_json()
    assert body["scope"] == "reports.read reports.write" and issued.get_json()["scope"] == body["scope"]


def _machine(http, token: str, scope: str):
    body = {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_post", "scope": scope}
    return http.post(REGISTER, json=body, headers=_bearer(token))


def test_a_registration_asks_only_for_the_scopes_its_master_allows(app, client, registrar):
    tenant, token = registrar
    before = client.get("/v1/sub_client", headers=tenant.headers).get_json()
    for scope in ("admin payments.write", "reports.read"):  # none allowed by default
        refused = _machine(client, token, scope)
        assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_client_metadata", scope
        assert "allows (none)" in refused.get_json()["error_description"]
    assert client.get("/v1/sub_client", headers=tenant.headers).get_json() == before  # nothing was created
    policy = client.get("/v1/openidc/registration_policy", headers=tenant.headers)
    assert policy.status_code == 200 and policy.get_json()["data"] == {
        "client_id": tenant.client_id,
        "client_credentials_scopes": [],
    }

    allowed = client.put("/v1/openidc/registration_policy", json={"client_credentials_scopes": ["reports.read"]},
                         headers=tenant.headers)  # fmt: skip
    assert allowed.status_code == 200 and allowed.get_json()["data"]["client_credentials_scopes"] == ["reports.read"]
    over = _machine(client, token, "reports.read admin")
    assert over.status_code == 400 and over.get_json()["error"] == "invalid_client_metadata"
    assert "allows (reports.read); not admin" in over.get_json()["error_description"]
    registered = _machine(client, token, "reports.read")
    assert registered.status_code == 201, registered.get_json()
    body = registered.get_json()
    assert body["scope"] == "reports.read"

    # An update may not widen it either (RFC 7592).
    path = body["registration_client_uri"][body["registration_client_uri"].index(REGISTER) :]
    update = {"client_id": body["client_id"], "grant_types": ["client_credentials"],
              "token_endpoint_auth_method": "client_secret_post", "scope": "reports.read payments.write"}  # fmt: skip
    widened = client.put(path, json=update, headers=_bearer(body["registration_access_token"]))
    assert widened.status_code == 400 and widened.get_json()["error"] == "invalid_client_metadata"
    issued = client.post("/v1/openidc/token", data={"grant_type": "client_credentials", "client_id": body["client_id"],
                         "client_secret": body["client_secret"], "scope": "payments.write"})  # fmt: skip
    assert issued.status_code == 400 and issued.get_json()["error"] == "invalid_scope"


def test_the_registration_policy_is_the_acting_nodes_and_a_masters_to_set(app, client, registrar):
    tenant, token = registrar
    created = _register(client, token).get_json()
    as_node = {**tenant.headers, "x-api-subclient-id": created["client_id"]}
    set_on_node = client.put("/v1/openidc/registration_policy", json={"client_credentials_scopes": ["node.read"]},
                             headers=as_node)  # fmt: skip
    assert set_on_node.status_code == 200
    assert set_on_node.get_json()["data"] == {
        "client_id": int(created["client_id"]),
        "client_credentials_scopes": ["node.read"],
    }
    assert (
        client.get("/v1/openidc/registration_policy", headers=tenant.headers).get_json()["data"][
            "client_credentials_scopes"
        ]
        == []
    )
    node_token = client.post("/v1/openidc/initial_access_tokens", json={}, headers=as_node).get_json()["data"]["token"]
    assert _machine(client, node_token, "node.read").status_code == 201
    assert _machine(client, token, "node.read").status_code == 400  # the master's own registrations: none

    sub_token = client.post("/v1/api_tokens", json={"name": "sub"}, headers=as_node).get_json()["data"]["token"]
    for method in ("GET", "PUT"):
        refused = client.open("/v1/openidc/registration_policy", method=method, headers={"x-api-token": sub_token},
                              json={"client_credentials_scopes": ["admin"]})  # fmt: skip
        assert refused.status_code == 403 and refused.get_json()["code"] == "master_client_required", method
    other = make_tenant(app, client, name="Another tenant")
    outside = client.get(
        "/v1/openidc/registration_policy", headers={**tenant.headers, "x-api-subclient-id": str(other.client_id)}
    )
    assert outside.status_code == 404
    malformed = client.put("/v1/openidc/registration_policy", json={"client_credentials_scopes": ["two words"]},
                           headers=tenant.headers)  # fmt: skip
    assert malformed.status_code == 422

    cli = app.test_cli_runner().invoke(args=["clients", "registration-scopes", str(tenant.client_id), "ops.read"])
    assert cli.exit_code == 0, cli.output
    assert _machine(client, token, "ops.read").status_code == 201
    cleared = app.test_cli_runner().invoke(args=["clients", "registration-scopes", str(tenant.client_id)])
    assert cleared.exit_code == 0 and "no scope" in cleared.output
    assert _machine(client, token, "ops.read").status_code == 400


def test_a_private_key_jwt_client_registers_its_keys_and_gets_no_secret(client, registrar):
    _tenant, token = registrar
    key = ECKey.generate_key("P-256", private=True)
    jwks = {"keys": [{**key.as_dict(private=False), "kid": "k1"}]}
    response = _register(client, token, token_endpoint_auth_method="private_key_jwt", jwks=jwks)
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert "client_secret" not in body and body["jwks"] == jwks


@pytest.fixture
def jwks_server():
    served: dict = {"keys": [{**ECKey.generate_key("P-256", private=True).as_dict(private=False), "kid": "k"}]}
    hits: list[str] = []

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        hits.append(path)
        return "application/json", (json.dumps(served) if path == "/jwks.json" else "[]").encode()

    server = serve_on_loopback(answer)
    yield server.server_port, hits
    server.shutdown()


def test_a_jwks_uri_is_fetched_through_the_outbound_guard(app, client, registrar, jwks_server, monkeypatch):
    _tenant, token = registrar
    port, hits = jwks_server
    uri = f"http://127.0.0.1:{port}/jwks.json"
    refused = _register(client, token, token_endpoint_auth_method="private_key_jwt", jwks_uri=uri)
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_client_metadata"
    assert hits == []  # loopback is not public: the guard refused it without a request

    change_settings(monkeypatch, app, OIDC_OUTBOUND_ALLOW_HOSTS=f"127.0.0.1:{port}")
    accepted = _register(client, token, token_endpoint_auth_method="private_key_jwt", jwks_uri=uri)
    assert accepted.status_code == 201, accepted.get_json()
    assert accepted.get_json()["jwks_uri"] == uri and hits == ["/jwks.json"]

    not_a_key_set = _register(client, token, jwks_uri=f"http://127.0.0.1:{port}/other.json")
    assert not_a_key_set.status_code == 400 and not_a_key_set.get_json()["error"] == "invalid_client_metadata"
    assert hits == ["/jwks.json", "/other.json"]


@pytest.fixture
def redirecting_host():
    """A host on loopback that answers every request with a redirect."""

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", "https://elsewhere.example/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_url_that_cannot_be_fetched_is_refused_in_the_same_words_whatever_the_reason(
    app, client, registrar, redirecting_host, monkeypatch, caplog
):
    """Nothing of why (no name, a non-public address, what the host answered) reaches the
    registrant, who could otherwise map the internal network with registrations; the log has it."""
    _tenant, token = registrar
    change_settings(monkeypatch, app, OIDC_OUTBOUND_ALLOW_HOSTS=redirecting_host)
    caplog.set_level(logging.INFO, logger="app.oidc.outbound")
    urls = [
        "https://localhost/doc.json",
        "https://no-such-host.invalid/doc.json",
        f"http://{redirecting_host}/doc.json",
    ]
    for url in urls:
        for member, metadata in (
            ("jwks_uri", {"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": url}),
            ("sector_identifier_uri", {"subject_type": "pairwise", "sector_identifier_uri": url}),
        ):
            refused = _register(client, token, **metadata)
            assert refused.status_code == 400 and refused.get_json() == {
                "error": "invalid_client_metadata",
                "error_description": f"{member}: the document could not be fetched.",
            }, (url, refused.get_json())
    assert "localhost resolves to a non-public address" in caplog.text
    assert "Cannot resolve no-such-host.invalid" in caplog.text
    assert "HTTP 302" in caplog.text


def test_read_update_and_delete_with_the_registration_access_token(client, registrar):
    tenant, token = registrar
    created = _register(client, token).get_json()
    uri, first = created["registration_client_uri"], created["registration_access_token"]
    path = uri[uri.index(REGISTER) :]

    read = client.get(path, headers=_bearer(first))
    assert read.status_code == 200 and read.headers["Cache-Control"] == "no-store"
    second = read.get_json()["registration_access_token"]
    assert second != first and "client_secret" not in read.get_json()
    assert read.get_json()["client_id"] == created["client_id"]
    assert client.get(path, headers=_bearer(first)).status_code == 401  # replaced by the read

    other = _register(client, token).get_json()
    assert client.get(path, headers=_bearer(other["registration_access_token"])).status_code == 401

    updated = client.put(
        path,
        json={
            "client_id": created["client_id"],
            "redirect_uris": ["https://rp.example.test/new"],
            "client_name": "New",
        },
        headers=_bearer(second),
    )
    assert updated.status_code == 200, updated.get_json()
    third = updated.get_json()["registration_access_token"]
    assert updated.get_json()["redirect_uris"] == ["https://rp.example.test/new"]
    shown = client.get(f"/v1/sub_client/{created['client_id']}", headers=tenant.headers).get_json()["data"]
    assert shown["redirect_uris"] == ["https://rp.example.test/new"] and shown["name"] == "New"

    wrong_id = client.put(path, json={"client_id": other["client_id"], "redirect_uris": [REDIRECT_URI]},
                          headers=_bearer(third))  # fmt: skip
    assert wrong_id.status_code == 400 and wrong_id.get_json()["error"] == "invalid_client_metadata"
    wrong_secret = client.put(path, json={"client_secret": "guess", "redirect_uris": [REDIRECT_URI]},
                              headers=_bearer(third))  # fmt: skip
    assert wrong_secret.status_code == 400
    bad_uri = client.put(path, json={"redirect_uris": ["http://rp.example.test/cb"]}, headers=_bearer(third))
    assert bad_uri.status_code == 400 and bad_uri.get_json()["error"] == "invalid_redirect_uri"

    deleted = client.delete(path, headers=_bearer(third))
    assert deleted.status_code == 204
    assert client.get(path, headers=_bearer(third)).status_code == 401
    assert client.get(f"/v1/sub_client/{created['client_id']}", headers=tenant.headers).status_code == 404
    refused = client.post(
        "/v1/openidc/token",
        data={"grant_type": "client_credentials"},
        auth=(created["client_id"], created["client_secret"]),
    )
    assert refused.status_code == 401 and refused.get_json()["error"] == "invalid_client"


def test_discovery_names_the_registration_endpoint_unless_turned_off(app, client, registrar, monkeypatch):
    _tenant, token = registrar
    metadata = client.get("/.well-known/openid-configuration").get_json()
    assert metadata["registration_endpoint"].endswith(REGISTER)

    change_settings(monkeypatch, app, OIDC_DYNAMIC_REGISTRATION=False)
    assert "registration_endpoint" not in client.get("/.well-known/openid-configuration").get_json()
    assert _register(client, token).status_code == 404


def test_another_master_cannot_manage_or_see_the_registered_client(app, client, registrar):
    _tenant, token = registrar
    created = _register(client, token).get_json()
    stranger = make_tenant(app, client, name="Stranger")
    assert client.get(f"/v1/sub_client/{created['client_id']}", headers=stranger.headers).status_code == 404
    foreign = client.get(f"{REGISTER}/{created['client_id']}", headers=_bearer(_initial_token(client, stranger)))
    assert foreign.status_code == 401


def test_an_expired_initial_access_token_registers_nothing(app, client, tenant):
    issued = client.post("/v1/openidc/initial_access_tokens", json={"expires_in": 60}, headers=tenant.headers)
    assert issued.status_code == 201 and issued.get_json()["data"]["expires_at"]
    token = issued.get_json()["data"]["token"]
    assert _register(client, token).status_code == 201
    with app.app_context(), transaction():
        db.session.get(InitialAccessToken, issued.get_json()["data"]["id"]).expires_at = utcnow() - timedelta(seconds=1)
    expired = _register(client, token)
    assert expired.status_code == 401 and expired.get_json()["error"] == "invalid_token"
    too_short = client.post("/v1/openidc/initial_access_tokens", json={"expires_in": 5}, headers=tenant.headers)
    assert too_short.status_code == 422
