"""Settings of the OpenID provider and its mail, built once by `create_app` (see `app.settings`).

Mail (`MAIL_BACKEND`, default `outbox` with `DEV_OUTBOX=1`, else `smtp`): `outbox` stores
messages in the database, readable at `/dev/outbox` when `DEV_OUTBOX=1`; `console` logs recipient
and subject only (never a body: it holds a login code); `smtp` sends them from a worker job through
`SMTP_HOST`:`SMTP_PORT` (587), with `SMTP_USERNAME`/`SMTP_PASSWORD`, `SMTP_STARTTLS` (on) or
`SMTP_SSL`, `SMTP_TIMEOUT` seconds. The sender is the client's `from_email_address`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.settings import Derived, env, feature_settings, parse_bool

DAY = 24 * 3600


def _issuer(config: Mapping[str, Any]) -> str:
    return str(config["BASE_URL"]).rstrip("/")


def _last_hash_key(config: Mapping[str, Any]) -> str:
    # The oldest key: a rotation prepends new keys, so pairwise subjects outlive it.
    keys = [key.strip() for key in str(config.get("SECRET_HASH_KEY") or "").split(",") if key.strip()]
    return keys[-1] if keys else ""


def _mail_backend(config: Mapping[str, Any]) -> str:
    dev_outbox = config.get("DEV_OUTBOX")
    on = parse_bool(dev_outbox) if isinstance(dev_outbox, str) else bool(dev_outbox)
    return "outbox" if on else "smtp"


@feature_settings
@dataclass(frozen=True)
class OidcSettings:
    issuer: str = env(
        "OIDC_ISSUER", Derived(_issuer, "`BASE_URL`"), "OpenID issuer name", parse=lambda text: text.rstrip("/")
    )
    access_token_ttl: int = env("OIDC_ACCESS_TOKEN_TTL", 3600, "lifetime of an access token, seconds")
    id_token_ttl: int = env("OIDC_ID_TOKEN_TTL", 3600, "lifetime of an id_token, seconds")
    code_ttl: int = env("OIDC_CODE_TTL", 60, "lifetime of an authorization code, seconds")
    login_code_ttl: int = env("OIDC_LOGIN_CODE_TTL", 600, "lifetime of an e-mailed login code, seconds")
    login_code_attempts: int = env("OIDC_LOGIN_CODE_ATTEMPTS", 5, "wrong login codes allowed per authorization request")
    login_code_sends: int = env("OIDC_LOGIN_CODE_SENDS", 3, "login codes sent per authorization request")
    login_code_sends_per_address: int = env(
        "OIDC_LOGIN_CODE_SENDS_PER_ADDRESS", 5, "login codes sent to one address per hour"
    )
    auth_request_ttl: int = env("OIDC_AUTH_REQUEST_TTL", 1800, "lifetime of an authorization request, seconds")
    session_ttl: int = env("OIDC_SESSION_TTL", 7 * DAY, "lifetime of a sign-in session, seconds")
    default_alg: str = env("OIDC_DEFAULT_ALG", "RS256", "signing algorithm of clients that set none")
    key_rotation_interval: int = env(
        "OIDC_KEY_ROTATION_INTERVAL", 30 * DAY, "age in seconds at which a signing key is rotated"
    )
    key_rotation_check: int = env("OIDC_KEY_ROTATION_CHECK", 3600, "seconds between key rotation checks")
    key_cache_seconds: float = env("OIDC_KEY_CACHE_SECONDS", 30.0, "seconds a process caches the signing keys")
    clock_leeway: int = env("OIDC_CLOCK_LEEWAY", 30, "seconds of clock skew accepted in client assertions")
    refresh_token_ttl: int = env(
        "OIDC_REFRESH_TOKEN_TTL", 30 * DAY, "absolute lifetime of a refresh token for clients that set none, seconds"
    )
    refresh_token_idle_ttl: int = env(
        "OIDC_REFRESH_TOKEN_IDLE_TTL", 14 * DAY, "idle lifetime of a refresh token for clients that set none, seconds"
    )
    refresh_reuse_grace: int = env(
        "OIDC_REFRESH_REUSE_GRACE",
        0,
        "seconds after a rotation during which reusing the old refresh token is refused without revoking its family",
    )
    request_objects: bool = env(
        "OIDC_REQUEST_OBJECTS",
        True,
        "accept signed request objects (RFC 9101 `request`, also in a pushed request); off, `request_not_supported`",
    )
    request_object_max_lifetime: int = env(
        "OIDC_REQUEST_OBJECT_MAX_LIFETIME",
        3600,
        "longest lifetime of a request object, seconds: its `exp` at most this after its `nbf` (else its `iat`, "
        "else now), as FAPI's 60 minutes",
    )
    claims_parameter: bool = env(
        "OIDC_CLAIMS_PARAMETER",
        True,
        "honour the `claims` request parameter (OpenID Connect Core 5.5); off, it is ignored",
    )
    device_flow: bool = env(
        "OIDC_DEVICE_FLOW", True, "offer the device authorization grant (RFC 8628) and advertise it in discovery"
    )
    device_code_ttl: int = env("OIDC_DEVICE_CODE_TTL", 600, "lifetime of a device code and its user code, seconds")
    device_poll_interval: int = env(
        "OIDC_DEVICE_POLL_INTERVAL", 5, "seconds a device waits between polls of the token endpoint (RFC 8628)"
    )
    device_user_code_attempts: int = env(
        "OIDC_DEVICE_USER_CODE_ATTEMPTS", 10, "user codes one network may enter on the device page per 15 minutes"
    )
    pairwise_subjects: bool = env(
        "OIDC_PAIRWISE_SUBJECTS",
        True,
        "let clients be given pairwise subjects and advertise them in discovery (clients already pairwise stay so)",
    )
    pairwise_secret: str = env(
        "OIDC_PAIRWISE_SECRET",
        Derived(_last_hash_key, "the last key of `SECRET_HASH_KEY`"),
        "key of the HMAC that makes pairwise subjects; changing it changes every pairwise `sub`",
    )
    dpop_enabled: bool = env(
        "OIDC_DPOP_ENABLED", True, "DPoP (RFC 9449): proofs at the token endpoint bind access tokens to a key"
    )
    dpop_nonce: bool = env("OIDC_DPOP_NONCE", True, "DPoP proofs must carry a nonce the server gave in `DPoP-Nonce`")
    dpop_proof_max_age: int = env(
        "OIDC_DPOP_PROOF_MAX_AGE", 300, "seconds a DPoP proof is accepted after its `iat` (and a nonce's lifetime)"
    )
    signed_userinfo_enabled: bool = env(
        "OIDC_SIGNED_USERINFO_ENABLED", True, "userinfo signed for clients that register `userinfo_signed_response_alg`"
    )
    jarm_enabled: bool = env(
        "OIDC_JARM_ENABLED",
        True,
        "JWT-secured authorization responses (`response_mode` `jwt`, `query.jwt`, `fragment.jwt`)",
    )
    par_ttl: int = env("OIDC_PAR_TTL", 60, "lifetime of a pushed authorization request's `request_uri`, seconds")
    outbound_allow_hosts: str = env(
        "OIDC_OUTBOUND_ALLOW_HOSTS",
        "",
        "host:port pairs a client's `jwks_uri` / `backchannel_logout_uri` may reach although private, and by "
        "plain http (tests only)",
    )
    token_rate_limit: str = env("OIDC_TOKEN_RATE_LIMIT", "1200 per minute", "rate limit of the token endpoint")
    login_rate_limit: str = env("OIDC_LOGIN_RATE_LIMIT", "30 per minute", "rate limit of login pages")
    recaptcha_verify_url: str = env(
        "RECAPTCHA_VERIFY_URL", "https://www.google.com/recaptcha/api/siteverify", "reCAPTCHA verification endpoint"
    )
    recaptcha_script_url: str = env(
        "RECAPTCHA_SCRIPT_URL", "https://www.google.com/recaptcha/api.js", "reCAPTCHA script of login pages"
    )
    mail_backend: str = env(
        "MAIL_BACKEND",
        Derived(_mail_backend, "`smtp`; `outbox` with `DEV_OUTBOX=1`"),
        "`smtp` (sent by a worker), `outbox` (kept in the database), `console` (logs recipient and subject, "
        "never the code)",
    )
    smtp_host: str = env("SMTP_HOST", "localhost", "SMTP server")
    smtp_port: int = env("SMTP_PORT", 587, "SMTP port")
    smtp_username: str = env("SMTP_USERNAME", "", "SMTP user; unset, no login")
    smtp_password: str = env("SMTP_PASSWORD", "", "SMTP password")
    smtp_starttls: bool = env("SMTP_STARTTLS", True, "STARTTLS on a plain SMTP connection")
    smtp_ssl: bool = env("SMTP_SSL", False, "SMTP over TLS from the start")
    smtp_timeout: float = env("SMTP_TIMEOUT", 10.0, "seconds an SMTP exchange may take")
