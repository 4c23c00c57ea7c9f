"""A JSON body holding an unpaired surrogate (`"a\\ud800b"`, half of a UTF-16 pair, which no UTF-8
text can hold) is malformed JSON, refused where the body is parsed with the JSON Pointer of the
string, on every route that reads one: it never reaches a canonicalizer, a signature suite or the
database as a 500."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.issuer import create_key, issue, unsigned
from tests.support.problems import assert_problem

LONE = "a\\ud800b"  # as the JSON text spells it


def _with_lone_surrogate(document: dict, marker: str = "MARKER") -> str:
    """`document` as JSON text, its string `marker` replaced by one holding an unpaired surrogate."""
    return json.dumps(document).replace(json.dumps(marker), f'"{LONE}"')


@pytest.mark.parametrize(("suite", "key_type"), [("eddsa-rdfc-2022", "Ed25519"), ("bbs-2023", "Bls12381G2")])
def test_issuing_a_credential_with_a_lone_surrogate_is_malformed_json(client, master, suite, key_type):
    create_key(client, master.headers, key_type)
    body = {"credential": unsigned("did:example:holder", degree="MARKER"), "options": {"cryptosuite": suite}}
    response = client.post(
        "/credentials/issue", data=_with_lone_surrogate(body), content_type="application/json", headers=master.headers
    )

    problem = assert_problem(response, 400, "malformed_json")
    assert "/credential/credentialSubject/degree" in problem["detail"]
    assert "unpaired surrogate" in problem["detail"]


def test_a_lone_surrogate_in_a_member_name_is_malformed_json(client, master):
    create_key(client, master.headers, "Ed25519")
    text = json.dumps({"credential": unsigned("did:example:holder"), "options": {"cryptosuite": "eddsa-rdfc-2022"}})
    text = text.replace('"firstName"', f'"{LONE}"')
    response = client.post("/credentials/issue", data=text, content_type="application/json", headers=master.headers)

    problem = assert_problem(response, 400, "malformed_json")
    assert "a member name of the object at /credential/credentialSubject" in problem["detail"]


def test_a_surrogate_pair_is_a_character_like_any_other(client, master):
    create_key(client, master.headers, "Ed25519")
    body = {
        "credential": unsigned("did:example:holder", degree="MARKER"),
        "options": {"cryptosuite": "eddsa-rdfc-2022"},
    }
    text = json.dumps(body).replace('"MARKER"', '"a\\ud83d\\ude00b"')
    response = client.post("/credentials/issue", data=text, content_type="application/json", headers=master.headers)

    assert response.status_code == 201, response.get_data(as_text=True)
    assert response.json["verifiableCredential"]["credentialSubject"]["degree"] == "a\U0001f600b"


def test_deriving_from_a_credential_with_a_lone_surrogate_is_malformed_json(client, master):
    create_key(client, master.headers, "Bls12381G2")
    vc = issue(client, master.headers, unsigned("did:example:holder", degree="BSc"), cryptosuite="bbs-2023").json[
        "verifiableCredential"
    ]
    vc["credentialSubject"]["degree"] = "MARKER"
    body = {"verifiableCredential": vc, "options": {"selectivePointers": ["/credentialSubject/degree"]}}
    response = client.post(
        "/credentials/derive", data=_with_lone_surrogate(body), content_type="application/json", headers=master.headers
    )

    problem = assert_problem(response, 400, "malformed_json")
    assert "/verifiableCredential/credentialSubject/degree" in problem["detail"]


@pytest.mark.parametrize("path", ["/v1/vc/verify", "/credentials/verify"])
def test_verifying_a_credential_with_a_lone_surrogate_names_the_string_not_an_encoder(client, master, path):
    create_key(client, master.headers, "Ed25519")
    vc = issue(client, master.headers, unsigned("did:example:holder", degree="BSc")).json["verifiableCredential"]
    vc["credentialSubject"]["degree"] = "MARKER"
    response = client.post(
        path,
        data=_with_lone_surrogate({"verifiableCredential": vc}),
        content_type="application/json",
        headers=master.headers,
    )

    problem = assert_problem(response, 400, "malformed_json")
    assert "/verifiableCredential/credentialSubject/degree" in problem["detail"]
    assert "Unicode" not in response.get_data(as_text=True)


def test_no_endpoint_taking_a_json_body_lets_a_lone_surrogate_through(app, client, master):
    body = f'{{"name": "{LONE}", "profile": {{"email_address": "{LONE}@example.org"}}, "vc": {{"id": "{LONE}"}}}}'
    writes = [
        (rule, method)
        for rule in app.url_map.iter_rules()
        for method in sorted((rule.methods or set()) & {"POST", "PUT", "PATCH"})
    ]
    assert len(writes) > 20
    for rule, method in writes:
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda match: "1", rule.rule)
        response = client.open(path, method=method, data=body, content_type="application/json", headers=master.headers)
        assert response.status_code < 500, (method, rule.rule, response.status_code, response.get_data()[:300])
