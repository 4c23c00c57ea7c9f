"""The issuer's endpoints in the OpenAPI document: VC API shapes, auth, problems."""

from __future__ import annotations


def _resolve(spec: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def test_issue_derive_and_present_have_the_vc_api_shapes(app):
    spec = app.test_client().get("/openapi.json").get_json()
    for path, request_members, created_members in [
        ("/credentials/issue", {"credential", "options"}, {"verifiableCredential"}),
        ("/credentials/derive", {"verifiableCredential", "options"}, None),
        ("/presentations", {"presentation", "options"}, {"verifiablePresentation"}),
    ]:
        operation = spec["paths"][path]["post"]
        body = _resolve(spec, operation["requestBody"]["content"]["application/json"]["schema"])
        assert set(body["properties"]) == request_members
        created = _resolve(spec, operation["responses"]["201"]["content"]["application/json"]["schema"])
        if created_members is None:  # the derived credential itself, not wrapped
            assert created["type"] == "object" and "properties" not in created
        else:
            assert set(created["properties"]) == created_members
        assert {"400", "401", "422"} <= set(operation["responses"])
    present_options = _resolve(
        spec,
        _resolve(spec, spec["paths"]["/presentations"]["post"]["requestBody"]["content"]["application/json"]["schema"])[
            "properties"
        ]["options"],
    )
    assert {"challenge", "domain", "verificationMethod", "cryptosuite", "proofPurpose"} <= set(
        present_options["properties"]
    )
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
