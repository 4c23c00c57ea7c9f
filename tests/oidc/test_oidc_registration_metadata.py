"""Per-client settings as client metadata of dynamic client registration: `subject_type` and
`sector_identifier_uri`, `userinfo_signed_response_alg`, `authorization_signed_response_alg`,
`dpop_bound_access_tokens` and the device grant, each answered back (RFC 7591/7592), honoured by the
token, userinfo, authorization and device endpoints, and refused with RFC 7591 errors."""

from __future__ import annotations

import base64
import json

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests.support.config import change_settings
from tests.support.dpop import TOKEN_URL, Holder
from tests.support.oidc import REDIRECT_URI, Tenant, exchange, sign_in
from tests.support.servers import serve_on_loopback

REGISTER = "/v1/openidc/register"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def registrar(client, tenant) -> tuple[Tenant, str]:
    response = client.post("/v1/openidc/initial_access_tokens", json={"name": "ci"}, headers=tenant.headers)
    assert response.status_code == 201, response.get_json()
    return tenant, response.get_json()["data"]["token"]


def _register(http, token: str, **metadata):
    body = {"redirect_uris": [REDIRECT_URI], "client_name": "Registered RP",
            "token_endpoint_auth_method": "client_secret_post", **metadata}  # fmt: skip
    return http.post(REGISTER, json=body, headers=_bearer(token))


def _registered(http, registrar, **metadata) -> tuple[Tenant, dict]:
    tenant, token = registrar
    response = _register(http, token, **metadata)
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    relying_party = Tenant(int(body["client_id"]), body["client_secret"], tenant.api_token, REDIRECT_URI,
                           tenant.user_id, tenant.email, tenant.did)  # fmt: skip
    return relying_party, body


def _refusal(response) -> str:
    assert response.status_code == 400, (response.status_code, response.get_json())
    return response.get_json()["error"]


def _claims(token: str) -> dict:
    segment = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def _manage(http, body: dict, method: str, **metadata):
    uri = body["registration_client_uri"]
    path = uri[uri.index(REGISTER) :]
    headers = _bearer(body["registration_access_token"])
    if method == "GET":
        return http.get(path, headers=headers)
    put = {"client_id": body["client_id"], "redirect_uris": [REDIRECT_URI],
           "token_endpoint_auth_method": "client_secret_post", **metadata}  # fmt: skip
    return http.put(path, json=put, headers=headers)


def test_defaults_are_answered_back(client, registrar):
    _rp, body = _registered(client, registrar)
    assert body["subject_type"] == "public" and body["dpop_bound_access_tokens"] is False
    for absent in ("sector_identifier_uri", "userinfo_signed_response_alg", "authorization_signed_response_alg"):
        assert absent not in body


def test_a_client_registered_dpop_bound_is_refused_tokens_without_a_proof(client, registrar):
    relying_party, body = _registered(client, registrar, dpop_bound_access_tokens=True)
    assert body["dpop_bound_access_tokens"] is True
    refused = exchange(client, relying_party, sign_in(client, relying_party)["code"])
    assert _refusal(refused) == "invalid_dpop_proof"

    holder = Holder()
    code = sign_in(client, relying_party)["code"]
    form = {"grant_type": "authorization_code", "code": code, "client_id": str(relying_party.client_id),
            "client_secret": relying_party.client_secret, "redirect_uri": REDIRECT_URI}  # fmt: skip
    bound = client.post("/v1/openidc/token", data=form, headers={"DPoP": holder.proof(TOKEN_URL)})
    if bound.status_code == 400 and bound.get_json()["error"] == "use_dpop_nonce":
        holder.nonce = bound.headers["DPoP-Nonce"]
        bound = client.post("/v1/openidc/token", data=form, headers={"DPoP": holder.proof(TOKEN_URL)})
    assert bound.status_code == 200, bound.get_json()
    assert bound.get_json()["token_type"] == "DPoP"

    read = _manage(client, body, "GET")
    assert read.status_code == 200 and read.get_json()["dpop_bound_access_tokens"] is True
    updated = _manage(client, read.get_json(), "PUT")  # left out: back to the default
    assert updated.status_code == 200 and updated.get_json()["dpop_bound_access_tokens"] is False
    assert exchange(client, relying_party, sign_in(client, relying_party)["code"]).status_code == 200


