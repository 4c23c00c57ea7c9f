"""The issuer's endpoints in the OpenAPI document: VC API shapes, auth, problems."""

from __future__ import annotations


def _resolve(spec: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def test_issue_and_derive_have_the_vc_api_shapes(app):
    spec = app.test_client().get("/openapi.json").get_json()
    for path, request_members in [
        ("/credentials/issue", {"credential", "options"}),
        ("/credentials/derive", {"verifiableCredential", "options"}),
    ]:
        operation = spec["paths"][path]["post"]
        body = _resolve(spec, operation["requestBody"]["content"]["application/json"]["schema"])
        assert set(body["properties"]) == request_members
        created = _resolve(spec, operation["responses"]["201"]["content"]["application/json"]["schema"])
        assert set(created["properties"]) == {"verifiableCredential"}
        assert {"400", "401", "422"} <= set(operation["responses"])
    options = _resolve(
        spec,
        _resolve(
            spec, spec["paths"]["/credentials/issue"]["post"]["requestBody"]["content"]["application/json"]["schema"]
        )["properties"]["options"],
    )
    assert {"cryptosuite", "keyId", "mandatoryPointers", "credentialStatus", "userId"} <= set(options["properties"])


def test_key_management_documents_tenant_scoping(app):
    spec = app.test_client().get("/openapi.json").get_json()
    for path, method in [
        ("/v1/issuer/keys", "post"),
        ("/v1/issuer/keys", "get"),
        ("/v1/issuer/keys/{key_id}", "get"),
        ("/v1/issuer/keys/{key_id}/rotate", "post"),
        ("/v1/issuer/keys/{key_id}/retire", "post"),
    ]:
        operation = spec["paths"][path][method]
        assert {"401", "404", "422"} <= set(operation["responses"]), (path, method)
        assert "x-api-subclient-id" in {parameter["name"] for parameter in operation.get("parameters", [])}
    assert "security" not in spec["paths"]["/clients/{client_id}/did.json"]["get"]
