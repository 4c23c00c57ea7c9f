"""Settings of passkeys: the WebAuthn relying party, which follows `BASE_URL` unless set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.settings import Derived, env, feature_settings


def _rp_id(config: Mapping[str, Any]) -> str:
    return urlsplit(str(config["BASE_URL"])).hostname or "localhost"


def _origins(config: Mapping[str, Any]) -> str:
    parts = urlsplit(str(config["BASE_URL"]))
    return f"{parts.scheme}://{parts.netloc}"


@feature_settings
@dataclass(frozen=True)
class PasskeySettings:
    rp_id: str = env(
        "PASSKEY_RP_ID", Derived(_rp_id, "the host of `BASE_URL`"), "WebAuthn relying party id of passkeys"
    )
    origins: str = env(
        "PASSKEY_ORIGINS",
        Derived(_origins, "the origin of `BASE_URL`"),
        "origins (space-separated) whose pages may use passkeys",
    )
    rp_name: str = env("PASSKEY_RP_NAME", "Tessera", "relying party name an authenticator shows beside a passkey")