def test_a_client_registered_pairwise_gets_pairwise_subjects(client, registrar):
    relying_party, body = _registered(client, registrar, subject_type="pairwise")
    assert body["subject_type"] == "pairwise"
    tokens = exchange(client, relying_party, sign_in(client, relying_party, scope="openid")["code"]).get_json()
    claims = _claims(tokens["id_token"])
    assert claims["sub"] != str(relying_party.user_id) and "user_id" not in claims
    userinfo = client.get("/v1/openidc/user", headers=_bearer(tokens["access_token"])).get_json()
    assert userinfo["sub"] == claims["sub"]

    public = _manage(client, body, "PUT", subject_type="public")
    assert public.status_code == 200 and public.get_json()["subject_type"] == "public"
    tokens = exchange(client, relying_party, sign_in(client, relying_party, scope="openid")["code"]).get_json()
    assert _claims(tokens["id_token"])["sub"] == str(relying_party.user_id)


@pytest.fixture
def sector_document():
    """A sector identifier document on loopback: `served["body"]` is what it answers."""
    served: dict = {"body": b"[]", "hits": 0}

    def answer(_method: str, _path: str, _body: bytes) -> tuple[str, bytes]:
        served["hits"] += 1
        return "application/json", served["body"]

    server = serve_on_loopback(answer, name="sector-document")
    served["host"] = f"127.0.0.1:{server.server_port}"
    served["url"] = f"http://{served['host']}/sector.json"
    yield served
    server.shutdown()


def test_a_sector_identifier_uri_is_fetched_and_checked_as_the_operator_command_does(
    app, client, registrar, sector_document, monkeypatch
):
    _tenant, token = registrar
    url = sector_document["url"]
    second = "https://other.example.test/cb"
    uris = [REDIRECT_URI, second]
    guarded = _register(client, token, redirect_uris=uris, subject_type="pairwise", sector_identifier_uri=url)
    assert _refusal(guarded) == "invalid_client_metadata" and sector_document["hits"] == 0

    before = client.get("/v1/sub_client", headers=_tenant.headers).get_json()
    several_hosts = _register(client, token, redirect_uris=uris, subject_type="pairwise")
    assert _refusal(several_hosts) == "invalid_client_metadata"
    assert "several hosts" in several_hosts.get_json()["error_description"]
    assert client.get("/v1/sub_client", headers=_tenant.headers).get_json() == before  # nothing was created

    change_settings(monkeypatch, app, OIDC_OUTBOUND_ALLOW_HOSTS=sector_document["host"])
    sector_document["body"] = json.dumps([REDIRECT_URI]).encode()
    missing = _register(client, token, redirect_uris=uris, subject_type="pairwise", sector_identifier_uri=url)
    assert _refusal(missing) == "invalid_client_metadata"
    assert f"does not list the redirect URI {second}" in missing.get_json()["error_description"]
    sector_document["body"] = b"{not json"
    malformed = _register(client, token, redirect_uris=uris, subject_type="pairwise", sector_identifier_uri=url)
    assert _refusal(malformed) == "invalid_client_metadata"

    sector_document["body"] = json.dumps(uris).encode()
    accepted = _register(client, token, redirect_uris=uris, subject_type="pairwise", sector_identifier_uri=url)
    assert accepted.status_code == 201, accepted.get_json()
    body = accepted.get_json()
    assert body["subject_type"] == "pairwise" and body["sector_identifier_uri"] == url
    relying_party = Tenant(int(body["client_id"]), body["client_secret"], _tenant.api_token, REDIRECT_URI,
                           _tenant.user_id, _tenant.email, _tenant.did)  # fmt: skip
    tokens = exchange(client, relying_party, sign_in(client, relying_party, scope="openid")["code"]).get_json()
    assert _claims(tokens["id_token"])["sub"] != str(_tenant.user_id)

    read = _manage(client, body, "GET")
    assert read.get_json()["sector_identifier_uri"] == url


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"subject_type": "secret"}, "invalid_client_metadata"),
        ({"subject_type": 1}, "invalid_client_metadata"),
        ({"sector_identifier_uri": "https://sector.example.test/s.json"}, "invalid_client_metadata"),
        ({"subject_type": "pairwise", "sector_identifier_uri": "ftp://x/s.json"}, "invalid_client_metadata"),
        ({"userinfo_signed_response_alg": "HS256"}, "invalid_client_metadata"),
        ({"userinfo_signed_response_alg": "none"}, "invalid_client_metadata"),
        ({"authorization_signed_response_alg": "HS256"}, "invalid_client_metadata"),
        ({"dpop_bound_access_tokens": "yes"}, "invalid_client_metadata"),
        ({"grant_types": [DEVICE_GRANT, "urn:ietf:params:oauth:grant-type:jwt-bearer"]}, "invalid_client_metadata"),
    ],
)
def test_each_new_member_is_checked(client, registrar, metadata, error):
    _tenant, token = registrar
    assert _refusal(_register(client, token, **metadata)) == error


