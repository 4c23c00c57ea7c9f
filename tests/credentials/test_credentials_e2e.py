"""Store → verify (job) → list for the user with an OpenID access token, end to end over HTTP."""

from __future__ import annotations

import json
import secrets
import time
from datetime import UTC, datetime, timedelta

from app.credentials import bbs
from app.credentials.cryptosuites import bbs_2023, ecdsa_sd_2023
from app.multiformats import encode_multikey
from tests.support.credentials import access_token, listed_credentials, wait_for_state, wait_for_verification
from tests.support.issuing import Issuer, allocate_status
from tests.support.oidc import make_tenant
from tests.support.vectors import suite_context

SD_MANDATORY = ["/issuer", "/validFrom"]
SD_DISCLOSED = ["/credentialSubject/degree"]


def _sd_credential(issuer_did: str, subject_did: str, degree: str) -> dict:
    vc = Issuer().credential(subject_did, degree=degree)
    vc["issuer"] = issuer_did
    del vc["validUntil"]
    return vc


def _proof_options(verification_method: str, cryptosuite: str) -> dict:
    return {
        "type": "DataIntegrityProof",
        "cryptosuite": cryptosuite,
        "created": "2026-01-01T00:00:00Z",
        "verificationMethod": verification_method,
        "proofPurpose": "assertionMethod",
    }


def bbs_derived_credential(subject_did: str, degree: str) -> dict:
    """A bbs-2023 credential as a holder shows it: only `degree` disclosed, issuer a BLS12-381 G2 did:key."""
    secret_key = bbs.keygen(secrets.token_bytes(32))
    multikey = encode_multikey("Bls12381G2", bbs.sk_to_pk(secret_key))
    did = f"did:key:{multikey}"
    vc = _sd_credential(did, subject_did, degree)
    options = _proof_options(f"{did}#{multikey}", "bbs-2023")
    base = bbs_2023.create_base_proof(vc, options, SD_MANDATORY, secret_key, suite_context())
    return bbs_2023.derive_proof(vc, base, SD_DISCLOSED, suite_context(), presentation_header=b"e2e")


def ecdsa_sd_derived_credential(subject_did: str, degree: str) -> dict:
    """An ecdsa-sd-2023 credential as a holder shows it: only `degree` disclosed, issuer a P-256 did:key."""
    issuer = Issuer("P-256")
    vc = _sd_credential(issuer.did, subject_did, degree)
    options = _proof_options(issuer.verification_method, "ecdsa-sd-2023")
    base = ecdsa_sd_2023.create_base_proof(vc, options, SD_MANDATORY, issuer.private_key, suite_context())
    return ecdsa_sd_2023.derive_proof(vc, base, SD_DISCLOSED, suite_context())


def _store(client, headers, vc: dict) -> str:
    response = client.post(
        "/v1/vc/issuer/store", data=json.dumps({"vc": vc}), content_type="application/json", headers=headers
    )
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.json["data"]["cid"]


def test_verified_credentials_reach_the_users_list_and_others_never_do(app, client):
    tenant = make_tenant(app, client)
    issuer = Issuer()

    older = issuer.sign(issuer.credential(tenant.did, degree="BSc"))
    older_cid = _store(client, tenant.headers, older)
    tampered = issuer.sign(issuer.credential(tenant.did, degree="PhD"))
    tampered["credentialSubject"]["degree"] = "MD"
    tampered_cid = _store(client, tenant.headers, tampered)
    entry = allocate_status(client, tenant.headers, "revocation")
    revocable = issuer.sign(issuer.credential(tenant.did, degree="MSc", status=entry["credentialStatus"]))
    revocable_cid = _store(client, tenant.headers, revocable)
    newer = issuer.sign(issuer.credential(tenant.did, degree="MBA"), "eddsa-jcs-2022")
    newer_cid = _store(client, tenant.headers, newer)

    assert wait_for_verification(client, tenant.headers, older_cid)["verification"]["state"] == "verified"
    failed = wait_for_verification(client, tenant.headers, tampered_cid)["verification"]
    assert (failed["state"], failed["reason"]) == ("failed", "invalid_signature")
    assert wait_for_verification(client, tenant.headers, revocable_cid)["verification"]["state"] == "verified"
    assert wait_for_verification(client, tenant.headers, newer_cid)["verification"]["state"] == "verified"

    token = access_token(client, tenant)
    listed = listed_credentials(client, token)
    assert [vc["credentialSubject"]["degree"] for vc in listed] == ["MBA", "MSc", "BSc"]
    assert listed[1] == revocable
    assert listed[1]["credentialStatus"] == entry["credentialStatus"]

    revoke = client.patch(
        f"/v1/vc/issuer/status_entries/{entry['id']}", json={"status": "revoked"}, headers=tenant.headers
    )
    assert revoke.status_code == 200
    record = wait_for_state(client, tenant.headers, revocable_cid, "failed")
    assert record["verification"]["reason"] == "revoked"
    assert [vc["credentialSubject"]["degree"] for vc in listed_credentials(client, token)] == ["MBA", "BSc"]


