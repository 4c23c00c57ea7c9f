"""Use cases of the token side: client authentication, code exchange, access-token checks, userinfo,
revocation and introspection. Functions flush but never commit; the edge commits.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn

from flask import current_app
from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite

from app.db import as_utc, utcnow
from app.extensions import db
from app.oidc import keys, tokens
from app.oidc.claims import (
    APP_CLAIMS_SCOPE,
    application_claims,
    claims_for_scopes,
    mapping_fingerprint,
    standard_claims,
)
from app.oidc.errors import (
    InvalidBearerToken,
    InvalidClient,
    InvalidGrant,
    InvalidRequest,
    UnsupportedGrantType,
)
from app.oidc.models import AuthorizationCode, Consent, RevokedToken
from app.oidc.tokens import AccessTokenClaims, TokenInvalid
from app.security import hash_secret
from app.tenancy.models import Client
from app.tenancy.service import get_active_client, verify_client_secret
from app.users.models import User

TOKEN_TYPE = "Bearer"


def client_alg(client: Client) -> str:
    """The JWS algorithm this client's tokens are signed with (RS256 unless it chose ES256)."""
    alg = client.signing_alg or current_app.config["OIDC_DEFAULT_ALG"]
    return alg if alg in keys.ALGORITHMS else "RS256"


def get_relying_party(client_id: str | None) -> Client | None:
    """The enabled client whose OpenID `client_id` (decimal id) is given, else None."""
    value = (client_id or "").strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18 or int(value) <= 0:
        return None
    return get_active_client(int(value))


def authenticate_client(client_id: str | None, client_secret: str | None) -> Client:
    """The client proving itself with its secret (current, or previous within its grace period).

    Raises InvalidClient (401) without saying which part was wrong.
    """
    client = get_relying_party(client_id)
    if client is None or not client_secret or not verify_client_secret(client, client_secret):
        raise InvalidClient()
    return client


def _pkce_matches(verifier: str, challenge: str) -> bool:
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    computed = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return hmac.compare_digest(computed, challenge)


def deny_token(jti: str, expires_at: datetime, reason: str) -> None:
    """Put a token on the deny-list (idempotent: a second revocation of one jti is a no-op)."""
    values = {"jti": jti, "expires_at": expires_at, "revoked_at": utcnow(), "reason": reason}
    dialect = db.session.get_bind().dialect.name
    if dialect == "postgresql":
        statement = postgresql.insert(RevokedToken).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        statement = sqlite.insert(RevokedToken).values(**values).on_conflict_do_nothing()
    else:
        if db.session.get(RevokedToken, jti) is None:
            db.session.add(RevokedToken(**values))
            db.session.flush()
        return
    db.session.execute(statement)


def is_revoked(jti: str) -> bool:
    return db.session.execute(select(RevokedToken.jti).where(RevokedToken.jti == jti)).first() is not None


@dataclass(frozen=True)
class TokenResponse:
    scope: str
    access_token: str
    id_token: str
    expires_in: int

    def as_dict(self) -> dict:
        return {
            "scope": self.scope,
            "token_type": TOKEN_TYPE,
            "access_token": self.access_token,
            "expire_in": self.expires_in,
            "expires_in": self.expires_in,
            "id_token": self.id_token,
        }


def exchange_code(
    client_id: str | None, client_secret: str | None, *, grant_type: str | None, code: str | None,
    redirect_uri: str | None, code_verifier: str | None
) -> TokenResponse:
    """Authenticate the client and redeem an authorization code for an access token and an id_token.

    Only `grant_type=authorization_code` (else UnsupportedGrantType); a missing parameter raises
    InvalidRequest before anything is read.

    The code is consumed by the transaction's first statement, one conditional UPDATE, so of
    concurrent exchanges exactly one wins (PostgreSQL row lock; SQLite write lock taken before
    any read could go stale). Any later refusal raises, and the edge's rollback un-consumes the
    code. A code already used answers `invalid_grant` and puts the token issued from it on the
    deny-list; that error has `keep_changes` set so the edge commits the revocation.
    """
    if grant_type != "authorization_code":
        if not grant_type:
            raise InvalidRequest("grant_type is required.")
        raise UnsupportedGrantType("Only grant_type=authorization_code is supported.")
    code = require_token_parameter(code, "code")
    redirect_uri = require_token_parameter(redirect_uri, "redirect_uri")
    code_hash = hash_secret(code)
    now = utcnow()
    issued_at = int(time.time())
    expires_in = current_app.config["OIDC_ACCESS_TOKEN_TTL"]
    jti = uuid.uuid4().hex
    consumed = db.session.execute(
        update(AuthorizationCode)
        .where(AuthorizationCode.code_hash == code_hash, AuthorizationCode.used_at.is_(None))
        .values(
            used_at=now,
            access_token_jti=jti,
            access_token_expires_at=datetime.fromtimestamp(issued_at + expires_in, UTC),
        )
        .returning(
            AuthorizationCode.client_id, AuthorizationCode.user_id, AuthorizationCode.redirect_uri,
            AuthorizationCode.scope, AuthorizationCode.nonce, AuthorizationCode.code_challenge,
            AuthorizationCode.auth_time, AuthorizationCode.expires_at,
        )
        .execution_options(synchronize_session=False)
    ).first()
    client = authenticate_client(client_id, client_secret)
    if consumed is None:
        _refuse_reuse(code_hash, client)
    if consumed.client_id != client.id:
        raise InvalidGrant("The authorization code is unknown or was issued to another client.")
    if as_utc(consumed.expires_at) <= now:
        raise InvalidGrant("The authorization code has expired.")
    if consumed.redirect_uri != redirect_uri:
        raise InvalidGrant("redirect_uri does not match the one of the authorization request.")
    if consumed.code_challenge:
        if not code_verifier:
            raise InvalidGrant("code_verifier is required: the authorization request used PKCE.")
        if not _pkce_matches(code_verifier, consumed.code_challenge):
            raise InvalidGrant("code_verifier does not match the code_challenge.")
    elif code_verifier:
        raise InvalidGrant("code_verifier was sent but the authorization request had no code_challenge.")

    user = db.session.get(User, consumed.user_id)
    if user is None:
        raise InvalidGrant("The user of this authorization code no longer exists.")
    alg = client_alg(client)
    access_token, _ = tokens.issue_access_token(
        client_id=client.id, user_id=user.id, scope=consumed.scope, alg=alg, now=issued_at, jti=jti
    )
    id_token = tokens.issue_id_token(
        client_id=client.id,
        user_id=user.id,
        did=user.did,
        auth_time=int(as_utc(consumed.auth_time).timestamp()),
        nonce=consumed.nonce,
        access_token=access_token,
        extra_claims=released_application_claims(client, user, consumed.scope.split()),
        alg=alg,
        now=issued_at,
    )
    return TokenResponse(scope=consumed.scope, access_token=access_token, id_token=id_token, expires_in=expires_in)