def test_pairwise_is_refused_while_turned_off(app, client, registrar, monkeypatch):
    _tenant, token = registrar
    change_settings(monkeypatch, app, OIDC_PAIRWISE_SUBJECTS=False)
    refused = _register(client, token, subject_type="pairwise")
    assert _refusal(refused) == "invalid_client_metadata"
    assert _register(client, token, subject_type="public").status_code == 201


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_the_registered_userinfo_alg_signs_userinfo(client, registrar, alg):
    relying_party, body = _registered(client, registrar, userinfo_signed_response_alg=alg)
    assert body["userinfo_signed_response_alg"] == alg
    tokens = exchange(client, relying_party, sign_in(client, relying_party, scope="openid email")["code"]).get_json()
    answer = client.get("/v1/openidc/user", headers=_bearer(tokens["access_token"]))
    assert answer.status_code == 200 and answer.mimetype == "application/jwt"
    keys = KeySet.import_key_set(client.get("/certs/jwks.json").get_json())
    claims = jwt.decode(answer.get_data(as_text=True), keys, algorithms=[alg]).claims
    assert claims["aud"] == str(relying_party.client_id) and claims["email"] == relying_party.email


def test_the_registered_authorization_alg_signs_jarm_responses(client, registrar):
    relying_party, body = _registered(client, registrar, authorization_signed_response_alg="ES256")
    assert body["authorization_signed_response_alg"] == "ES256"
    response = sign_in(client, relying_party, response_mode="jwt")["response"]
    assert json.loads(base64.urlsafe_b64decode(response.split(".")[0] + "=="))["alg"] == "ES256"
    keys = KeySet.import_key_set(client.get("/certs/jwks.json").get_json())
    claims = jwt.decode(response, keys, algorithms=["ES256"]).claims
    assert claims["aud"] == str(relying_party.client_id)
    assert exchange(client, relying_party, claims["code"]).status_code == 200


def test_a_client_registered_with_the_device_grant_starts_device_flows(client, registrar):
    _tenant, token = registrar
    response = _register(client, token, redirect_uris=[], grant_types=[DEVICE_GRANT])
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert DEVICE_GRANT in body["grant_types"]
    started = client.post(
        "/v1/openidc/device_authorization",
        data={"client_id": body["client_id"], "client_secret": body["client_secret"]},
    )
    assert started.status_code == 200, started.get_json()
    assert started.get_json()["device_code"] and started.get_json()["user_code"]

    without = _register(client, token).get_json()
    refused = client.post(
        "/v1/openidc/device_authorization",
        data={"client_id": without["client_id"], "client_secret": without["client_secret"]},
    )
    assert _refusal(refused) == "unauthorized_client"


def test_the_device_grant_is_refused_while_the_device_flow_is_off(app, client, registrar, monkeypatch):
    _tenant, token = registrar
    change_settings(monkeypatch, app, OIDC_DEVICE_FLOW=False)
    refused = _register(client, token, redirect_uris=[], grant_types=[DEVICE_GRANT])
    assert _refusal(refused) == "invalid_client_metadata"
    assert DEVICE_GRANT not in refused.get_json()["error_description"]


def test_an_update_may_not_move_a_pairwise_client_to_another_sector(client, registrar):
    relying_party, body = _registered(client, registrar, subject_type="pairwise")
    moved = _manage(client, body, "PUT", subject_type="pairwise", redirect_uris=["https://elsewhere.example.test/cb"])
    assert _refusal(moved) == "invalid_client_metadata"
    assert "would change its users' sub" in moved.get_json()["error_description"]
    tokens = exchange(client, relying_party, sign_in(client, relying_party, scope="openid")["code"]).get_json()
    assert _claims(tokens["id_token"])["sub"] != str(relying_party.user_id)  # still pairwise, still registered
