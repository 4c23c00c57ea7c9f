"""Helpers of the issuer tests: keys through the API, unsigned credentials, issuing."""

from __future__ import annotations

import uuid
from typing import Any

# The cryptosuites whose proof is one signature over the whole credential, and each key type they take.
WHOLE_CREDENTIAL_SUITES = [
    ("eddsa-rdfc-2022", "Ed25519"),
    ("eddsa-jcs-2022", "Ed25519"),
    ("ecdsa-rdfc-2019", "P-256"),
    ("ecdsa-rdfc-2019", "P-384"),
    ("ecdsa-jcs-2019", "P-256"),
    ("ecdsa-jcs-2019", "P-384"),
]
# Every cryptosuite the issuer signs with: those and the selective-disclosure ones.
SUITES = [*WHOLE_CREDENTIAL_SUITES, ("ecdsa-sd-2023", "P-256"), ("bbs-2023", "Bls12381G2")]
CONTEXTS = ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"]


def create_key(client, headers: dict, key_type: str = "Ed25519") -> dict:
    response = client.post("/v1/issuer/keys", json={"type": key_type}, headers=headers)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.json["data"]


def unsigned(subject_id: str | None = None, **claims: Any) -> dict:
    """An unsigned VC 2.0 credential (no issuer: the service fills in the client's did:web)."""
    subject: dict[str, Any] = {"firstName": "Ada", "lastName": "Lovelace", **claims}
    if subject_id is not None:
        subject["id"] = subject_id
    return {
        "@context": list(CONTEXTS),
        "id": f"urn:uuid:{uuid.uuid4()}",
        "type": ["VerifiableCredential", "ExampleMembershipCredential"],
        "validFrom": "2024-01-01T00:00:00Z",
        "credentialSubject": subject,
    }


def issue(client, headers: dict, credential: dict, status: int = 201, **options: Any):
    response = client.post("/credentials/issue", json={"credential": credential, "options": options}, headers=headers)
    assert response.status_code == status, response.get_data(as_text=True)
    return response


def verify(client, headers: dict, vc: dict) -> dict:
    response = client.post("/credentials/verify", json={"verifiableCredential": vc}, headers=headers)
    assert response.status_code in (200, 400), response.get_data(as_text=True)
    return response.json
