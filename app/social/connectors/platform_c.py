"""Platform C (streaming, Twitch Helix): user, followed channels and follower count.

Mapped to the spec 2.5 `platform_c` member. Every call sends `Client-Id` and the link's bearer
token; a 401 raises `TokenExpired`. A 429's delay comes from `Ratelimit-Reset` (epoch seconds).
Followed channels are read to the last page.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx

from app.social.connectors import oauth
from app.social.connectors.answers import expect, member, objects
from app.social.connectors.errors import MalformedAnswer
from app.social.connectors.http import (
    DEFAULT_TIMEOUT,
    CallBudgetLike,
    PlatformConnector,
    PlatformHttp,
    RetryAfterReader,
    retry_after_header,
)

PLATFORM = "platform_c"
DEFAULT_API_BASE = "https://api.twitch.tv/helix"
DEFAULT_OAUTH_BASE = "https://id.twitch.tv/oauth2"
SCOPE = "user:read:follows"
FOLLOWED_PAGE_SIZE = 100

_BROADCASTER_FIELDS = ("broadcaster_login", "broadcaster_name", "followed_at")


def retry_after_reader(clock: Callable[[], float] = time.time) -> RetryAfterReader:
    """A reader of platform C 429 delays: `Ratelimit-Reset` epoch minus now, else `Retry-After`."""

    def read(response: httpx.Response, body: bytes) -> float | None:
        reset = response.headers.get("Ratelimit-Reset")
        if reset is not None:
            try:
                return max(0.0, float(reset) - clock())
            except ValueError:
                pass
        return retry_after_header(response, body)

    return read


# The service's OAuth client at platform C (scope `user:read:follows`).
oauth_app = partial(
    oauth.oauth_app,
    platform=PLATFORM,
    scope=SCOPE,
    oauth_base=DEFAULT_OAUTH_BASE,
    read_retry_after=retry_after_reader(),
)


class StreamingConnector(PlatformConnector):
    """Reads the linked user's channel data with their access token and the service's client id."""

    platform = PLATFORM

    def __init__(
        self,
        *,
        client_id: str,
        api_base: str = DEFAULT_API_BASE,
        timeout: float = DEFAULT_TIMEOUT,
        budget: CallBudgetLike | None = None,
        followed_page_size: int = FOLLOWED_PAGE_SIZE,
        clock: Callable[[], float] = time.time,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._api_base = api_base.rstrip("/")
        self._page_size = followed_page_size
        self._http = PlatformHttp(
            PLATFORM,
            read_retry_after=retry_after_reader(clock),
            timeout=timeout,
            budget=budget,
            headers={"Client-Id": client_id},
            transport=transport,
        )

    def fetch_current_user(self, access_token: str) -> dict[str, Any]:
        """The token owner's user object (`id`, `login`, `display_name`, `view_count`, ...)."""
        body = expect(PLATFORM, self._get("/users", access_token), dict, "users")
        users = objects(PLATFORM, body.get("data"), "users.data")
        if not users:
            raise MalformedAnswer(f"{PLATFORM}: users.data is empty for the token's own user")
        member(PLATFORM, users[0], "id", (str, int), "users.data[0]")
        member(PLATFORM, users[0], "login", str, "users.data[0]")
        return users[0]

    def fetch_followed_channels(self, access_token: str, user_id: str) -> dict[str, Any]:
        """`{total, broadcasters: [...]}` over every page of the channels `user_id` follows."""
        broadcasters: list[dict[str, Any]] = []
        total = 0
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"user_id": user_id, "first": self._page_size}
            if cursor:
                params["after"] = cursor
            page = expect(PLATFORM, self._get("/channels/followed", access_token, params), dict, "channels/followed")
            items = objects(PLATFORM, page.get("data"), "channels/followed data")
            total = member(PLATFORM, page, "total", int, "channels/followed", default=total)
            broadcasters.extend(
                {field: member(PLATFORM, item, field, str, "followed channel") for field in _BROADCASTER_FIELDS}
                for item in items
            )
            pagination = member(PLATFORM, page, "pagination", dict, "channels/followed", default={})
            cursor = member(PLATFORM, pagination, "cursor", str, "channels/followed pagination", default=None)
            # The last page may still carry a cursor; an empty page ends the walk as well.
            if not cursor or not items:
                return {"total": total, "broadcasters": broadcasters}

    def fetch_follower_count(self, access_token: str, user_id: str) -> int:
        """The user's follower total (given even when `data` is withheld without moderator scope)."""
        body = self._get("/channels/followers", access_token, {"broadcaster_id": user_id, "first": 1})
        return member(PLATFORM, expect(PLATFORM, body, dict, "channels/followers"), "total", int, "channels/followers")

    def fetch_social_data(self, access_token: str) -> dict[str, Any]:
        """Return `{"platform_c": {username, view_count?, follower_count, followed_channels}}`."""
        user = self.fetch_current_user(access_token)
        user_id = str(user["id"])
        streaming: dict[str, Any] = {"username": user["login"]}
        if isinstance(user.get("view_count"), int) and not isinstance(user["view_count"], bool):
            streaming["view_count"] = user["view_count"]
        streaming["follower_count"] = self.fetch_follower_count(access_token, user_id)
        streaming["followed_channels"] = self.fetch_followed_channels(access_token, user_id)
        return {"platform_c": streaming}

    def _get(self, path: str, access_token: str, params: dict[str, Any] | None = None) -> Any:
        return self._http.get_json(
            f"{self._api_base}{path}", params=params, headers={"Authorization": f"Bearer {access_token}"}
        )
