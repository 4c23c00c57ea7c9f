"""Settings of dynamic client registration, built once by `create_app` (see `app.settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from app.settings import env, feature_settings


@feature_settings
@dataclass(frozen=True)
class RegistrationSettings:
    enabled: bool = env(
        "OIDC_DYNAMIC_REGISTRATION",
        True,
        "dynamic client registration (RFC 7591/7592) under initial access tokens; off, its endpoints answer 404 "
        "and discovery names no `registration_endpoint`",
    )
    initial_token_ttl: int = env(
        "OIDC_INITIAL_ACCESS_TOKEN_TTL",
        30 * 24 * 3600,
        "lifetime of an initial access token, seconds, unless its issuer sets one (0: no expiry)",
    )