def _refuse_reuse(code_hash: str, client: Client) -> NoReturn:
    """The code is unknown or already used: refuse, revoking the token of a used code of this client."""
    row = db.session.execute(
        select(AuthorizationCode).where(AuthorizationCode.code_hash == code_hash)
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if row is None or row.client_id != client.id:
        raise InvalidGrant("The authorization code is unknown or was issued to another client.")
    if row.access_token_jti:
        deny_token(row.access_token_jti, as_utc(row.access_token_expires_at) or utcnow(), "code_replay")
    raise InvalidGrant("The authorization code was already used; tokens issued from it are revoked.",
                       keep_changes=True)


def verify_access_token(raw: str) -> AccessTokenClaims:
    """A valid, unrevoked access token of an existing, enabled client; raises InvalidBearerToken."""
    try:
        claims = tokens.decode_access_token(raw)
    except TokenInvalid as exc:
        raise InvalidBearerToken(str(exc)) from None
    if is_revoked(claims.jti):
        raise InvalidBearerToken("The token has been revoked.")
    if get_relying_party(claims.client_id) is None:
        raise InvalidBearerToken("The token's client no longer exists.")
    return claims


def userinfo(claims: AccessTokenClaims) -> dict:
    """The OpenID userinfo document the token's scopes release, plus the client's app claims."""
    user = db.session.get(User, claims.user_id)
    client = get_relying_party(claims.client_id)
    if user is None or client is None:
        raise InvalidBearerToken("The token's user no longer exists.")
    profile = user.profile or {}
    document = released_application_claims(client, user, claims.scopes)
    document.update(claims_for_scopes(claims.scopes, standard_claims(profile, user.email_address)))
    document.update({"sub": str(user.id), "user_id": user.id, "did": user.did})
    return document


def released_application_claims(client: Client, user: User, scopes: Iterable[str]) -> dict:
    """The client's own claims (its `id_token_claims` mapping) this user let it see, else `{}`.

    Only under the `app_claims` scope, and only while the mapping is the one the user consented
    to: a changed mapping releases nothing until the user consents to it again.
    """
    if APP_CLAIMS_SCOPE not in scopes:
        return {}
    consented = db.session.execute(
        select(Consent.claims_fingerprint).where(Consent.user_id == user.id, Consent.client_id == client.id)
    ).scalar_one_or_none()
    mapping = client.id_token_claims or {}
    if consented is None or not hmac.compare_digest(consented, mapping_fingerprint(mapping)):
        return {}
    return application_claims(mapping, user.profile or {}, user.email_address)


def _token_of_client(raw: str, client: Client) -> AccessTokenClaims | None:
    try:
        claims = tokens.decode_access_token(raw)
    except TokenInvalid:
        return None
    return claims if claims.client_id == str(client.id) else None


def revoke_token(client: Client, token: str | None) -> None:
    """RFC 7009: revoke an access token issued to `client`; anything else is silently ignored.

    A missing token raises InvalidRequest.
    """
    claims = _token_of_client(require_token_parameter(token, "token"), client)
    if claims is not None:
        deny_token(claims.jti, datetime.fromtimestamp(claims.exp, UTC), "revoked_by_client")


def introspect_token(client: Client, token: str | None) -> dict:
    """RFC 7662: whether the token is active, with its claims, for the client it was issued to.

    A missing token raises InvalidRequest.
    """
    claims = _token_of_client(require_token_parameter(token, "token"), client)
    if claims is None or is_revoked(claims.jti):
        return {"active": False}
    return {
        "active": True,
        "scope": " ".join(claims.scopes),
        "client_id": claims.client_id,
        "token_type": TOKEN_TYPE,
        "exp": claims.exp,
        "iat": claims.iat,
        "sub": claims.sub,
        "aud": claims.claims.get("aud"),
        "iss": claims.claims.get("iss"),
        "jti": claims.jti,
        "user_id": claims.user_id,
    }


def require_token_parameter(value: str | None, name: str) -> str:
    """`value` itself; InvalidRequest naming the parameter when it is missing or empty."""
    if not value:
        raise InvalidRequest(f"{name} is required.")
    return value
