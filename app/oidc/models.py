"""Rows of the OpenID provider: signing keys, pending authorizations, codes, sessions, consents.

Every bearer-like value (authorization codes, login codes, session and flow handles) is stored
only as a keyed hash; signing keys are stored encrypted.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow

KEY_NEXT, KEY_ACTIVE, KEY_RETIRED = "next", "active", "retired"


class SigningKey(Base):
    """A JWS signing key. `next` is published before use, `active` signs, `retired` only verifies."""

    __tablename__ = "oidc_signing_keys"
    __table_args__ = (
        Index(
            "uq_oidc_signing_keys_active_alg",
            "alg",
            unique=True,
            sqlite_where=text("state = 'active'"),
            postgresql_where=text("state = 'active'"),
        ),
        Index(
            "uq_oidc_signing_keys_next_alg",
            "alg",
            unique=True,
            sqlite_where=text("state = 'next'"),
            postgresql_where=text("state = 'next'"),
        ),
    )

    kid: Mapped[str] = mapped_column(String(64), primary_key=True)
    alg: Mapped[str] = mapped_column(String(8))
    state: Mapped[str] = mapped_column(String(8), index=True)
    private_key_encrypted: Mapped[str] = mapped_column(Text)
    public_jwk: Mapped[dict] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    activated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # A retired key stays published until every token it signed has expired.
    publish_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class AuthorizationRequest(Base):
    """An authorization request in progress in one browser: login, then consent, then a code."""

    __tablename__ = "oidc_authorization_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    handle_hash: Mapped[str] = mapped_column(String(64), unique=True)
    browser_hash: Mapped[str] = mapped_column(String(64))
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), index=True)
    redirect_uri: Mapped[str] = mapped_column(String(2048))
    scope: Mapped[str] = mapped_column(String(512))
    rp_state: Mapped[str | None] = mapped_column(Text, nullable=True)
    nonce: Mapped[str | None] = mapped_column(Text, nullable=True)
    code_challenge: Mapped[str | None] = mapped_column(String(128), nullable=True)
    prompt: Mapped[str] = mapped_column(String(64), default="")
    max_age: Mapped[int | None] = mapped_column(Integer, nullable=True)
    login_hint: Mapped[str | None] = mapped_column(String(320), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    # The user the e-mail belongs to, if any: kept server-side so the page never reveals it.
    candidate_user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=True)
    login_code_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    login_code_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Wrong and right guesses over every code of this request: a new code does not reset it.
    login_code_attempts: Mapped[int] = mapped_column(Integer, default=0)
    login_code_sends: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=True)
    auth_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    sid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Methods (RFC 8176 `amr` values, space-separated) the user has passed for this request so far.
    amr: Mapped[str] = mapped_column(String(64), default="", server_default="")
    # The acr values asked for (`acr_values`, or the `claims` parameter's id_token acr), in order of
    # preference; `acr_essential` when the client cannot accept any other.
    acr_values: Mapped[str | None] = mapped_column(String(512), nullable=True)
    acr_essential: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # How the response goes back (`query`, or a JARM mode); null is `query`.
    response_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # The DPoP key thumbprint the code must be bound to (`dpop_jkt`, RFC 9449 §10).
    dpop_jkt: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The challenge of the passkey ceremony the login page offers (base64url), single use.
    passkey_challenge: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # "Sign in with a linked account": the hash of the `state` sent to the platform (single use, and
    # only this request's browser may bring it back) and the platform it was sent to.
    linked_state_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    linked_platform: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # A proven platform account whose verified e-mail belongs to an existing user: linked to that
    # user only once they have signed in another way in this request (`app.social.sign_in.PendingLink`).
    linked_pending: Mapped[dict | None] = mapped_column(JSONType, nullable=True)
    # The standard claims the `claims` parameter asked for (`RequestedClaims.to_json`), if any.
    claims: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The device authorization (RFC 8628) this sign-in approves, instead of a code for a redirect URI.
    device_authorization_id: Mapped[int | None] = mapped_column(
        ForeignKey("oidc_device_authorizations.id", ondelete="CASCADE", name="fk_oidc_authorization_requests_device"),
        nullable=True,
    )
    # A sign-in to the account page (`AccountSignIn`), which ends there: no consent, no code.
    for_account: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AccountSignIn(Base):
    """A sign-in to the account page begun without an application, in one browser: the e-mail code
    (one code for every account of the address) or a passkey finds the account, and with it the
    tree; it then goes on as an `AuthorizationRequest` of that tree's master client (`for_account`)."""

    __tablename__ = "oidc_account_sign_ins"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    handle_hash: Mapped[str] = mapped_column(String(64), unique=True)
    browser_hash: Mapped[str] = mapped_column(String(64))
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    login_code_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    login_code_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Set once the code was right: the address is proven, and one of its accounts is to be chosen.
    code_passed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Codes and passkeys tried, and codes sent, over the whole sign-in (as an authorization request counts them).
    login_code_attempts: Mapped[int] = mapped_column(Integer, default=0)
    login_code_sends: Mapped[int] = mapped_column(Integer, default=0)
    passkey_challenge: Mapped[str | None] = mapped_column(String(128), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class DeviceAuthorization(Base):
    """A device authorization (RFC 8628): pending until the user approves or denies it on the device
    page, then redeemed once at the token endpoint. Both codes are stored only as keyed hashes."""

    __tablename__ = "oidc_device_authorizations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(String(512))
    # pending, approved or denied (`DEVICE_PENDING`, ...).
    status: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    # Seconds the device must wait between polls; each `slow_down` adds five.
    poll_interval: Mapped[int] = mapped_column(Integer)
    next_poll_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=True)
    auth_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    sid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    amr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    acr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


