"""Settings of clients and their tokens, built once by `create_app` (see `app.settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.settings import Derived, env, feature_settings


def _default_sender(config: Mapping[str, Any]) -> str:
    return f"no-reply@{urlsplit(str(config['BASE_URL'])).hostname or 'localhost'}"


@feature_settings
@dataclass(frozen=True)
class TenancySettings:
    client_secret_grace_seconds: float = env(
        "CLIENT_SECRET_GRACE_SECONDS",
        24 * 3600.0,
        "seconds a rotated client secret keeps working beside the new one",
    )
    mail_default_from: str = env(
        "MAIL_DEFAULT_FROM",
        Derived(_default_sender, "`no-reply@<BASE_URL host>`"),
        "sender of e-mail of clients without their own subdomain and domain",
    )
