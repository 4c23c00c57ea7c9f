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

from app.social.connectors.errors import LinkBroken, PlatformMisconfigured, PlatformUnavailable
from app.social.connectors.http import DEFAULT_TIMEOUT, CallBudgetLike, PlatformHttp

PLATFORM = "platform_a"
DEFAULT_API_BASE = "https://api.steampowered.com"

_SUMMARY_FIELDS = ("personaname", "profileurl", "avatar", "personastate", "timecreated")


def _no_hint(response: httpx.Response, body: bytes) -> float | None:
    return None


class GameStoreConnector:
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

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def __enter__(self) -> GameStoreConnector:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def fetch_player_summary(self, steamid: str) -> dict[str, Any]:
        """Return the `platform_a` member; raises `LinkBroken` when the account does not exist."""
        body = self._get("/ISteamUser/GetPlayerSummaries/v2/", {"steamids": steamid})
        players = _response(body).get("players")
        if not isinstance(players, list):
            raise PlatformUnavailable(f"{PLATFORM}: unexpected player summary answer")
        player = next((p for p in players if isinstance(p, dict) and p.get("steamid") == steamid), None)
        if player is None:
            raise LinkBroken(f"{PLATFORM}: account {steamid} not found")
        summary: dict[str, Any] = {"platform_a_id": steamid}
        summary.update({field: player[field] for field in _SUMMARY_FIELDS if field in player})
        return summary

    def fetch_owned_games(self, steamid: str) -> dict[str, Any] | None:
        """Return the `owned_games` member, or None when the player hides game details."""
        body = self._get(
            "/IPlayerService/GetOwnedGames/v1/",
            {"steamid": steamid, "include_appinfo": 1, "include_played_free_games": 1},
        )
        return _game_list(_response(body), "game_count")

    def fetch_recently_played_games(self, steamid: str) -> dict[str, Any] | None:
        """Return the `recent_played_games` member, or None when the player hides game details."""
        body = self._get("/IPlayerService/GetRecentlyPlayedGames/v1/", {"steamid": steamid})
        return _game_list(_response(body), "total_count")

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
        return self._http.get_json(
            f"{self._api_base}{path}", params={"key": self._api_key, "format": "json", **params}
        )


def _response(body: Any) -> dict[str, Any]:
    response = body.get("response") if isinstance(body, dict) else None
    if not isinstance(response, dict):
        raise PlatformUnavailable(f"{PLATFORM}: answer without a response object")
    return response


def _game_list(response: dict[str, Any], count_field: str) -> dict[str, Any] | None:
    # A private profile answers 200 with an empty response object: nothing disclosed.
    if count_field not in response:
        return None
    games = response.get("games") or []
    return {count_field: response[count_field], "games": [_game(game) for game in games]}


def _game(game: dict[str, Any]) -> dict[str, Any]:
    mapped: dict[str, Any] = {"appid": str(game["appid"])}
    if "name" in game:
        mapped["name"] = game["name"]
    mapped["playtime_2weeks"] = game.get("playtime_2weeks", 0)
    mapped["playtime_forever"] = game.get("playtime_forever", 0)
    return mapped
