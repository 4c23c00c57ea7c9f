"""Pairwise subject identifiers (OpenID Connect Core §8) through the operator command, dynamic
registration and the real endpoints: one `sub` per user and sector in the id_token, userinfo,
introspection and back-channel logout tokens, public clients unchanged, each refusal of the sector
checks, and no sector taken from redirect URIs a client's tokens do not travel through."""

from __future__ import annotations

import base64
import json

import pytest
from joserfc.jwk import ECKey

from tests.support.config import change_settings, set_settings
from tests.support.credentials import wait_for_verification
from tests.support.environment import USING_POSTGRES
from tests.support.issuing import Issuer
from tests.support.oidc import Tenant, add_sub_client, authorize_query, device_tokens, exchange, path_of, sign_in
from tests.support.servers import LogoutReceiver, serve_on_loopback

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _set_subject(app, client_id: int, *options: str):
    return app.test_cli_runner().invoke(args=["clients", "set-subject", str(client_id), *options])


def _pairwise(app, client_id: int, *options: str) -> dict:
    result = _set_subject(app, client_id, "pairwise", *options)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _app_of(client, tenant: Tenant, redirect_uris: list[str], name: str) -> Tenant:
    """A sub-client of the tenant's tree, as a relying party of the same user."""
    client_id, secret = add_sub_client(client, tenant, redirect_uris=redirect_uris, name=name)
    return Tenant(client_id, secret, tenant.api_token, redirect_uris[0], tenant.user_id, tenant.email, tenant.did)


def _tokens(client, relying_party: Tenant) -> dict:
    response = exchange(client, relying_party, sign_in(client, relying_party)["code"])
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _introspected(client, relying_party: Tenant, token: str) -> dict:
    response = client.post(
        "/v1/openidc/introspect",
        data={"token": token},
        auth=(str(relying_party.client_id), relying_party.client_secret),
    )
    assert response.status_code == 200
    return response.get_json()


def test_one_subject_per_sector_and_public_clients_unchanged(app, client, tenant):
    same_sector = _app_of(client, tenant, ["https://rp.example.test/second"], "Same sector")
    other_sector = _app_of(client, tenant, ["https://other.example.test/cb"], "Other sector")
    public = _app_of(client, tenant, ["https://rp.example.test/public"], "Still public")
    assert _pairwise(app, tenant.client_id) == {
        "client_id": tenant.client_id,
        "subject_type": "pairwise",
        "sector_identifier": "rp.example.test",
    }
    _pairwise(app, same_sector.client_id)
    assert _pairwise(app, other_sector.client_id)["sector_identifier"] == "other.example.test"

    subjects = {}
    for relying_party in (tenant, same_sector, other_sector):
        tokens = _tokens(client, relying_party)
        id_token = _claims(tokens["id_token"])
        assert "user_id" not in id_token and "did" not in id_token
        access_token = _claims(tokens["access_token"])
        assert access_token["sub"] == id_token["sub"] and "user_id" not in access_token
        assert access_token["user_ref"] not in (str(tenant.user_id), tenant.user_id)  # sealed for the service
        userinfo = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {tokens['access_token']}"})
        assert userinfo.status_code == 200
        assert userinfo.get_json()["sub"] == id_token["sub"] and "user_id" not in userinfo.get_json()
        introspected = _introspected(client, relying_party, tokens["access_token"])
        assert introspected["sub"] == id_token["sub"] and "user_id" not in introspected
        subjects[relying_party.client_id] = id_token["sub"]

    assert subjects[tenant.client_id] == subjects[same_sector.client_id]
    assert subjects[tenant.client_id] != subjects[other_sector.client_id]
    assert str(tenant.user_id) not in subjects.values()
    assert _claims(_tokens(client, tenant)["id_token"])["sub"] == subjects[tenant.client_id]  # stable

    public_tokens = _tokens(client, public)
    id_token = _claims(public_tokens["id_token"])
    assert id_token["sub"] == str(tenant.user_id) and id_token["user_id"] == tenant.user_id
    assert id_token["did"] == tenant.did
    assert _introspected(client, public, public_tokens["access_token"])["sub"] == str(tenant.user_id)


