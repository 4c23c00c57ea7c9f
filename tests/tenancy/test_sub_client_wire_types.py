"""Sub-client members never set are empty strings (never `null`), as the interface types them: strings."""

from __future__ import annotations

from tests.support.tenancy import create_sub_client

OPTIONAL = ("address_1", "address_2", "country", "province", "city", "domain", "subdomain")


_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def _type_errors(client, document: dict) -> list[str]:
    """Members whose JSON type differs from what the OpenAPI document declares (null included)."""
    schema = client.get("/openapi.json").get_json()["components"]["schemas"]["SubClientOut"]
    errors = [f"{name} missing" for name in schema.get("required", []) if name not in document]
    for name, value in document.items():
        declared = schema["properties"][name].get("type")
        if declared and not isinstance(value, _TYPES[declared]):
            errors.append(f"{name}: {value!r} is not {declared}")
    return errors


def test_unset_members_are_empty_strings_and_match_openapi(client, master):
    sub = create_sub_client(client, master.headers, name="Bare")
    read = client.get(f"/v1/sub_client/{sub['client_id']}", headers=master.headers).get_json()["data"]
    listed = client.get("/v1/sub_client", headers=master.headers).get_json()["data"]
    for document in (sub, read, *listed):
        assert None not in document.values(), document
        for member in OPTIONAL:
            assert isinstance(document[member], str)
        assert _type_errors(client, document) == []
    assert {member: read[member] for member in OPTIONAL} == dict.fromkeys(OPTIONAL, "")


def test_openapi_never_types_a_sub_client_member_nullable(client):
    schema = client.get("/openapi.json").get_json()["components"]["schemas"]["SubClientOut"]
    assert not [name for name, prop in schema["properties"].items() if prop.get("nullable")]
    assert set(OPTIONAL) <= set(schema["required"])
    assert "empty string while not set" in schema["properties"]["city"]["description"]


def test_cleared_member_disappears(client, master):
    sub = create_sub_client(client, master.headers, city="Lyon")
    cleared = client.put(f"/v1/sub_client/{sub['client_id']}", json={"city": None}, headers=master.headers)
    assert cleared.status_code == 200
    assert cleared.get_json()["data"]["city"] == ""


def test_a_read_answers_exactly_what_an_update_answered(client, master):
    # The read is served from a row of columns, the update from the ORM object: same bytes.
    members = {
        "name": "Ünïcode Ltd", "address_1": "1 rue", "country": "FR", "city": "Lyon", "timezone": "Europe/Paris",
        "domain": "example.org", "subdomain": "readback", "redirect_uris": ["https://a.example/cb"],
        "id_token_claims": {"edu_username": "user_name"}, "logo_url": "https://a.example/logo.png",
        "accent_color": "#AABBCC", "jwks_uri": "https://a.example/jwks", "client_credentials_scopes": ["a:b"],
        "issue_refresh_tokens": True, "refresh_token_ttl": 3600, "signing_alg": "ES256",
    }  # fmt: skip
    sub = create_sub_client(client, master.headers, name="Full")
    updated = client.put(f"/v1/sub_client/{sub['client_id']}", json=members, headers=master.headers)
    assert updated.status_code == 200, updated.get_data(as_text=True)
    read = client.get(f"/v1/sub_client/{sub['client_id']}", headers=master.headers)
    assert read.status_code == 200 and read.get_data() == updated.get_data()
    assert read.get_json()["data"]["from_email_address"] == "no-reply@readback.example.org"
