"""Every tenancy and user decision is visible in the OpenAPI document."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def spec(app):
    return app.test_client().get("/openapi.json").get_json()


def _schema(spec, name: str) -> dict:
    return spec["components"]["schemas"][name]


def _operation(spec, path: str, method: str) -> dict:
    return spec["paths"][path][method]


def _parameters(spec, path: str, method: str) -> dict:
    params = list(_operation(spec, path, method).get("parameters", [])) + list(
        spec["paths"][path].get("parameters", [])
    )
    return {(p["in"], p["name"]): p for p in params}


def test_sub_client_request_constraints(spec):
    props = _schema(spec, "SubClientCreateIn")["properties"]
    assert (props["name"]["minLength"], props["name"]["maxLength"]) == (1, 70)
    assert "name" in _schema(spec, "SubClientCreateIn")["required"]
    for field in ("address_1", "address_2"):
        assert (props[field]["minLength"], props[field]["maxLength"]) == (1, 100)
    for field in ("country", "province", "city"):
        assert (props[field]["minLength"], props[field]["maxLength"]) == (1, 255)
    assert "Europe/Paris" in props["timezone"]["enum"]
    assert props["domain"]["format"] == "hostname"
    assert props["subdomain"]["maxLength"] == 63
    assert props["redirect_uris"]["maxItems"] == 20
    assert "additionalProperties" in props["id_token_claims"]


def test_sub_client_response_has_every_field(spec):
    props = _schema(spec, "SubClientOut")["properties"]
    for field in ("client_id", "name", "address_1", "address_2", "country", "province", "city", "timezone",
                  "domain", "subdomain", "from_email_address", "esp_token", "recaptcha_key",
                  "recaptcha_threshold", "recaptcha_enabled", "created_at", "privacy_link",
                  "redirect_uris", "id_token_claims"):  # fmt: skip
        assert field in props, field
    assert (props["recaptcha_threshold"]["minimum"], props["recaptcha_threshold"]["maximum"]) == (0.0, 1.0)
    assert set(_schema(spec, "SubClientPage")["required"]) == {"data", "per_page", "current_page", "total_pages"}


def test_list_query_bounds_and_headers(spec):
    params = _parameters(spec, "/v1/sub_client", "get")
    assert params[("query", "page")]["schema"]["minimum"] == 1
    per_page = params[("query", "per_page")]["schema"]
    assert (per_page["minimum"], per_page["maximum"], per_page["default"]) == (1, 99, 20)
    assert params[("header", "x-api-subclient-id")]["required"] is False


@pytest.mark.parametrize(
    ("path", "method", "statuses"),
    [
        ("/v1/sub_client", "post", {"201", "401", "404", "409", "415", "422"}),
        ("/v1/sub_client", "get", {"200", "401", "404", "422"}),
        ("/v1/sub_client/{subclient_id}", "get", {"200", "401", "404", "422"}),
        ("/v1/sub_client/{subclient_id}", "put", {"200", "401", "403", "404", "409", "422"}),
        ("/v1/sub_client/{subclient_id}/client_secret", "post", {"200", "401", "404"}),
        ("/v1/api_tokens", "post", {"201", "401", "409", "422"}),
        ("/v1/api_tokens", "get", {"200", "401"}),
        ("/v1/api_tokens/{token_id}", "delete", {"204", "401", "404"}),
        ("/v1/user/create", "post", {"201", "401", "409", "422"}),
    ],
)
def test_operations_document_auth_and_errors(spec, path, method, statuses):
    operation = _operation(spec, path, method)
    assert statuses <= set(operation["responses"]), set(operation["responses"])
    assert operation["security"] == [{"ApiToken": []}]
    for status, response in operation["responses"].items():
        if status.startswith(("4", "5")):
            assert "application/problem+json" in response["content"]


def test_path_ids_are_positive_integers(spec):
    for path, name in [("/v1/sub_client/{subclient_id}", "subclient_id"), ("/v1/api_tokens/{token_id}", "token_id")]:
        method = "get" if "sub_client" in path else "delete"
        schema = _parameters(spec, path, method)[("path", name)]["schema"]
        assert (schema["type"], schema["minimum"]) == ("integer", 1)


def test_idempotency_key_on_creating_posts(spec):
    for path in ("/v1/sub_client", "/v1/user/create"):
        assert ("header", "Idempotency-Key") in _parameters(spec, path, "post")


def test_profile_enumerations_and_formats(spec):
    props = _schema(spec, "Profile")["properties"]
    assert _schema(spec, "Profile")["required"] == ["email_address"]
    assert props["gender"]["enum"] == ["male", "female", "non_binary", "other", "prefer_not_to_say"]
    assert "doctorate" in props["education"]["enum"] and "single" in props["marital_status"]["enum"]
    assert "employed" in props["employment_status"]["enum"]
    assert props["household_income"]["enum"][-1] == "200000-"
    assert props["mobile_country_code"]["pattern"] == r"^\+[0-9]{1,3}$"
    assert props["mobile_number"]["minimum"] == 1
    assert props["date_of_birth"]["format"] == "date"
    for field in ("residence_province", "residence_city"):
        assert (props[field]["minLength"], props[field]["maxLength"]) == (1, 100)
    countries = props["residence_country"]["enum"]
    assert "US" in countries and len(countries) > 240
    assert all(len(code) == 2 and code.isascii() and code.isupper() for code in countries)
    assert props["email_address"]["format"] == "email"
    user_out = _schema(spec, "UserOut")
    assert {"user_id", "did", "created_at", "profile"} <= set(user_out["required"])
    assert (user_out["properties"]["created_at"]["type"], user_out["properties"]["created_at"]["format"]) == (
        "string",
        "date-time",
    )
