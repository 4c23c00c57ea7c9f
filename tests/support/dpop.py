"""A DPoP (RFC 9449) key holder for tests: proofs as a client makes them."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time

from joserfc import jwt
from joserfc.jwk import ECKey

# The session application's public URL (its `BASE_URL`, the default): a proof names an endpoint as
# discovery publishes it, whatever `Host` the test client sends (`localhost`).
PUBLIC_URL = "http://localhost:5000"
TOKEN_URL = f"{PUBLIC_URL}/v1/openidc/token"


def _ath(access_token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(access_token.encode()).digest()).rstrip(b"=").decode()


class Holder:
    """A client's DPoP key, making proofs (with the last nonce the server gave, once it gave one)."""

    def __init__(self, key=None, alg: str = "ES256") -> None:
        self.key = key or ECKey.generate_key("P-256")
        self.alg = alg
        self.nonce: str | None = None

    @property
    def jkt(self) -> str:
        return self.key.thumbprint()

    def proof(self, htu: str, *, htm: str = "POST", access_token: str | None = None, **changes) -> str:
        header = {"typ": "dpop+jwt", "alg": self.alg, "jwk": self.key.as_dict(private=False)}
        claims = {"jti": secrets.token_urlsafe(12), "htm": htm, "htu": htu, "iat": int(time.time())}
        if self.nonce is not None:
            claims["nonce"] = self.nonce
        if access_token is not None:
            claims["ath"] = _ath(access_token)
        header.update(changes.pop("header", {}))
        claims.update(changes)
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode(header, claims, self.key, algorithms=[self.alg])