def test_refresh_token_introspection_uses_the_pairwise_subject(app, client, tenant):
    _pairwise(app, tenant.client_id)
    response = exchange(client, tenant, sign_in(client, tenant, scope="openid offline_access")["code"])
    tokens = response.get_json()
    introspected = _introspected(client, tenant, tokens["refresh_token"])
    assert introspected["token_type"] == "refresh_token"
    assert introspected["sub"] == _claims(tokens["id_token"])["sub"] and "user_id" not in introspected


@pytest.fixture
def sector_document():
    """A sector identifier document on loopback: `served["body"]` is what it answers; the same server
    answers `/jwks.json` with `served["jwks"]` (a client's key set)."""
    served: dict = {"body": b"[]", "jwks": {"keys": []}}

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        if path == "/jwks.json":
            return "application/json", json.dumps(served["jwks"]).encode()
        return "application/json", served["body"]

    server = serve_on_loopback(answer, name="sector-document")
    served["host"] = f"127.0.0.1:{server.server_port}"
    served["url"] = f"http://{served['host']}/sector.json"
    yield served
    server.shutdown()


def test_several_redirect_hosts_need_a_sector_document_listing_them(app, client, tenant, sector_document):
    uris = ["https://a.example.test/cb", "https://b.example.test/cb"]
    two_hosts = _app_of(client, tenant, uris, "Two hosts")
    refused = _set_subject(app, two_hosts.client_id, "pairwise")
    assert refused.exit_code == 1 and "several hosts" in refused.output

    url = sector_document["url"]
    not_allowed = _set_subject(app, two_hosts.client_id, "pairwise", "--sector-identifier-uri", url)
    assert not_allowed.exit_code == 1 and "https" in not_allowed.output

    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=sector_document["host"])
    try:
        sector_document["body"] = json.dumps(uris[:1]).encode()
        missing = _set_subject(app, two_hosts.client_id, "pairwise", "--sector-identifier-uri", url)
        assert missing.exit_code == 1 and "does not list the redirect URI https://b.example.test/cb" in missing.output
        sector_document["body"] = b"{not json"
        malformed = _set_subject(app, two_hosts.client_id, "pairwise", "--sector-identifier-uri", url)
        assert malformed.exit_code == 1 and "JSON array" in malformed.output

        sector_document["body"] = json.dumps([*uris, "https://c.example.test/cb"]).encode()
        assert _pairwise(app, two_hosts.client_id, "--sector-identifier-uri", url)["sector_identifier"] == "127.0.0.1"
    finally:
        set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")
    sub = _claims(_tokens(client, two_hosts)["id_token"])["sub"]
    assert sub != str(tenant.user_id)

    moved = client.put(
        f"/v1/sub_client/{two_hosts.client_id}", headers=tenant.headers, json={"redirect_uris": [uris[0]]}
    )
    assert moved.status_code == 200
    changed = _set_subject(app, two_hosts.client_id, "pairwise")
    assert changed.exit_code == 1 and "would change its users' sub" in changed.output


def test_the_operator_may_turn_pairwise_subjects_off(app, client, tenant):
    already = _app_of(client, tenant, ["https://kept.example.test/cb"], "Already pairwise")
    _pairwise(app, already.client_id)
    set_settings(app, OIDC_PAIRWISE_SUBJECTS=False)
    try:
        metadata = client.get("/.well-known/openid-configuration").get_json()
        assert metadata["subject_types_supported"] == ["public"]
        refused = _set_subject(app, tenant.client_id, "pairwise")
        assert refused.exit_code == 1 and "turned off" in refused.output
        assert _claims(_tokens(client, already)["id_token"])["sub"] != str(tenant.user_id)  # kept, not changed
    finally:
        set_settings(app, OIDC_PAIRWISE_SUBJECTS=True)
    back = _set_subject(app, already.client_id, "public")
    assert back.exit_code == 0 and json.loads(back.output)["subject_type"] == "public"
    assert _set_subject(app, 999999999, "public").exit_code == 1


@pytest.fixture
def receiver(app, real_worker):
    receiver = LogoutReceiver()
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=receiver.host)
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start(extra_env={"OIDC_OUTBOUND_ALLOW_HOSTS": receiver.host})
    yield receiver
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")
    receiver.server.shutdown()
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start()