def test_selectively_disclosed_credentials_reach_the_users_list(app, client):
    tenant = make_tenant(app, client)
    shown_bbs = bbs_derived_credential(tenant.did, "BSc")
    shown_ecdsa = ecdsa_sd_derived_credential(tenant.did, "MSc")
    for shown in (shown_bbs, shown_ecdsa):
        assert shown["credentialSubject"] == {"id": tenant.did, "degree": shown["credentialSubject"]["degree"]}
    bbs_cid = _store(client, tenant.headers, shown_bbs)
    ecdsa_cid = _store(client, tenant.headers, shown_ecdsa)
    tampered = bbs_derived_credential(tenant.did, "PhD")
    tampered["credentialSubject"]["degree"] = "MD"
    tampered_cid = _store(client, tenant.headers, tampered)

    for cid in (bbs_cid, ecdsa_cid):
        verification = wait_for_verification(client, tenant.headers, cid)["verification"]
        assert verification["state"] == "verified", verification
    failed = wait_for_verification(client, tenant.headers, tampered_cid)["verification"]
    assert (failed["state"], failed["reason"]) == ("failed", "invalid_signature")

    assert listed_credentials(client, access_token(client, tenant)) == [shown_ecdsa, shown_bbs]


def test_credential_revoked_before_it_is_stored_is_reported_revoked(app, client):
    tenant = make_tenant(app, client)
    issuer = Issuer()
    entry = allocate_status(client, tenant.headers, "revocation")
    vc = issuer.sign(issuer.credential(tenant.did, status=entry["credentialStatus"]))
    client.patch(f"/v1/vc/issuer/status_entries/{entry['id']}", json={"status": "revoked"}, headers=tenant.headers)
    cid = _store(client, tenant.headers, vc)
    verification = wait_for_verification(client, tenant.headers, cid)["verification"]
    assert (verification["state"], verification["reason"]) == ("failed", "revoked")
    assert listed_credentials(client, access_token(client, tenant)) == []


def test_list_needs_a_valid_bearer_token_and_shows_only_the_callers_credentials(app, client):
    first, second = make_tenant(app, client, name="First"), make_tenant(app, client, name="Second")
    issuer = Issuer()
    cid = _store(client, first.headers, issuer.sign(issuer.credential(first.did)))
    assert wait_for_verification(client, first.headers, cid)["verification"]["state"] == "verified"

    assert len(listed_credentials(client, access_token(client, first))) == 1
    assert listed_credentials(client, access_token(client, second)) == []
    missing = client.get("/v1/openidc/credentials")
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    forged = client.get("/v1/openidc/credentials", headers={"Authorization": "Bearer not.a.token"})
    assert forged.status_code == 401


def test_expired_credential_leaves_the_list(app, client):
    tenant = make_tenant(app, client)
    issuer = Issuer()
    valid_until = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=8)
    vc = issuer.credential(tenant.did)
    vc["validUntil"] = valid_until.isoformat().replace("+00:00", "Z")
    cid = _store(client, tenant.headers, issuer.sign(vc))
    assert wait_for_verification(client, tenant.headers, cid)["verification"]["state"] == "verified"
    token = access_token(client, tenant)
    assert len(listed_credentials(client, token)) == 1
    time.sleep(max(0.0, (valid_until - datetime.now(UTC)).total_seconds()) + 0.5)
    assert listed_credentials(client, token) == []
