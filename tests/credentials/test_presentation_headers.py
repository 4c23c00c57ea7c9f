"""bbs-2023 presentation headers at verification: `options.presentationHeader`, a challenge carried as
the header, a header nothing checked (a warning), on `POST /credentials/verify` and inside presentations."""

from __future__ import annotations

from tests.support.issuer import create_key, issue, unsigned, verify
from tests.support.issuing import Issuer
from tests.support.oidc import make_tenant
from tests.support.presentations import codes, sign_presentation, unsigned_presentation, verify_presentation


def _derive(client, headers, vc: dict, header: str | None = None) -> dict:
    options = {"selectivePointers": ["/credentialSubject/degree"]}
    if header is not None:
        options["presentationHeader"] = header
    body = {"verifiableCredential": vc, "options": options}
    response = client.post("/credentials/derive", json=body, headers=headers)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.json


def _verify(client, headers, vc: dict, options: dict) -> dict:
    body = {"verifiableCredential": vc, "options": options}
    response = client.post("/credentials/verify", json=body, headers=headers)
    assert response.status_code in (200, 400), response.get_data(as_text=True)
    return response.json


def _warnings(answer: dict) -> list[str]:
    return [warning["code"] for warning in answer["warnings"]]


def test_a_disclosure_bound_to_a_header_verifies_only_with_that_header(app, client):
    tenant = make_tenant(app, client, name="Issuer")
    create_key(client, tenant.headers, "Bls12381G2")
    vc = issue(client, tenant.headers, unsigned("did:example:holder", degree="BSc")).json["verifiableCredential"]
    bound = _derive(client, tenant.headers, vc, "nonce-1")
    verifier = make_tenant(app, client, name="Verifier")

    answer = _verify(client, verifier.headers, bound, {"presentationHeader": "nonce-1"})
    assert answer["verified"] is True and answer["warnings"] == [], answer
    assert codes(_verify(client, verifier.headers, bound, {"presentationHeader": "nonce-2"})) == [
        "presentation_header_mismatch"
    ]
    # The verifier's challenge is carried as the header (a derived proof has no challenge of its own).
    assert _verify(client, verifier.headers, bound, {"challenge": "nonce-1"})["verified"] is True
    assert codes(_verify(client, verifier.headers, bound, {"challenge": "nonce-2"})) == ["invalid_challenge"]

    # Verified without a header, a bound disclosure says that nothing checked what it is bound to.
    unchecked = _verify(client, verifier.headers, bound, {})
    assert unchecked["verified"] is True and _warnings(unchecked) == ["presentation_header_not_checked"]

    unbound = _derive(client, tenant.headers, vc)
    assert _verify(client, verifier.headers, unbound, {})["warnings"] == []
    assert codes(_verify(client, verifier.headers, unbound, {"presentationHeader": "nonce-1"})) == [
        "presentation_header_mismatch"
    ]
    assert codes(_verify(client, verifier.headers, unbound, {"challenge": "nonce-1"})) == ["invalid_challenge"]


def test_a_header_asked_of_a_credential_that_cannot_carry_one_is_a_warning(app, client):
    verifier = make_tenant(app, client, name="Verifier")
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    answer = _verify(client, verifier.headers, vc, {"presentationHeader": "nonce-1"})
    assert answer["verified"] is True and _warnings(answer) == ["presentation_header_not_checked"]


def test_disclosures_in_a_presentation_are_bound_to_its_challenge(app, client):
    tenant = make_tenant(app, client, name="Issuer")
    create_key(client, tenant.headers, "Bls12381G2")
    holder = Issuer()
    vc = issue(client, tenant.headers, unsigned(holder.did, degree="BSc")).json["verifiableCredential"]
    verifier = make_tenant(app, client, name="Verifier")

    def presented(disclosure: dict, challenge: str) -> dict:
        return sign_presentation(holder, unsigned_presentation([disclosure], holder.did), challenge=challenge)

    for_this_verifier = presented(_derive(client, tenant.headers, vc, "challenge-1"), "challenge-1")
    answer = verify_presentation(client, verifier.headers, for_this_verifier, {"challenge": "challenge-1"})
    assert answer["verified"] is True and answer["warnings"] == [], answer

    # A disclosure bound to another verifier's challenge, replayed in a fresh presentation.
    replayed = presented(_derive(client, tenant.headers, vc, "challenge-0"), "challenge-1")
    answer = verify_presentation(client, verifier.headers, replayed, {"challenge": "challenge-1"})
    assert codes(answer) == ["presentation_header_mismatch"]
    assert answer["presentationResult"]["verified"] is True
    answer = verify_presentation(
        client, verifier.headers, replayed, {"challenge": "challenge-1", "presentationHeader": "challenge-0"}
    )
    assert answer["verified"] is True

    # A disclosure with no header is bound by the presentation's proof alone.
    plain = presented(_derive(client, tenant.headers, vc), "challenge-1")
    assert verify_presentation(client, verifier.headers, plain, {"challenge": "challenge-1"})["verified"] is True
    unchecked = verify_presentation(client, verifier.headers, presented(_derive(client, tenant.headers, vc, "x"), "c"))
    assert _warnings(unchecked) == ["presentation_header_not_checked"]
    assert unchecked["warnings"][0]["detail"].startswith("verifiableCredential 0: ")
    assert verify(client, verifier.headers, vc)["verified"] is True