def test_back_channel_logout_tokens_carry_each_client_s_subject(app, client, tenant, receiver):
    other = _app_of(client, tenant, ["https://other.example.test/cb"], "Other sector")
    _pairwise(app, tenant.client_id)
    _pairwise(app, other.client_id)
    for relying_party, query in ((tenant, "?app=first"), (other, "?app=second")):
        response = client.put(
            f"/v1/sub_client/{relying_party.client_id}",
            headers=tenant.headers,
            json={"backchannel_logout_uri": receiver.url + query},
        )
        assert response.status_code == 200, response.get_json()
    first = _claims(_tokens(client, tenant)["id_token"])
    second = _claims(_tokens(client, other)["id_token"])
    assert first["sub"] != second["sub"] and first["sid"] == second["sid"]

    id_token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["id_token"]
    logout = client.get("/v1/openidc/logout", query_string={"id_token_hint": id_token})
    assert logout.status_code in (200, 303)
    tokens = receiver.wait_for(2)
    assert {(_claims(token)["aud"], _claims(token)["sub"]) for token in tokens} == {
        (str(tenant.client_id), first["sub"]),
        (str(other.client_id), second["sub"]),
    }


@pytest.fixture
def initial_token(client, tenant) -> str:
    """An initial access token of the tenant: dynamic registration makes sub-clients of its tree."""
    response = client.post("/v1/openidc/initial_access_tokens", json={"name": "pairwise"}, headers=tenant.headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["data"]["token"]


def _register(client, token: str, **metadata):
    body = {"client_name": "Registered", "token_endpoint_auth_method": "client_secret_post", **metadata}
    return client.post("/v1/openidc/register", json=body, headers={"Authorization": f"Bearer {token}"})


def _registered(client, tenant: Tenant, token: str, **metadata) -> Tenant:
    response = _register(client, token, **metadata)
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    return Tenant(int(body["client_id"]), body["client_secret"], tenant.api_token, tenant.redirect_uri,
                  tenant.user_id, tenant.email, tenant.did)  # fmt: skip


def test_a_client_whose_tokens_skip_its_redirect_uris_gets_a_sector_of_its_own(app, client, tenant, initial_token):
    _pairwise(app, tenant.client_id)  # the relying party of rp.example.test
    victim = _claims(_tokens(client, tenant)["id_token"])["sub"]

    # The device flow never sends the browser to the redirect URI this client lists.
    device_only = _registered(
        client, tenant, initial_token, grant_types=[DEVICE_GRANT], redirect_uris=[tenant.redirect_uri],
        subject_type="pairwise",
    )  # fmt: skip
    device = _claims(device_tokens(client, device_only)["id_token"])
    assert device["sub"] != victim and "user_id" not in device
    assert _claims(_tokens(client, device_only)["id_token"])["sub"] == device["sub"]  # one sector, its own

    # Neither does a client registered for client_credentials alone.
    machine = _registered(
        client, tenant, initial_token, grant_types=["client_credentials"], redirect_uris=[tenant.redirect_uri],
        subject_type="pairwise",
    )  # fmt: skip
    assert _claims(_tokens(client, machine)["id_token"])["sub"] not in (victim, device["sub"])

    # A code-flow client of the same host still shares the sector, its codes going only there.
    sibling = _registered(client, tenant, initial_token, redirect_uris=[tenant.redirect_uri], subject_type="pairwise")
    assert _claims(_tokens(client, sibling)["id_token"])["sub"] == victim


def test_a_sector_taken_from_redirect_uris_is_refused_to_the_device_flow(app, client, tenant):
    assert _pairwise(app, tenant.client_id)["sector_identifier"] == "rp.example.test"
    victim = _claims(_tokens(client, tenant)["id_token"])["sub"]
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"grant_types": [DEVICE_GRANT]}
    )
    assert response.status_code == 200, response.get_json()

    refused = client.post(
        "/v1/openidc/device_authorization", auth=(str(tenant.client_id), tenant.client_secret)
    )  # fmt: skip
    assert refused.status_code == 400 and refused.get_json()["error"] == "unauthorized_client"
    assert "comes from its redirect URIs" in refused.get_json()["error_description"]
    kept = _set_subject(app, tenant.client_id, "pairwise")  # its sector cannot be moved in place
    assert kept.exit_code == 1 and "would change its users' sub" in kept.output

    assert _set_subject(app, tenant.client_id, "public").exit_code == 0
    assert _pairwise(app, tenant.client_id)["sector_identifier"] == f"client:{tenant.client_id}"
    assert _claims(device_tokens(client, tenant)["id_token"])["sub"] != victim


