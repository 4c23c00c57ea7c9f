"""What a verify request asks is checked or refused, never ignored: `options.challenge` and `options.domain`
(Data Integrity 1.0, "verify proof"), unknown options (422), and a body in another encoding than UTF-8
answered alike before dispatch and by the view."""

from __future__ import annotations

import copy
import json

import pytest

from app.credentials import routes
from app.credentials.cryptosuites import get_suite
from app.multiformats import base58btc_encode
from tests.support.credentials import to_the_view
from tests.support.issuing import Issuer
from tests.support.problems import assert_problem
from tests.support.vectors import suite_context

PATHS = ["/v1/vc/verify", "/credentials/verify"]


def _signed(issuer: Issuer, **proof_members: object) -> dict:
    """A credential of `issuer` with an eddsa-rdfc-2022 proof that also carries (and signs) `proof_members`."""
    suite = get_suite("eddsa-rdfc-2022")
    document = issuer.credential("did:example:holder")
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": suite.name,
        "created": "2024-02-01T00:00:00Z",
        "verificationMethod": issuer.verification_method,
        "proofPurpose": "assertionMethod",
        **proof_members,
    }
    data = suite.hash_data(document, options, "Ed25519", suite_context())
    signed = copy.deepcopy(document)
    signed["proof"] = {**options, "proofValue": "z" + base58btc_encode(issuer.private_key.sign(data))}
    return signed


@pytest.fixture
def view_calls(client, master, monkeypatch) -> list[dict]:
    """Calls of the views' verification, once the master token's first use (stamped by a view) is done."""
    issuer = Issuer()
    first = client.post(
        "/v1/vc/verify",
        json={"verifiableCredential": issuer.sign(issuer.credential("did:ex:1"))},
        headers=master.headers,
    )
    assert first.status_code == 200, first.get_data(as_text=True)
    calls: list[dict] = []
    verify = routes._verify

    def counted(args: dict):
        calls.append(args)
        return verify(args)

    monkeypatch.setattr(routes, "_verify", counted)
    return calls


def _both(client, master, view_calls, path: str, body: dict) -> tuple[int, dict]:
    """The answer before dispatch and the view's, which must be the same; returns it."""
    fast = client.post(path, json=body, headers=master.headers)
    assert view_calls == []
    view = to_the_view(client, path, json=body, headers=master.headers)
    assert len(view_calls) == 1
    view_calls.clear()
    assert (fast.status_code, fast.get_json()) == (view.status_code, view.get_json())
    return view.status_code, view.get_json()


@pytest.fixture(scope="module")
def bound_credential() -> dict:
    return _signed(Issuer(), challenge="c-1", domain=["a.example", "b.example"])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"challenge": "c-1"},
        {"domain": "a.example"},
        {"challenge": "c-1", "domain": ["b.example", "a.example"]},
        {"checks": ["proof"], "expectedProofPurpose": "assertionMethod"},
    ],
)
def test_the_expected_challenge_and_domain_verify(client, master, view_calls, bound_credential, path, options):
    request = {"verifiableCredential": bound_credential, "options": options}
    status, body = _both(client, master, view_calls, path, request)
    assert (status, body["verified"]) == (200, True), body["errors"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"challenge": "c-2"}, "invalid_challenge"),
        ({"challenge": "c-1", "domain": "c.example"}, "invalid_domain"),
        ({"domain": ["a.example", "c.example"]}, "invalid_domain"),
    ],
)
def test_another_challenge_or_domain_fails(client, master, view_calls, bound_credential, path, options, code):
    request = {"verifiableCredential": bound_credential, "options": options}
    status, body = _both(client, master, view_calls, path, request)
    assert (status, body["verified"]) == (400, False)
    assert [error["code"] for error in body["errors"]] == [code]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("options", "code"), [({"challenge": "c-1"}, "invalid_challenge"), ({"domain": "a.example"}, "invalid_domain")]
)
def test_a_proof_without_the_expected_challenge_or_domain_fails(client, master, view_calls, path, options, code):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    assert _both(client, master, view_calls, path, {"verifiableCredential": vc})[0] == 200

    status, body = _both(client, master, view_calls, path, {"verifiableCredential": vc, "options": options})
    assert (status, body["verified"]) == (400, False)
    assert [error["code"] for error in body["errors"]] == [code]
    assert "has none" in body["errors"][0]["detail"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"unknownOption": True}, "options.unknownOption"),
        ({"verificationMethod": "did:example:1#k"}, "options.verificationMethod"),
        ({"domain": 5}, "options.domain"),
        ({"domain": []}, "options.domain"),
        ({"challenge": ["c-1"]}, "options.challenge"),
        ({"checks": ["proof", "everything"]}, "options.checks"),
    ],
)
def test_an_option_the_verifier_does_not_honour_is_refused(
    client, master, view_calls, bound_credential, path, options, field
):
    request = {"verifiableCredential": bound_credential, "options": options}
    fast = client.post(path, json=request, headers=master.headers)
    view = to_the_view(client, path, json=request, headers=master.headers)
    for answer in (fast, view):
        assert_problem(answer, 422, "validation_failed", field=field)
    assert view_calls == []  # refused while reading the arguments, before any verification


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "encode",
    [lambda text: b"\xef\xbb\xbf" + text.encode(), lambda text: text.encode("utf-16")],
    ids=["utf-8-bom", "utf-16"],
)
def test_a_body_not_in_plain_utf8_is_refused_alike_before_dispatch_and_by_the_view(
    client, master, view_calls, path, encode
):
    issuer = Issuer()
    body = encode(json.dumps({"verifiableCredential": issuer.sign(issuer.credential("did:example:holder"))}))
    fast = client.post(path, data=body, content_type="application/json", headers=master.headers)
    view = to_the_view(client, path, data=body, content_type="application/json", headers=master.headers)
    for answer in (fast, view):
        assert_problem(answer, 400, "malformed_json")
    assert view_calls == []  # refused while reading the arguments, before any verification
    assert fast.get_json(force=True) == view.get_json(force=True)
