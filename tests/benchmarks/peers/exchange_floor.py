"""The floor of a code exchange on Tessera's stack: the work no implementation of it can skip,
with nothing else, served as Tessera is (granian's WSGI interface, the Procfile's options).

Per request, what Tessera's hot door does and node-oidc-provider's exchange has its own form of:
read the form body and the Basic header; count the token rate limit in Redis with the `limits`
strategy Flask-Limiter uses (one script call); hash the client secret and the code (HMAC-SHA256)
and the PKCE verifier; run Tessera's own consume statement (`service._redeem_statements`, the
PostgreSQL shape of the hot door: client authentication, no refresh token, bearer) through
psycopg as a prepared statement; sign an RS256 access token and an RS256 id_token with
`cryptography` directly; answer the JSON. No Flask, no application context, no logging, no
metrics, no security headers, no error handling beyond a 400: what it costs is the least an
exchange with Tessera's guarantees costs in this language and stack, not a product.

Started by tests/benchmarks/test_peer_bench.py as
`granian --interface wsgi ... --factory tests.benchmarks.peers.exchange_floor:create`, with
`DATABASE_URL`, `REDIS_URL`, `SECRET_HASH_KEY` and `OIDC_ISSUER` of the Tessera server it is
compared with, so it redeems codes of the same kind from the same table.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, unquote_plus

import psycopg
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from limits import parse as parse_limit
from limits.storage import RedisStorage
from limits.strategies import FixedWindowRateLimiter
from psycopg.rows import tuple_row
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg


def _consume_statement() -> tuple[str, dict]:
    from app.oidc.service import _redeem_statements

    statement = _redeem_statements("postgresql", 1, True, False, True, False)[0].statement
    compiled = statement.compile(dialect=PGDialect_psycopg())
    return str(compiled), {name: value for name, value in compiled.params.items() if value is not None}


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


class Floor:
    def __init__(self) -> None:
        self.sql, self.constants = _consume_statement()
        self.dsn = os.environ["DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://")
        self.hash_key = os.environ["SECRET_HASH_KEY"].split(",")[0].strip().encode()
        self.issuer = os.environ["OIDC_ISSUER"]
        self.limiter = FixedWindowRateLimiter(RedisStorage(os.environ["REDIS_URL"]))
        self.limit = parse_limit("10000000 per minute")
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.local = threading.local()

    def connection(self) -> psycopg.Connection:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = psycopg.connect(self.dsn, autocommit=True, row_factory=tuple_row)
        return connection

    def keyed_hash(self, secret: str) -> str:
        return hmac.new(self.hash_key, secret.encode(), hashlib.sha256).hexdigest()

    def sign(self, header: bytes, claims: dict) -> str:
        signing_input = header + b"." + _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = self.key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return (signing_input + b"." + _b64(signature)).decode("ascii")

    def __call__(self, environ: dict, start_response) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        form = dict(parse_qsl(body.decode("ascii")))
        scheme, _, encoded = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        client_id, secret = unquote_plus(client_id), unquote_plus(secret)
        if scheme != "Basic" or not client_id.isdigit() or not {"code", "redirect_uri", "code_verifier"} <= set(form):
            start_response("400 Bad Request", [("Content-Type", "application/json")])
            return [b'{"error":"invalid_request"}']
        self.limiter.hit(self.limit, "floor", form["redirect_uri"], client_id)
        now = datetime.now(UTC)
        issued_at = int(now.timestamp())
        jti = uuid.uuid4().hex
        challenge = _b64(hashlib.sha256(form["code_verifier"].encode()).digest()).decode()
        parameters = {
            **self.constants,
            "given_code_hash": self.keyed_hash(form["code"]),
            "given_client_id": int(client_id),
            "given_redirect_uri": form["redirect_uri"],
            "given_now": now,
            "given_challenge": challenge,
            "given_jti": jti,
            "given_access_token_expires_at": now + timedelta(hours=1),
            "given_method": "client_secret_basic",
            "given_secret_hash_0": self.keyed_hash(secret),
        }
        row = self.connection().execute(self.sql, parameters, prepare=True).fetchone()
        if row is None:
            start_response("400 Bad Request", [("Content-Type", "application/json")])
            return [b'{"error":"invalid_grant"}']
        scope, nonce, auth_time, sid, user_id = row[0], row[1], row[2], row[3], row[8]
        access_token = self.sign(
            _b64(b'{"alg":"RS256","kid":"floor","typ":"at+jwt"}'),
            {"iss": self.issuer, "sub": str(user_id), "aud": self.issuer, "client_id": client_id,
             "exp": issued_at + 3600, "iat": issued_at, "jti": jti, "scope": scope, "user_id": user_id},
        )  # fmt: skip
        digest = hashlib.sha256(access_token.encode()).digest()
        id_token = self.sign(
            _b64(b'{"alg":"RS256","kid":"floor","typ":"JWT"}'),
            {"iss": self.issuer, "sub": str(user_id), "aud": client_id, "exp": issued_at + 3600, "iat": issued_at,
             "auth_time": int(auth_time.timestamp()), "nonce": nonce, "sid": sid,
             "at_hash": _b64(digest[:16]).decode()},
        )  # fmt: skip
        answer = json.dumps(
            {"access_token": access_token, "token_type": "Bearer", "expires_in": 3600, "scope": scope,
             "id_token": id_token},
            separators=(",", ":"),
        ).encode()  # fmt: skip
        start_response(
            "200 OK",
            [("Content-Type", "application/json"), ("Content-Length", str(len(answer))),
             ("Cache-Control", "no-store"), ("Pragma", "no-cache")],
        )  # fmt: skip
        return [answer]


def create() -> Floor:
    return Floor()