def test_a_sector_document_vouches_for_a_device_client_by_its_keys(
    app, client, tenant, initial_token, sector_document, monkeypatch
):
    change_settings(monkeypatch, app, OIDC_OUTBOUND_ALLOW_HOSTS=sector_document["host"])
    key = ECKey.generate_key("P-256", private=True)
    sector_document["jwks"] = {"keys": [{**key.as_dict(private=False), "kid": key.thumbprint(), "alg": "ES256"}]}
    jwks_uri = f"http://{sector_document['host']}/jwks.json"
    device = {"grant_types": [DEVICE_GRANT], "redirect_uris": [tenant.redirect_uri], "subject_type": "pairwise",
              "sector_identifier_uri": sector_document["url"]}  # fmt: skip

    sector_document["body"] = json.dumps([tenant.redirect_uri]).encode()  # the sector's own redirect URIs
    by_redirect_uris = _register(client, initial_token, **device)
    assert by_redirect_uris.status_code == 400, by_redirect_uris.get_json()
    assert "must also list its jwks_uri" in by_redirect_uris.get_json()["error_description"]
    by_secret = _register(client, initial_token, **device, jwks_uri=jwks_uri)
    assert by_secret.status_code == 400 and "private_key_jwt" in by_secret.get_json()["error_description"]

    sector_document["body"] = json.dumps([tenant.redirect_uri, jwks_uri]).encode()
    vouched = _register(
        client, initial_token, **device, jwks_uri=jwks_uri, token_endpoint_auth_method="private_key_jwt"
    )
    assert vouched.status_code == 201, vouched.get_json()
    assert vouched.get_json()["sector_identifier_uri"] == sector_document["url"]


def _problem(response) -> tuple[int, str, str]:
    body = response.get_json()
    return response.status_code, body["code"], body["detail"]


def test_a_pairwise_client_learns_no_user_id_nor_did_from_the_user_routes(app, client, tenant):
    public = _app_of(client, tenant, ["https://rp.example.test/public"], "Still public")
    issuer = Issuer()
    stored = client.post(
        "/v1/vc/issuer/store", json={"vc": issuer.sign(issuer.credential(tenant.did))}, headers=tenant.headers
    )
    assert stored.status_code == 201, stored.get_json()
    assert wait_for_verification(client, tenant.headers, stored.get_json()["data"]["cid"])["verification"]["state"] == (
        "verified"
    )
    _pairwise(app, tenant.client_id)
    token = _tokens(client, tenant)["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}

    # The same refusal at every id, the user's own included: no oracle, no credential naming the DID.
    answers = {
        _problem(client.post(f"/v1/user/{user_id}/credentials/{kind}", headers=bearer))
        for user_id in (tenant.user_id, tenant.user_id + 1, 999999999)
        for kind in ("email", "social/platform_b")
    }
    assert len(answers) == 1
    status, code, _detail = answers.pop()
    assert (status, code) == (403, "pairwise_subject")
    listed = client.get("/v1/openidc/credentials", headers=bearer)
    assert listed.status_code == 403 and listed.get_json()["code"] == "pairwise_subject"
    assert tenant.did not in listed.get_data(as_text=True)

    # Its consent page names neither the credential list nor the DID.
    page = client.get(authorize_query(tenant, scope="openid", prompt="consent"))
    html = client.get(path_of(page.headers["Location"])).get_data(as_text=True)
    assert 'data-scope="credentials"' not in html and "not your account number or DID" in html

    # A public client of the interface still gets all of it.
    public_bearer = {"Authorization": f"Bearer {_tokens(client, public)['access_token']}"}
    public_list = client.get("/v1/openidc/credentials", headers=public_bearer)
    assert public_list.status_code == 200, public_list.get_json()
    assert [vc["credentialSubject"]["id"] for vc in public_list.get_json()["data"]] == [tenant.did]
    email = client.post(f"/v1/user/{tenant.user_id}/credentials/email", headers=public_bearer)
    assert email.status_code == 201, email.get_json()
    assert email.get_json()["verifiableCredential"]["credentialSubject"]["id"] == tenant.did
    own_link = client.post(f"/v1/user/{tenant.user_id}/credentials/social/platform_b", headers=public_bearer)
    assert own_link.status_code == 404 and own_link.get_json()["code"] == "social_link_not_found"