DEVICE_PENDING, DEVICE_APPROVED, DEVICE_DENIED = "pending", "approved", "denied"


class AuthorizationCode(Base):
    """A one-time code: 60 seconds, single use; remembers the access token it was exchanged for."""

    __tablename__ = "oidc_authorization_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    redirect_uri: Mapped[str] = mapped_column(String(2048))
    scope: Mapped[str] = mapped_column(String(512))
    nonce: Mapped[str | None] = mapped_column(Text, nullable=True)
    code_challenge: Mapped[str | None] = mapped_column(String(128), nullable=True)
    auth_time: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    access_token_jti: Mapped[str | None] = mapped_column(String(64), nullable=True)
    access_token_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    sid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    refresh_family: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # How the user signed in (RFC 8176 values, space-separated) and the acr claimed for it; None on
    # codes older than the columns.
    amr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    acr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The standard claims the `claims` parameter asked for and the user allowed (`RequestedClaims.to_json`).
    claims: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The DPoP key the code is bound to (`dpop_jkt`, RFC 9449 §10): only a proof of it redeems the code.
    dpop_jkt: Mapped[str | None] = mapped_column(String(64), nullable=True)


class RevokedToken(Base):
    """The deny-list: a token whose `jti` is here is refused until it would have expired anyway."""

    __tablename__ = "oidc_revoked_tokens"

    jti: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    revoked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    reason: Mapped[str] = mapped_column(String(32))


class LoginSession(Base):
    """Single sign-on: a browser signed in as a user of one client tree."""

    __tablename__ = "oidc_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    root_client_id: Mapped[int] = mapped_column(Integer)
    auth_time: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # OpenID `sid`: names this session to relying parties (id tokens, back-channel logout).
    sid: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    # How the user signed in (RFC 8176 values, space-separated); None on sessions older than the column.
    amr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The challenge of a passkey registration started on the account page (base64url), single use.
    passkey_challenge: Mapped[str | None] = mapped_column(String(128), nullable=True)


class Consent(Base):
    """A user's remembered consent to share the listed scopes with one client."""

    __tablename__ = "oidc_consents"
    __table_args__ = (UniqueConstraint("user_id", "client_id", name="uq_oidc_consents_user_id_client_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(String(512))
    # Digest of the client's claim mapping the user saw and allowed under `app_claims`, if ever.
    claims_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    granted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LoginCodeCounter(Base):
    """Hits of one limit key in its current window (which starts at the first hit), kept in the
    database so every process shares it."""

    __tablename__ = "oidc_login_code_counters"

    key_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    hits: Mapped[int] = mapped_column(Integer, default=0)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class OutboxMail(Base):
    """A message kept by the `outbox` mail backend (development and tests)."""

    __tablename__ = "mail_outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    to_address: Mapped[str] = mapped_column(String(320), index=True)
    from_address: Mapped[str] = mapped_column(String(320))
    subject: Mapped[str] = mapped_column(String(255))
    text: Mapped[str] = mapped_column(Text)
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RefreshToken(Base):
    """One refresh token of a family; each use rotates it to a new member of the same family.

    Only the hash is stored. `used_at` marks a rotated token: presenting it again revokes the family.
    """

    __tablename__ = "oidc_refresh_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    family: Mapped[str] = mapped_column(String(64), index=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(String(512))
    auth_time: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    sid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The family's absolute end, copied to every member; the idle end is this token's own.
    family_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    access_token_jti: Mapped[str | None] = mapped_column(String(64), nullable=True)
    access_token_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    amr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    acr: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The standard claims the `claims` parameter asked for and the user allowed (`RequestedClaims.to_json`).
    claims: Mapped[str | None] = mapped_column(Text, nullable=True)


class ClientAssertion(Base):
    """A `jti` of a client assertion (RFC 7523) already accepted: a replay is refused until it expires."""

    __tablename__ = "oidc_client_assertions"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class PushedRequest(Base):
    """An authorization request pushed to `/par` (RFC 9126), redeemable once by its request_uri."""

    __tablename__ = "oidc_pushed_requests"

    reference_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), index=True)
    parameters: Mapped[dict] = mapped_column(JSONType)
    # Whether the parameters came in a request object signed with the client's keys (RFC 9101).
    signed_request_object: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class SessionClient(Base):
    """A client that received an id_token in a single sign-on session: told when the session ends."""

    __tablename__ = "oidc_session_clients"

    sid: Mapped[str] = mapped_column(String(64), primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
