"""Platform A (game store, Steam Web API): player summary, owned and recently played games.

Maps the answers to the spec 2.5 members `platform_a`, `owned_games` and `recent_played_games`:
fields the platform does not disclose (private profile or game details) are omitted, `appid` is a
string and a missing `playtime_2weeks` is 0. A wrong API key (403 HTML) raises
`PlatformMisconfigured` (the service's key, not the player, is refused); a 429 carries no delay
hint (`RateLimited.retry_after is None`: back off exponentially).
"""

from __future__ import annotations

from typing import Any

import httpx

from app.social.connectors.answers import expect, member, objects
from app.social.connectors.errors import LinkBroken, PlatformMisconfigured
from app.social.connectors.http import DEFAULT_TIMEOUT, CallBudgetLike, PlatformConnector, PlatformHttp

PLATFORM = "platform_a"
DEFAULT_API_BASE = "https://api.steampowered.com"

_SUMMARY_FIELDS = {"personaname": str, "profileurl": str, "avatar": str, "personastate": int, "timecreated": int}


def _no_hint(response: httpx.Response, body: bytes) -> float | None:
    return None


class GameStoreConnector(PlatformConnector):
    """Reads one player's public data from the game store's Web API with the service's API key."""

    platform = PLATFORM

    def __init__(
        self,
        *,
        api_key: str,
        api_base: str = DEFAULT_API_BASE,
        timeout: float = DEFAULT_TIMEOUT,
        budget: CallBudgetLike | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._api_key = api_key
        self._api_base = api_base.rstrip("/")
        self._http = PlatformHttp(
            PLATFORM,
            read_retry_after=_no_hint,
            unauthorized=LinkBroken,
            forbidden=PlatformMisconfigured,
            timeout=timeout,
            budget=budget,
            transport=transport,
        )

    def fetch_player_summary(self, steamid: str) -> dict[str, Any]:
        """Return the `platform_a` member; raises `LinkBroken` when the account does not exist."""
        body = self._get("/ISteamUser/GetPlayerSummaries/v2/", {"steamids": steamid})
        players = objects(PLATFORM, _response(body).get("players"), "GetPlayerSummaries response.players")
        player = next((p for p in players if p.get("steamid") == steamid), None)
        if player is None:
            raise LinkBroken(f"{PLATFORM}: account {steamid} not found")
        summary: dict[str, Any] = {"platform_a_id": steamid}
        for field, kind in _SUMMARY_FIELDS.items():
            if player.get(field) is not None:
                summary[field] = member(PLATFORM, player, field, kind, "player")
        return summary

    def fetch_owned_games(self, steamid: str) -> dict[str, Any] | None:
        """Return the `owned_games` member, or None when the player hides game details."""
        body = self._get(
            "/IPlayerService/GetOwnedGames/v1/",
            {"steamid": steamid, "include_appinfo": 1, "include_played_free_games": 1},
        )
        return _game_list(_response(body), "game_count", "GetOwnedGames")

    def fetch_recently_played_games(self, steamid: str) -> dict[str, Any] | None:
        """Return the `recent_played_games` member, or None when the player hides game details."""
        body = self._get("/IPlayerService/GetRecentlyPlayedGames/v1/", {"steamid": steamid})
        return _game_list(_response(body), "total_count", "GetRecentlyPlayedGames")

    def fetch_social_data(self, steamid: str) -> dict[str, Any]:
        """Return this platform's spec 2.5 members; undisclosed members are left out (3 API calls)."""
        data: dict[str, Any] = {"platform_a": self.fetch_player_summary(steamid)}
        owned = self.fetch_owned_games(steamid)
        if owned is not None:
            data["owned_games"] = owned
        recent = self.fetch_recently_played_games(steamid)
        if recent is not None:
            data["recent_played_games"] = recent
        return data

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        return self._http.get_json(f"{self._api_base}{path}", params={"key": self._api_key, "format": "json", **params})


def _response(body: Any) -> dict[str, Any]:
    return member(PLATFORM, expect(PLATFORM, body, dict, "answer"), "response", dict, "answer")


def _game_list(response: dict[str, Any], count_field: str, call: str) -> dict[str, Any] | None:
    # A private profile answers 200 with an empty response object: nothing disclosed.
    if count_field not in response:
        return None
    count = member(PLATFORM, response, count_field, int, f"{call} response")
    games = objects(PLATFORM, response.get("games") or [], f"{call} response.games")
    return {count_field: count, "games": [_game(game, f"{call} game") for game in games]}


def _game(game: dict[str, Any], what: str) -> dict[str, Any]:
    mapped: dict[str, Any] = {"appid": str(member(PLATFORM, game, "appid", int, what))}
    if game.get("name") is not None:
        mapped["name"] = member(PLATFORM, game, "name", str, what)
    mapped["playtime_2weeks"] = member(PLATFORM, game, "playtime_2weeks", int, what, default=0)
    mapped["playtime_forever"] = member(PLATFORM, game, "playtime_forever", int, what, default=0)
    return mapped
