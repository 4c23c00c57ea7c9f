"""Settings of the social feature: platform endpoints, credentials, budgets and timings.

Built once by `create_app` (see `app.settings`): a worker process started with the same
environment sees the same platforms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.settings import env, feature_settings
from app.social.budget import Rate
from app.social.connectors import platform_a, platform_b, platform_c
from app.social.openid2 import DEFAULT_CLAIMED_ID_PREFIX, DEFAULT_OP_ENDPOINT

# Game store: 100,000 calls a day per key; the others: conservative shares of their documented
# limits (chat: 50 requests/s globally; streaming: 800 points/min).
DEFAULT_BUDGETS = "platform_a=100000/86400,10/1;platform_b=50/1;platform_c=800/60"


@feature_settings
@dataclass(frozen=True)
class SocialSettings:
    """Platform endpoints and credentials, budgets and timings of the social feature."""

    a_api_base: str = env("PLATFORM_A_API_BASE", platform_a.DEFAULT_API_BASE, "API of platform A (the game store)")
    a_api_key: str = env("PLATFORM_A_API_KEY", "", "API key of platform A; unset, platform A is not configured")
    a_openid_url: str = env("PLATFORM_A_OPENID_URL", DEFAULT_OP_ENDPOINT, "OpenID 2.0 endpoint of platform A")
    a_claimed_id_prefix: str = env(
        "PLATFORM_A_CLAIMED_ID_PREFIX", DEFAULT_CLAIMED_ID_PREFIX, "prefix of platform A's claimed identifiers"
    )
    b_api_base: str = env("PLATFORM_B_API_BASE", platform_b.DEFAULT_API_BASE, "API of platform B (chat)")
    b_oauth_base: str = env("PLATFORM_B_OAUTH_BASE", platform_b.DEFAULT_OAUTH_BASE, "OAuth endpoints of platform B")
    b_client_id: str = env("PLATFORM_B_CLIENT_ID", "", "OAuth client id at platform B")
    b_client_secret: str = env("PLATFORM_B_CLIENT_SECRET", "", "OAuth client secret at platform B")
    c_api_base: str = env("PLATFORM_C_API_BASE", platform_c.DEFAULT_API_BASE, "API of platform C (streaming)")
    c_oauth_base: str = env("PLATFORM_C_OAUTH_BASE", platform_c.DEFAULT_OAUTH_BASE, "OAuth endpoints of platform C")
    c_client_id: str = env("PLATFORM_C_CLIENT_ID", "", "OAuth client id at platform C")
    c_client_secret: str = env("PLATFORM_C_CLIENT_SECRET", "", "OAuth client secret at platform C")
    http_timeout: float = env("SOCIAL_HTTP_TIMEOUT", 10.0, "seconds a call to a platform may take in all")
    data_max_age: float = env("SOCIAL_DATA_MAX_AGE", 900.0, "seconds before fetched platform data is refreshed")
    data_wait: float = env("SOCIAL_DATA_WAIT", 5.0, "seconds a read waits for the first fetch of a new link")
    link_ttl: float = env("SOCIAL_LINK_TTL", 600.0, "seconds a started link may take to complete")
    max_attempts: int = env("SOCIAL_MAX_ATTEMPTS", 8, "attempts of a platform fetch")
    config_fault_delay: float = env(
        "SOCIAL_CONFIG_FAULT_DELAY",
        3600.0,
        "a refused platform key holds a link's fetches off this long, seconds (the link stays linked)",
    )
    refresh_batch: int = env("SOCIAL_REFRESH_BATCH", 200, "links refreshed per round")
    refresh_interval: float = env("SOCIAL_REFRESH_INTERVAL", 60.0, "seconds between refresh rounds")
    budgets: Mapping[str, list[Rate]] = env(
        "SOCIAL_BUDGETS",
        DEFAULT_BUDGETS,
        "calls per seconds allowed per platform (`platform=calls/seconds,...;...`), shared through Redis",
        parse=lambda text: parse_budgets(text),
    )

    def __post_init__(self) -> None:
        # The default is declared as text (docs/settings.md shows it); the object holds parsed budgets.
        if isinstance(self.budgets, str):
            object.__setattr__(self, "budgets", parse_budgets(self.budgets))


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
