"""Configuration of the social feature: platform endpoints, credentials, budgets and timings.

Every key is read from the Flask config first, then from the environment (so a worker process
started with the same environment sees the same platforms), then a default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.social.budget import Rate
from app.social.connectors import platform_a, platform_b, platform_c
from app.social.openid2 import DEFAULT_CLAIMED_ID_PREFIX, DEFAULT_OP_ENDPOINT

# Game store: 100,000 calls a day per key; the others: conservative shares of their documented
# limits (chat: 50 requests/s globally; streaming: 800 points/min).
DEFAULT_BUDGETS = "platform_a=100000/86400,10/1;platform_b=50/1;platform_c=800/60"


@dataclass(frozen=True)
class SocialSettings:
    """Resolved settings; build with `load_settings(app.config)`."""

    base_url: str
    a_api_base: str
    a_api_key: str
    a_openid_url: str
    a_claimed_id_prefix: str
    b_api_base: str
    b_oauth_base: str
    b_client_id: str
    b_client_secret: str
    c_api_base: str
    c_oauth_base: str
    c_client_id: str
    c_client_secret: str
    http_timeout: float
    data_max_age: float
    data_wait: float
    link_ttl: float
    max_attempts: int
    config_fault_delay: float
    refresh_batch: int
    refresh_interval: float
    budgets: dict[str, list[Rate]]
    redis_url: str

    def callback_url(self, platform: str) -> str:
        """Where a platform sends the user back (register this URL at platforms B and C)."""
        return f"{self.base_url}/v1/social/{platform}/callback"


def load_settings(config: Mapping[str, Any]) -> SocialSettings:
    """Resolve every social setting from `config`, the environment and the defaults."""

    def get(name: str, default: Any = "") -> Any:
        value = config.get(name)
        if value is None or value == "":
            value = os.environ.get(name, default)
        return value

    return SocialSettings(
        base_url=str(get("BASE_URL", "http://127.0.0.1:5000")).rstrip("/"),
        a_api_base=get("PLATFORM_A_API_BASE", platform_a.DEFAULT_API_BASE),
        a_api_key=get("PLATFORM_A_API_KEY"),
        a_openid_url=get("PLATFORM_A_OPENID_URL", DEFAULT_OP_ENDPOINT),
        a_claimed_id_prefix=get("PLATFORM_A_CLAIMED_ID_PREFIX", DEFAULT_CLAIMED_ID_PREFIX),
        b_api_base=get("PLATFORM_B_API_BASE", platform_b.DEFAULT_API_BASE),
        b_oauth_base=get("PLATFORM_B_OAUTH_BASE", platform_b.DEFAULT_OAUTH_BASE),
        b_client_id=get("PLATFORM_B_CLIENT_ID"),
        b_client_secret=get("PLATFORM_B_CLIENT_SECRET"),
        c_api_base=get("PLATFORM_C_API_BASE", platform_c.DEFAULT_API_BASE),
        c_oauth_base=get("PLATFORM_C_OAUTH_BASE", platform_c.DEFAULT_OAUTH_BASE),
        c_client_id=get("PLATFORM_C_CLIENT_ID"),
        c_client_secret=get("PLATFORM_C_CLIENT_SECRET"),
        http_timeout=float(get("SOCIAL_HTTP_TIMEOUT", 10)),
        data_max_age=float(get("SOCIAL_DATA_MAX_AGE", 900)),
        data_wait=float(get("SOCIAL_DATA_WAIT", 5)),
        link_ttl=float(get("SOCIAL_LINK_TTL", 600)),
        max_attempts=int(get("SOCIAL_MAX_ATTEMPTS", 8)),
        config_fault_delay=float(get("SOCIAL_CONFIG_FAULT_DELAY", 3600)),
        refresh_batch=int(get("SOCIAL_REFRESH_BATCH", 200)),
        refresh_interval=float(get("SOCIAL_REFRESH_INTERVAL", 60)),
        budgets=parse_budgets(str(get("SOCIAL_BUDGETS", DEFAULT_BUDGETS))),
        redis_url=str(get("REDIS_URL", "")),
    )


def parse_budgets(text: str) -> dict[str, list[Rate]]:
    """Parse `"platform_a=100000/86400,10/1;platform_b=50/1"` (calls/seconds, comma-separated)."""
    budgets: dict[str, list[Rate]] = {}
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        platform, _, rates = entry.partition("=")
        budgets[platform.strip()] = [
            Rate(int(calls), float(seconds))
            for calls, _, seconds in (rate.strip().partition("/") for rate in rates.split(",") if rate.strip())
        ]
    return budgets
