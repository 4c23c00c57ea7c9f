"""Clients (a tree of organisations) and their API tokens."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Index, Integer, String, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow

# Grants of the token endpoint; every client has the first two, any other only when its registration enables it.
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials", DEVICE_CODE_GRANT)
BASE_GRANT_TYPES = ("authorization_code", "refresh_token")
# Sign-in policies of a client tree: the e-mail code only, a passkey after the e-mail code on every
# sign-in, or a passkey accepted on its own beside the e-mail code (the default).
POLICY_EMAIL_CODE, POLICY_PASSKEY_SECOND_FACTOR, POLICY_PASSKEY_ALONE = (
    "email_code",
    "passkey_second_factor",
    "passkey_alone",
)
SIGN_IN_POLICIES = (POLICY_EMAIL_CODE, POLICY_PASSKEY_SECOND_FACTOR, POLICY_PASSKEY_ALONE)
DEFAULT_SIGN_IN_POLICY = POLICY_PASSKEY_ALONE
SUBJECT_PUBLIC, SUBJECT_PAIRWISE = "public", "pairwise"
SUBJECT_TYPES = (SUBJECT_PUBLIC, SUBJECT_PAIRWISE)


class Client(Base):
    """An organisation using the service: a master client (root) or a sub-client (node)."""

    __tablename__ = "clients"
    __table_args__ = (
        UniqueConstraint("subdomain", "domain", name="uq_clients_subdomain_domain"),
        # Subtree filters are `path LIKE '/1/5/%'`; PostgreSQL needs pattern ops to use an index for it.
        Index("ix_clients_path_pattern", "path", postgresql_ops={"path": "varchar_pattern_ops"}),
        # A page of a node's children, oldest first, and their count: one range of this index, whatever
        # the size of other tenants' trees (an index on `parent_id` alone left the order to a sort or
        # to a walk of the primary key through every client).
        Index(
            "ix_clients_enabled_children",
            "parent_id",
            "id",
            postgresql_where=text("disabled_at IS NULL"),
            sqlite_where=text("disabled_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("clients.id"), nullable=True, index=True)
    root_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    # Materialised path "/1/5/9/" of ids from the root: subtree queries are a prefix match.
    path: Mapped[str] = mapped_column(String(1024), default="/", index=True)
    name: Mapped[str] = mapped_column(String(70))
    address_1: Mapped[str | None] = mapped_column(String(100), nullable=True)
    address_2: Mapped[str | None] = mapped_column(String(100), nullable=True)
    country: Mapped[str | None] = mapped_column(String(255), nullable=True)
    province: Mapped[str | None] = mapped_column(String(255), nullable=True)
    city: Mapped[str | None] = mapped_column(String(255), nullable=True)
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    domain: Mapped[str | None] = mapped_column(String(253), nullable=True)
    subdomain: Mapped[str | None] = mapped_column(String(63), nullable=True)
    esp_token: Mapped[str] = mapped_column(String(64))
    recaptcha_key: Mapped[str] = mapped_column(String(255), default="")
    recaptcha_secret_encrypted: Mapped[str | None] = mapped_column(String(512), nullable=True)
    recaptcha_threshold: Mapped[float] = mapped_column(Float, default=0.5)
    recaptcha_enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    privacy_link: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    # Branding of the hosted sign-in pages: an https logo and a #rrggbb accent colour.
    logo_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    accent_color: Mapped[str | None] = mapped_column(String(7), nullable=True)
    redirect_uris: Mapped[list] = mapped_column(JSONType, default=list)
    id_token_claims: Mapped[dict] = mapped_column(JSONType, default=dict)
    signing_alg: Mapped[str] = mapped_column(String(8), default="RS256")
    # The JWS algorithm of its access tokens when not that of its id_tokens (`signing_alg`).
    access_token_signed_response_alg: Mapped[str | None] = mapped_column(String(8), nullable=True)
    # RFC 9449 §5.2: every access token of the client must be DPoP-bound (a token request without a proof is refused).
    dpop_bound_access_tokens: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The JWS algorithm of its userinfo answers (`application/jwt`); null answers JSON.
    userinfo_signed_response_alg: Mapped[str | None] = mapped_column(String(8), nullable=True)
    # The JWS algorithm of its JARM authorization responses; null is RS256.
    authorization_signed_response_alg: Mapped[str | None] = mapped_column(String(8), nullable=True)
    secret_hash: Mapped[str | None] = mapped_column(String(128), nullable=True)
    previous_secret_hash: Mapped[str | None] = mapped_column(String(128), nullable=True)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # OpenID parity settings (refresh tokens, machine clients, client authentication, PAR, logout).
    # The secret sealed with the service key: client_secret_jwt needs it to check an HMAC.
    secret_encrypted: Mapped[str | None] = mapped_column(String(512), nullable=True)
    token_endpoint_auth_method: Mapped[str | None] = mapped_column(String(32), nullable=True)
    jwks: Mapped[dict | None] = mapped_column(JSONType, nullable=True)
    jwks_uri: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    client_credentials_scopes: Mapped[list] = mapped_column(JSONType, default=list)
    # Grants beyond authorization_code and refresh_token (which every client has): client_credentials, device_code.
    grant_types: Mapped[list] = mapped_column(JSONType, default=list)
    require_pkce: Mapped[bool] = mapped_column(Boolean, default=False)
    # Whether the client may read its users' credentials (`GET /v1/openidc/credentials`) once they consent.
    reads_credentials: Mapped[bool] = mapped_column(Boolean, default=True)
    issue_refresh_tokens: Mapped[bool] = mapped_column(Boolean, default=False)
    refresh_token_ttl: Mapped[int | None] = mapped_column(Integer, nullable=True)
    refresh_token_idle_ttl: Mapped[int | None] = mapped_column(Integer, nullable=True)
    require_pushed_authorization_requests: Mapped[bool] = mapped_column(Boolean, default=False)
    # Authorization requests only as a signed request object (RFC 9101 `require_signed_request_object`).
    require_signed_request_object: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    backchannel_logout_uri: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    # OpenID subject identifiers (Core §8): `public` (the user id) or `pairwise` per sector; the
    # sector (a host) is fixed when the type is set, from `sector_identifier_uri` or the redirect URI.
    subject_type: Mapped[str] = mapped_column(String(8), default=SUBJECT_PUBLIC, server_default=SUBJECT_PUBLIC)
    sector_identifier_uri: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    sector_identifier: Mapped[str | None] = mapped_column(String(253), nullable=True)
    # How users of the tree sign in (`SIGN_IN_POLICIES`); set on the master client, read from the root.
    sign_in_policy: Mapped[str] = mapped_column(
        String(24), default=DEFAULT_SIGN_IN_POLICY, server_default=DEFAULT_SIGN_IN_POLICY
    )
    # Linked platforms whose accounts sign users of the tree in (space-separated), and whether such a
    # sign-in may create an account; set on the master client, read from the root.
    linked_sign_in: Mapped[str] = mapped_column(String(64), default="", server_default="")
    linked_sign_up: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    @property
    def is_master(self) -> bool:
        return self.parent_id is None

    @property
    def allowed_grant_types(self) -> list[str]:
        """The grants this client may use at the token endpoint (see `allowed_grant_types`)."""
        return allowed_grant_types(self.grant_types)


def allowed_grant_types(enabled: Iterable[str] | None) -> list[str]:
    """The grants a client whose registration enables `enabled` may use, in the order of GRANT_TYPES."""
    allowed = set(enabled or ()) | set(BASE_GRANT_TYPES)
    return [grant for grant in GRANT_TYPES if grant in allowed]


class ApiToken(Base):
    """An x-api-token: only its keyed hash is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
