"""A software WebAuthn authenticator (P-256, `none` attestation) answering the service's real
ceremony options with real attestation and assertion objects, as a browser would post them."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Credential:
    """One credential held by the authenticator: its id, key, user handle and signature counter."""

    credential_id: bytes
    key: ec.EllipticCurvePrivateKey
    user_handle: bytes
    sign_count: int = 0


@dataclass
class SoftAuthenticator:
    """Answers `navigator.credentials.create()`/`get()` options (the JSON the service sends)."""

    origin: str
    rp_id: str
    user_verified: bool = True
    backup_eligible: bool = False
    credentials: list[Credential] = field(default_factory=list)

    def _flags(self, extra: int = 0) -> int:
        return UP | (UV if self.user_verified else 0) | (BE if self.backup_eligible else 0) | extra

    def _client_data(self, kind: str, challenge: str, origin: str | None = None) -> bytes:
        return json.dumps(
            {"type": kind, "challenge": challenge, "origin": origin or self.origin, "crossOrigin": False}
        ).encode()

    def create(self, options: dict) -> str:
        """A registration answer (the credential JSON) to creation options."""
        assert options["rp"]["id"] == self.rp_id
        key = ec.generate_private_key(ec.SECP256R1())
        numbers = key.public_key().public_numbers()
        credential = Credential(os.urandom(32), key, unb64url(options["user"]["id"]))
        cose = cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})
        auth_data = (
            hashlib.sha256(self.rp_id.encode()).digest()
            + bytes([self._flags(AT)])
            + struct.pack(">I", credential.sign_count)
            + bytes(16)
            + struct.pack(">H", len(credential.credential_id))
            + credential.credential_id
            + cose
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        self.credentials.append(credential)
        return json.dumps(
            {
                "id": b64url(credential.credential_id),
                "rawId": b64url(credential.credential_id),
                "type": "public-key",
                "clientExtensionResults": {},
                "response": {
                    "clientDataJSON": b64url(self._client_data("webauthn.create", options["challenge"])),
                    "attestationObject": b64url(attestation),
                    "transports": ["internal"],
                },
            }
        )

    def get(
        self, options: dict, *, credential: Credential | None = None, counter_step: int = 1, origin: str | None = None
    ) -> str:
        """An assertion answer to request options, by `credential` (else the first one allowed)."""
        assert options["rpId"] == self.rp_id
        allowed = {item["id"] for item in options.get("allowCredentials") or []}
        if credential is None:
            credential = next(c for c in self.credentials if not allowed or b64url(c.credential_id) in allowed)
        credential.sign_count += counter_step
        auth_data = (
            hashlib.sha256(self.rp_id.encode()).digest()
            + bytes([self._flags()])
            + struct.pack(">I", max(credential.sign_count, 0))
        )
        client_data = self._client_data("webauthn.get", options["challenge"], origin)
        signature = credential.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        return json.dumps(
            {
                "id": b64url(credential.credential_id),
                "rawId": b64url(credential.credential_id),
                "type": "public-key",
                "clientExtensionResults": {},
                "response": {
                    "clientDataJSON": b64url(client_data),
                    "authenticatorData": b64url(auth_data),
                    "signature": b64url(signature),
                    "userHandle": b64url(credential.user_handle),
                },
            }
        )
