"""Settings of the OpenID provider and its mail, read from the environment with safe defaults.

They are installed into `app.config` when the blueprint is registered (values already present,
e.g. from `create_app(config=...)`, win), so every setting can be overridden per application.

Mail (`MAIL_BACKEND`, default `outbox` with `DEV_OUTBOX=1`, else `smtp`): `outbox` stores
messages in the database, readable at `/dev/outbox` when `DEV_OUTBOX=1`; `console` logs recipient
and subject only (never a body: it holds a login code); `smtp` sends them from a worker job through
`SMTP_HOST`:`SMTP_PORT` (587), with `SMTP_USERNAME`/`SMTP_PASSWORD`, `SMTP_STARTTLS` (on) or
`SMTP_SSL`, `SMTP_TIMEOUT` seconds. The sender is the client's `from_email_address`.
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _defaults(app: Flask) -> dict[str, Any]:
    env = os.environ
    dev_outbox = _bool(env.get("DEV_OUTBOX", "0"))
    return {
        "OIDC_ISSUER": env.get("OIDC_ISSUER", "").rstrip("/") or app.config["BASE_URL"],
        "OIDC_ACCESS_TOKEN_TTL": int(env.get("OIDC_ACCESS_TOKEN_TTL", 3600)),
        "OIDC_ID_TOKEN_TTL": int(env.get("OIDC_ID_TOKEN_TTL", 3600)),
        "OIDC_CODE_TTL": int(env.get("OIDC_CODE_TTL", 60)),
        "OIDC_LOGIN_CODE_TTL": int(env.get("OIDC_LOGIN_CODE_TTL", 600)),
        "OIDC_LOGIN_CODE_ATTEMPTS": int(env.get("OIDC_LOGIN_CODE_ATTEMPTS", 5)),
        "OIDC_LOGIN_CODE_SENDS": int(env.get("OIDC_LOGIN_CODE_SENDS", 3)),
        "OIDC_LOGIN_CODE_SENDS_PER_ADDRESS": int(env.get("OIDC_LOGIN_CODE_SENDS_PER_ADDRESS", 5)),
        "OIDC_AUTH_REQUEST_TTL": int(env.get("OIDC_AUTH_REQUEST_TTL", 1800)),
        "OIDC_SESSION_TTL": int(env.get("OIDC_SESSION_TTL", 7 * 24 * 3600)),
        "OIDC_DEFAULT_ALG": env.get("OIDC_DEFAULT_ALG", "RS256"),
        "OIDC_KEY_ROTATION_INTERVAL": int(env.get("OIDC_KEY_ROTATION_INTERVAL", 30 * 24 * 3600)),
        "OIDC_KEY_ROTATION_CHECK": int(env.get("OIDC_KEY_ROTATION_CHECK", 3600)),
        "OIDC_KEY_CACHE_SECONDS": float(env.get("OIDC_KEY_CACHE_SECONDS", 30)),
        "OIDC_CLOCK_LEEWAY": int(env.get("OIDC_CLOCK_LEEWAY", 30)),
        "OIDC_REFRESH_TOKEN_TTL": int(env.get("OIDC_REFRESH_TOKEN_TTL", 30 * 24 * 3600)),
        "OIDC_REFRESH_TOKEN_IDLE_TTL": int(env.get("OIDC_REFRESH_TOKEN_IDLE_TTL", 14 * 24 * 3600)),
        "OIDC_REFRESH_REUSE_GRACE": int(env.get("OIDC_REFRESH_REUSE_GRACE", 0)),
        "OIDC_PAR_TTL": int(env.get("OIDC_PAR_TTL", 60)),
        "OIDC_OUTBOUND_ALLOW_HOSTS": env.get("OIDC_OUTBOUND_ALLOW_HOSTS", ""),
        "OIDC_TOKEN_RATE_LIMIT": env.get("OIDC_TOKEN_RATE_LIMIT", "1200 per minute"),
        "OIDC_LOGIN_RATE_LIMIT": env.get("OIDC_LOGIN_RATE_LIMIT", "30 per minute"),
        "RECAPTCHA_VERIFY_URL": env.get("RECAPTCHA_VERIFY_URL", "https://www.google.com/recaptcha/api/siteverify"),
        "RECAPTCHA_SCRIPT_URL": env.get("RECAPTCHA_SCRIPT_URL", "https://www.google.com/recaptcha/api.js"),
        "DEV_OUTBOX": dev_outbox,
        "MAIL_BACKEND": env.get("MAIL_BACKEND", "outbox" if dev_outbox else "smtp"),
        "SMTP_HOST": env.get("SMTP_HOST", "localhost"),
        "SMTP_PORT": int(env.get("SMTP_PORT", 587)),
        "SMTP_USERNAME": env.get("SMTP_USERNAME", ""),
        "SMTP_PASSWORD": env.get("SMTP_PASSWORD", ""),
        "SMTP_STARTTLS": _bool(env.get("SMTP_STARTTLS", "1")),
        "SMTP_SSL": _bool(env.get("SMTP_SSL", "0")),
        "SMTP_TIMEOUT": float(env.get("SMTP_TIMEOUT", 10)),
    }


def install_settings(app: Flask) -> None:
    """Fill in every OpenID/mail setting the application does not already define."""
    for name, value in _defaults(app).items():
        app.config.setdefault(name, value)
    app.config["OIDC_ISSUER"] = app.config["OIDC_ISSUER"].rstrip("/")
