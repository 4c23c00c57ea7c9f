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
