"""Test helpers for the credentials API: an Ed25519 did:key issuer, credentials, users."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.credentials.cryptosuites import get_suite
from app.multiformats import encode_multikey
from tests.support.vectors import suite_context

CONTEXTS = [
    "https://www.w3.org/ns/credentials/v2",
    "https://www.w3.org/ns/credentials/examples/v2",
]


_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1}


class Issuer:
    """An issuer with a fresh key (Ed25519, P-256 or P-384), identified by its did:key."""

    def __init__(self, key_type: str = "Ed25519") -> None:
        if key_type == "Ed25519":
            self.private_key = ed25519.Ed25519PrivateKey.generate()
            public = self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        else:
            self.private_key = ec.generate_private_key(_CURVES[key_type]())
            public = self.private_key.public_key().public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
        self.multikey = encode_multikey(key_type, public)
        self.did = f"did:key:{self.multikey}"
        self.verification_method = f"{self.did}#{self.multikey}"

    def sign(self, vc: dict, cryptosuite: str = "eddsa-rdfc-2022") -> dict:
        return get_suite(cryptosuite).sign(
            vc, private_key=self.private_key, verification_method=self.verification_method, ctx=suite_context()
        )

    def credential(self, subject_did: str, *, status: Any = None, **claims: Any) -> dict:
        """An unsigned credential issued by this issuer about `subject_did`."""
        vc: dict[str, Any] = {
            "@context": list(CONTEXTS),
            "id": f"urn:uuid:{uuid.uuid4()}",
            "type": ["VerifiableCredential", "ExampleMembershipCredential"],
            "issuer": self.did,
            "validFrom": "2024-01-01T00:00:00Z",
            "validUntil": "",
            "credentialSubject": {"id": subject_did, "firstName": "Ada", "lastName": "Lovelace", **claims},
        }
        if status is not None:
            vc["credentialStatus"] = copy.deepcopy(status)
        return vc


def create_user(client, headers: dict, email: str | None = None) -> dict:
    """A new user of the caller's client: `{user_id, did, ...}`."""
    email = email or f"user-{uuid.uuid4().hex[:12]}@example.org"
    response = client.post("/v1/user/create", json={"profile": {"email_address": email}}, headers=headers)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.json["data"]


def allocate_status(client, headers: dict, purpose: str = "revocation") -> dict:
    """A status entry from the service: `{id, status, credentialStatus, ...}`."""
    response = client.post("/v1/vc/issuer/status_entries", json={"statusPurpose": purpose}, headers=headers)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.json["data"]
