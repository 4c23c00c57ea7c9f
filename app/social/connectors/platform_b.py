"""Platform B (chat, Discord): the user and their guilds, mapped to the spec 2.5 `platform_b` member.

API calls take the link's access token; a 401 raises `TokenExpired` (see `oauth.call_with_refresh`).
A 429 carries the platform's delay from the JSON body's `retry_after` (more precise than the
`Retry-After` header, which is the fallback).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import httpx

from app.social.connectors import oauth
from app.social.connectors.answers import expect, member, objects
from app.social.connectors.http import (
    DEFAULT_TIMEOUT,
    CallBudgetLike,
    PlatformConnector,
    PlatformHttp,
    retry_after_header,
)

PLATFORM = "platform_b"
DEFAULT_API_BASE = "https://discord.com/api/v10"
DEFAULT_OAUTH_BASE = "https://discord.com/api/oauth2"
SCOPE = "identify email guilds"
GUILD_PAGE_LIMIT = 200


def read_retry_after(response: httpx.Response, body: bytes) -> float | None:
    """The delay of a platform B 429: body `retry_after` (float seconds), else `Retry-After`."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("retry_after"), int | float):
        return max(0.0, float(payload["retry_after"]))
    return retry_after_header(response, body)


# The service's OAuth client at platform B (scopes `identify email guilds`).
oauth_app = partial(
    oauth.oauth_app, platform=PLATFORM, scope=SCOPE, oauth_base=DEFAULT_OAUTH_BASE, read_retry_after=read_retry_after
)


class ChatConnector(PlatformConnector):
    """Reads the linked user's account and guilds with their access token."""

    platform = PLATFORM

    def __init__(
        self,
        *,
        api_base: str = DEFAULT_API_BASE,
        timeout: float = DEFAULT_TIMEOUT,
        budget: CallBudgetLike | None = None,
        guild_page_limit: int = GUILD_PAGE_LIMIT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._api_base = api_base.rstrip("/")
        self._guild_page_limit = guild_page_limit
        self._http = PlatformHttp(
            PLATFORM, read_retry_after=read_retry_after, timeout=timeout, budget=budget, transport=transport
        )

    def fetch_current_user(self, access_token: str) -> dict[str, Any]:
        """The raw `users/@me` object (`id`, `username`, and with the email scope `verified`)."""
        user = expect(PLATFORM, self._get("/users/@me", access_token), dict, "users/@me")
        member(PLATFORM, user, "id", (str, int), "users/@me")
        member(PLATFORM, user, "username", str, "users/@me", default=None)
        return user

    def fetch_guilds(self, access_token: str) -> list[dict[str, Any]]:
        """Every guild of the user as `{id, name, owner}`, following `after` pagination to the end."""
        guilds: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": self._guild_page_limit}
            if after is not None:
                params["after"] = after
            page = [
                _guild(guild)
                for guild in objects(PLATFORM, self._get("/users/@me/guilds", access_token, params), "guilds")
            ]
            guilds.extend(page)
            if len(page) < self._guild_page_limit:
                return guilds
            after = page[-1]["id"]

    def fetch_social_data(self, access_token: str) -> dict[str, Any]:
        """Return `{"platform_b": {email_verified?, guilds}}`; `email_verified` only when disclosed."""
        user = self.fetch_current_user(access_token)
        chat: dict[str, Any] = {}
        if isinstance(user.get("verified"), bool):
            chat["email_verified"] = user["verified"]
        chat["guilds"] = self.fetch_guilds(access_token)
        return {"platform_b": chat}

    def _get(self, path: str, access_token: str, params: dict[str, Any] | None = None) -> Any:
        return self._http.get_json(
            f"{self._api_base}{path}", params=params, headers={"Authorization": f"Bearer {access_token}"}
        )


def _guild(guild: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(member(PLATFORM, guild, "id", (str, int), "guild")),
        "name": member(PLATFORM, guild, "name", str, "guild"),
        "owner": member(PLATFORM, guild, "owner", bool, "guild", default=False),
    }
