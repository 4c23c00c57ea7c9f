"""Fake platforms for tests: real HTTP servers on 127.0.0.1 following the social fakes specification.

Each fake runs in a background thread on an ephemeral port (`with FakeGameStore() as store:` or
`start()`/`stop()`), keeps its own users, counts every request it receives per endpoint label
(`fake.calls["GetOwnedGames"]`) and can be switched per test:

- `rate_limit_next(endpoint, times=1, retry_after=...)`: the next answers of `endpoint` are 429 in
  the platform's own style (A: no hint; B: `Retry-After` + JSON `retry_after`; C: `Ratelimit-Reset`).
- `expire_tokens(user_id)` (B, C): the user's current access tokens answer 401 until refreshed.
- `answer_next(endpoint, body)`: the next answer of `endpoint` is `body` as JSON, whatever it is
  (malformed answers: a game without `appid`, a guild that is not an object, ...).
- `set_quota(calls, per_seconds)`: enforce a platform limit on API calls; refusals are counted in
  `quota_refusals` (proof that our budget kept us under it).
- `response_delay`: seconds every API answer waits (makes races and benchmarks realistic).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

Handler = Callable[[Request], Response]


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, headers=headers, content_type="application/json")


@dataclass
class _Endpoint:
    label: str
    handler: Handler
    api: bool  # counts towards the quota and can be rate-limited by `set_quota`


class FakePlatform:
    """Base of the fakes: server thread, routing, call counters, forced 429s and quotas."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.quota_refusals = 0
        self.response_delay = 0.0
        self._lock = threading.Lock()
        self._forced_429: dict[str, deque[float | None]] = {}
        self._forced_answers: dict[str, deque[Any]] = {}
        self._quota: tuple[int, float] | None = None
        self._quota_log: deque[float] = deque()
        self.api_call_times: list[float] = []  # monotonic arrival times of served API calls
        self._endpoints: dict[str, _Endpoint] = {}
        rules = []
        for path, label, handler, methods, api in self.routes():
            self._endpoints[label] = _Endpoint(label, handler, api)
            rules.append(Rule(path, endpoint=label, methods=methods))
        self._url_map = Map(rules, strict_slashes=False)
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def routes(self) -> Iterable[tuple[str, str, Handler, list[str], bool]]:
        """(path, label, handler, methods, is_api) of every endpoint; subclasses define them."""
        return ()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakePlatform:
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True, request_handler=_QuietHandler)
        self._server.daemon_threads = True
        server = self._server
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "fake not started"
        return f"http://127.0.0.1:{self._server.server_port}"

    # --- switches and counters -------------------------------------------------------------------

    def rate_limit_next(self, endpoint: str, times: int = 1, retry_after: float | None = 1.0) -> None:
        """The next `times` requests to `endpoint` answer 429 in the platform's style."""
        assert endpoint in self._endpoints, f"unknown endpoint {endpoint}"
        with self._lock:
            self._forced_429.setdefault(endpoint, deque()).extend([retry_after] * times)

    def answer_next(self, endpoint: str, body: Any) -> None:
        """The next request to `endpoint` gets `body` (any JSON value) with status 200."""
        assert endpoint in self._endpoints, f"unknown endpoint {endpoint}"
        with self._lock:
            self._forced_answers.setdefault(endpoint, deque()).append(body)

    def set_quota(self, calls: int, per_seconds: float) -> None:
        """Refuse API calls beyond `calls` in any `per_seconds` window (sliding), like the platform."""
        with self._lock:
            self._quota = (calls, per_seconds)
            self._quota_log.clear()

    def reset_calls(self) -> None:
        with self._lock:
            self.calls.clear()
            self.quota_refusals = 0
            self.api_call_times.clear()

    def reset_switches(self) -> None:
        """Forget counters, forced 429s, the quota and the delay (between tests sharing a fake)."""
        with self._lock:
            self.calls.clear()
            self.quota_refusals = 0
            self.api_call_times.clear()
            self._forced_429.clear()
            self._forced_answers.clear()
            self._quota = None
            self._quota_log.clear()
            self.response_delay = 0.0

    def peak_calls(self, per_seconds: float) -> int:
        """The most API calls served within any window of `per_seconds` seconds."""
        with self._lock:
            times = sorted(self.api_call_times)
        peak, start = 0, 0
        for end, arrived in enumerate(times):
            while arrived - times[start] >= per_seconds:
                start += 1
            peak = max(peak, end - start + 1)
        return peak

    @property
    def api_calls(self) -> int:
        """Requests received by API endpoints (not OAuth/OpenID ones)."""
        with self._lock:
            return sum(count for label, count in self.calls.items() if self._endpoints[label].api)

    # --- platform style hooks --------------------------------------------------------------------

    def rate_limited_response(self, retry_after: float | None) -> Response:
        raise AssertionError("subclasses define their 429 style")

    # --- WSGI ------------------------------------------------------------------------------------

    def _wsgi(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        request = Request(environ)
        adapter = self._url_map.bind_to_environ(environ)
        try:
            label, _ = adapter.match()
        except HTTPException as exc:
            return exc(environ, start_response)
        endpoint = self._endpoints[label]
        response = self._gate(endpoint)
        if response is None:
            if endpoint.api and self.response_delay:
                time.sleep(self.response_delay)
            response = endpoint.handler(request)
        return response(environ, start_response)

    def _gate(self, endpoint: _Endpoint) -> Response | None:
        with self._lock:
            self.calls[endpoint.label] += 1
            forced = self._forced_429.get(endpoint.label)
            if forced:
                return self.rate_limited_response(forced.popleft())
            answers = self._forced_answers.get(endpoint.label)
            if answers:
                return json_response(answers.popleft())
            if endpoint.api and self._quota is not None:
                calls, per_seconds = self._quota
                now = time.monotonic()
                while self._quota_log and self._quota_log[0] <= now - per_seconds:
                    self._quota_log.popleft()
                if len(self._quota_log) >= calls:
                    self.quota_refusals += 1
                    return self.rate_limited_response(self._quota_log[0] + per_seconds - now)
                self._quota_log.append(now)
            if endpoint.api:
                self.api_call_times.append(time.monotonic())
        return None


# ================================================================================================
# Platform A: game store (Steam Web API + Steam OpenID 2.0 provider)
# ================================================================================================

OPENID_NS = "http://specs.openid.net/auth/2.0"
STEAM_CLAIMED_ID_PREFIX = "https://steamcommunity.com/openid/id/"
_OPENID_SIGNED = "signed,op_endpoint,claimed_id,identity,return_to,response_nonce,assoc_handle"


@dataclass
class SteamGame:
    appid: int
    name: str
    playtime_forever: int
    playtime_2weeks: int = 0  # 0 = not played recently: the real API then omits the field


@dataclass
class SteamPlayer:
    steamid: str
    personaname: str
    public: bool = True
    personastate: int = 1
    timecreated: int = 1262304000
    games: list[SteamGame] = field(default_factory=list)

    @property
    def recent_games(self) -> list[SteamGame]:
        return [game for game in self.games if game.playtime_2weeks]


def forbidden_html() -> str:
    return (
        "<html><head><title>Forbidden</title></head><body><h1>Forbidden</h1>"
        "Access is denied. Retrying will not help. Please verify your <pre>key=</pre> parameter."
        "</body></html>"
    )


class FakeGameStore(FakePlatform):
    """Steam-like Web API (`api_base` = `base_url`) and OpenID 2.0 provider (`openid_endpoint`).

    Sign-in at the provider is decided by the test: `openid_user = "<steamid>"` (None → cancel).
    `check_authentication` answers `is_valid:true` once per assertion when `single_verification`
    (as OpenID 2.0 requires of a provider); set it False to let a replay through to our nonce check.
    """

    def __init__(self, api_key: str = "fake-steam-key") -> None:
        self.api_key = api_key
        self.players: dict[str, SteamPlayer] = {}
        self.openid_user: str | None = None
        self.claimed_id_prefix = STEAM_CLAIMED_ID_PREFIX
        self.single_verification = True
        self._assoc_handle = secrets.token_hex(8)
        self._assoc_secret = secrets.token_bytes(32)
        self._verified_nonces: set[str] = set()
        super().__init__()

    def routes(self) -> Iterable[tuple[str, str, Handler, list[str], bool]]:
        return [
            ("/ISteamUser/GetPlayerSummaries/v2/", "GetPlayerSummaries", self._summaries, ["GET"], True),
            ("/IPlayerService/GetOwnedGames/v1/", "GetOwnedGames", self._owned, ["GET"], True),
            ("/IPlayerService/GetRecentlyPlayedGames/v1/", "GetRecentlyPlayedGames", self._recent, ["GET"], True),
            ("/openid/login", "openid.checkid_setup", self._checkid_setup, ["GET"], False),
            ("/openid/login", "openid.check_authentication", self._check_authentication, ["POST"], False),
        ]

    @property
    def api_base(self) -> str:
        return self.base_url

    @property
    def openid_endpoint(self) -> str:
        return f"{self.base_url}/openid/login"

    def add_player(
        self, steamid: str, *, public: bool = True, games: list[SteamGame] | None = None, personaname: str | None = None
    ) -> SteamPlayer:
        player = SteamPlayer(
            steamid=steamid,
            personaname=personaname or f"player-{steamid[-4:]}",
            public=public,
            games=list(games or []),
        )
        self.players[steamid] = player
        return player

    def rate_limited_response(self, retry_after: float | None) -> Response:
        # The game store gives no hint at all: no Retry-After, an HTML page.
        return Response("<html><body><h1>Too Many Requests</h1></body></html>", status=429, content_type="text/html")

    # --- Web API -----------------------------------------------------------------------------------

    def _key_refused(self, request: Request) -> Response | None:
        if request.args.get("key") != self.api_key:
            return Response(forbidden_html(), status=403, content_type="text/html")
        return None

    def _summaries(self, request: Request) -> Response:
        if (refused := self._key_refused(request)) is not None:
            return refused
        players = []
        for steamid in request.args.get("steamids", "").split(",")[:100]:
            player = self.players.get(steamid)
            if player is None:
                continue
            summary: dict[str, Any] = {
                "steamid": player.steamid,
                "communityvisibilitystate": 3 if player.public else 1,
                "profilestate": 1,
                "personaname": player.personaname,
                "profileurl": f"https://steamcommunity.com/profiles/{player.steamid}/",
                "avatar": f"https://avatars.example/{player.steamid}.jpg",
                "avatarmedium": f"https://avatars.example/{player.steamid}_medium.jpg",
                "avatarfull": f"https://avatars.example/{player.steamid}_full.jpg",
                "avatarhash": hashlib.sha1(player.steamid.encode()).hexdigest(),
                "personastate": player.personastate,
            }
            if player.public:
                summary.update(
                    {
                        "timecreated": player.timecreated,
                        "primaryclanid": "103582791429521408",
                        "loccountrycode": "DE",
                        "lastlogoff": 1700000000,
                    }
                )
            players.append(summary)
        return json_response({"response": {"players": players}})

    def _owned(self, request: Request) -> Response:
        if (refused := self._key_refused(request)) is not None:
            return refused
        player = self.players.get(request.args.get("steamid", ""))
        if player is None or not player.public:
            return json_response({"response": {}})
        with_info = request.args.get("include_appinfo") in ("1", "true")
        games = []
        for game in player.games:
            item: dict[str, Any] = {
                "appid": game.appid,
                "playtime_forever": game.playtime_forever,
                "playtime_windows_forever": game.playtime_forever,
                "rtime_last_played": 1700000000,
            }
            if with_info:
                item.update({"name": game.name, "img_icon_url": "0123abcd", "has_community_visible_stats": True})
            if game.playtime_2weeks:
                item["playtime_2weeks"] = game.playtime_2weeks
            games.append(item)
        return json_response({"response": {"game_count": len(games), "games": games}})

    def _recent(self, request: Request) -> Response:
        if (refused := self._key_refused(request)) is not None:
            return refused
        player = self.players.get(request.args.get("steamid", ""))
        if player is None or not player.public:
            return json_response({"response": {}})
        recent = player.recent_games
        body: dict[str, Any] = {"total_count": len(recent)}
        if recent:
            body["games"] = [
                {
                    "appid": game.appid,
                    "name": game.name,
                    "playtime_2weeks": game.playtime_2weeks,
                    "playtime_forever": game.playtime_forever,
                    "img_icon_url": "0123abcd",
                }
                for game in recent
            ]
        return json_response({"response": body})

    # --- OpenID 2.0 provider -----------------------------------------------------------------------

    def _checkid_setup(self, request: Request) -> Response:
        args = request.args
        return_to = args.get("openid.return_to", "")
        realm = args.get("openid.realm", "")
        if (
            args.get("openid.ns") != OPENID_NS
            or args.get("openid.mode") != "checkid_setup"
            or not return_to
            or not realm
            or not return_to.startswith(realm)
        ):
            return Response("bad OpenID request", status=400, content_type="text/plain")
        if self.openid_user is None:
            return _redirect(return_to, {"openid.ns": OPENID_NS, "openid.mode": "cancel"})
        claimed_id = f"{self.claimed_id_prefix}{self.openid_user}"
        fields = {
            "openid.ns": OPENID_NS,
            "openid.mode": "id_res",
            "openid.op_endpoint": self.openid_endpoint,
            "openid.claimed_id": claimed_id,
            "openid.identity": claimed_id,
            "openid.return_to": return_to,
            "openid.response_nonce": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") + secrets.token_hex(4),
            "openid.assoc_handle": self._assoc_handle,
            "openid.signed": _OPENID_SIGNED,
        }
        fields["openid.sig"] = self._sign(fields)
        return _redirect(return_to, fields)

    def _check_authentication(self, request: Request) -> Response:
        form = request.form
        valid = (
            form.get("openid.mode") == "check_authentication"
            and form.get("openid.assoc_handle") == self._assoc_handle
            and hmac.compare_digest(form.get("openid.sig", ""), self._sign(form))
        )
        nonce = form.get("openid.response_nonce", "")
        with self._lock:
            if valid and self.single_verification:
                valid = nonce not in self._verified_nonces
            if valid:
                self._verified_nonces.add(nonce)
        body = f"ns:{OPENID_NS}\nis_valid:{'true' if valid else 'false'}\n"
        return Response(body, content_type="text/plain")

    def _sign(self, fields: Any) -> str:
        signed = (fields.get("openid.signed") or "").split(",")
        message = "".join(f"{name}:{fields.get('openid.' + name, '')}\n" for name in signed)
        digest = hmac.new(self._assoc_secret, message.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest).decode()


def _redirect(url: str, params: dict[str, str]) -> Response:
    separator = "&" if "?" in url else "?"
    return Response(status=302, headers={"Location": f"{url}{separator}{urlencode(params)}"})


# ================================================================================================
# OAuth 2.0 provider shared by platforms B and C
# ================================================================================================


@dataclass
class _Grant:
    user_id: str
    redirect_uri: str
    scope: str


@dataclass
class _AccessToken:
    user_id: str
    expires_at: float


class _OAuthProvider:
    """Authorization codes, rotating refresh tokens and expirable access tokens for one platform."""

    def __init__(self, client_id: str, client_secret: str, lifetime: int) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.lifetime = lifetime
        self.authorize_as: str | None = None
        self._codes: dict[str, _Grant] = {}
        self._refresh: dict[str, tuple[str, str]] = {}  # refresh token -> (user id, scope)
        self._access: dict[str, _AccessToken] = {}
        self._lock = threading.Lock()

    def authorize(self, request: Request) -> Response:
        args = request.args
        redirect_uri = args.get("redirect_uri", "")
        if args.get("client_id") != self.client_id or not redirect_uri or args.get("response_type") != "code":
            return Response("invalid authorization request", status=400, content_type="text/plain")
        params = {"state": args.get("state", "")}
        if self.authorize_as is None:
            params.update({"error": "access_denied", "error_description": "The resource owner denied"})
        else:
            code = secrets.token_urlsafe(16)
            with self._lock:
                self._codes[code] = _Grant(self.authorize_as, redirect_uri, args.get("scope", ""))
            params["code"] = code
        return _redirect(redirect_uri, params)

    def token(self, form: Any) -> tuple[int, dict[str, Any]]:
        """(status, body) of a token request already checked for client authentication."""
        grant_type = form.get("grant_type")
        with self._lock:
            if grant_type == "authorization_code":
                grant = self._codes.pop(form.get("code", ""), None)
                if grant is None or grant.redirect_uri != form.get("redirect_uri"):
                    return 400, {"error": "invalid_grant", "error_description": "Invalid authorization code"}
                return 200, self._issue(grant.user_id, grant.scope)
            if grant_type == "refresh_token":
                owner = self._refresh.pop(form.get("refresh_token", ""), None)
                if owner is None:
                    return 400, {"error": "invalid_grant", "error_description": "Invalid refresh token"}
                return 200, self._issue(*owner)
        return 400, {"error": "unsupported_grant_type"}

    def _issue(self, user_id: str, scope: str) -> dict[str, Any]:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self._access[access] = _AccessToken(user_id, time.time() + self.lifetime)
        self._refresh[refresh] = (user_id, scope)
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "refresh_token": refresh,
            "scope": scope,
        }

    def user_of(self, request: Request) -> str | None:
        """The user whose valid bearer token the request carries (None → 401)."""
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return None
        with self._lock:
            token = self._access.get(header.removeprefix("Bearer "))
        if token is None or token.expires_at <= time.time():
            return None
        return token.user_id

    def expire_tokens(self, user_id: str) -> None:
        with self._lock:
            for token in self._access.values():
                if token.user_id == user_id:
                    token.expires_at = 0.0

    def issue_for_test(self, user_id: str, scope: str) -> dict[str, Any]:
        with self._lock:
            return self._issue(user_id, scope)


# ================================================================================================
# Platform B: chat (Discord OAuth2 + API)
# ================================================================================================


@dataclass
class DiscordUser:
    id: str
    username: str
    email: str | None = None
    verified: bool | None = None
    guilds: list[dict[str, Any]] = field(default_factory=list)


class _OAuthFakePlatform(FakePlatform):
    """A fake platform whose users consent through `self.oauth`; `authorize_as` picks who consents."""

    oauth: _OAuthProvider

    @property
    def authorize_as(self) -> str | None:
        return self.oauth.authorize_as

    @authorize_as.setter
    def authorize_as(self, user_id: str | None) -> None:
        self.oauth.authorize_as = user_id


class FakeChat(_OAuthFakePlatform):
    """Discord-like OAuth2 (`oauth_base`) and API (`api_base`); `authorize_as` picks who consents."""

    def __init__(self, client_id: str = "chat-client", client_secret: str = "chat-secret") -> None:
        self.oauth = _OAuthProvider(client_id, client_secret, lifetime=7 * 24 * 3600)
        self.users: dict[str, DiscordUser] = {}
        super().__init__()

    def routes(self) -> Iterable[tuple[str, str, Handler, list[str], bool]]:
        return [
            ("/api/oauth2/authorize", "oauth2.authorize", self.oauth.authorize, ["GET"], False),
            ("/api/oauth2/token", "oauth2.token", self._token, ["POST"], False),
            ("/api/v10/users/@me", "users/@me", self._me, ["GET"], True),
            ("/api/v10/users/@me/guilds", "users/@me/guilds", self._guilds, ["GET"], True),
        ]

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def oauth_base(self) -> str:
        return f"{self.base_url}/api/oauth2"

    def add_user(self, user_id: str, *, guild_count: int = 3, verified: bool | None = True) -> DiscordUser:
        guilds = [
            {
                "id": str(800000000000000000 + index),
                "name": f"Guild {index}",
                "icon": None,
                "owner": index % 5 == 0,
                "permissions": "2147483647",
                "features": [],
            }
            for index in range(guild_count)
        ]
        user = DiscordUser(
            user_id,
            f"chatter{user_id[-4:]}",
            email=f"{user_id}@chat.example" if verified is not None else None,
            verified=verified,
            guilds=guilds,
        )
        self.users[user_id] = user
        return user

    def expire_tokens(self, user_id: str) -> None:
        self.oauth.expire_tokens(user_id)

    def issue_tokens(self, user_id: str) -> dict[str, Any]:
        """A token set as if `user_id` had linked (tests that skip the browser flow)."""
        return self.oauth.issue_for_test(user_id, "identify email guilds")

    def rate_limited_response(self, retry_after: float | None) -> Response:
        delay = 1.0 if retry_after is None else retry_after
        return json_response(
            {"message": "You are being rate limited.", "retry_after": round(delay, 3), "global": False},
            status=429,
            headers={
                "Retry-After": str(max(1, round(delay))),
                "X-RateLimit-Limit": "5",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset-After": f"{delay:.3f}",
                "X-RateLimit-Bucket": "fakebucket",
                "X-RateLimit-Scope": "user",
            },
        )

    def _token(self, request: Request) -> Response:
        if request.mimetype != "application/x-www-form-urlencoded":
            return json_response({"error": "invalid_request", "error_description": "form body required"}, 400)
        form = request.form
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        if request.authorization is not None:
            client_id, client_secret = request.authorization.username, request.authorization.password
        if client_id != self.oauth.client_id or client_secret != self.oauth.client_secret:
            return json_response({"error": "invalid_client"}, 401)
        status, body = self.oauth.token(form)
        return json_response(body, status)

    def _authorized_user(self, request: Request) -> DiscordUser | Response:
        user_id = self.oauth.user_of(request)
        if user_id is None or user_id not in self.users:
            return json_response({"message": "401: Unauthorized", "code": 0}, 401)
        return self.users[user_id]

    def _bucket_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "4",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Reset-After": "1.000",
            "X-RateLimit-Bucket": "fakebucket",
        }

    def _me(self, request: Request) -> Response:
        user = self._authorized_user(request)
        if isinstance(user, Response):
            return user
        body: dict[str, Any] = {
            "id": user.id,
            "username": user.username,
            "discriminator": "0",
            "global_name": user.username.title(),
            "avatar": None,
            "mfa_enabled": False,
        }
        if user.verified is not None:
            body.update({"email": user.email, "verified": user.verified})
        return json_response(body, headers=self._bucket_headers())

    def _guilds(self, request: Request) -> Response:
        user = self._authorized_user(request)
        if isinstance(user, Response):
            return user
        limit = min(200, max(1, int(request.args.get("limit", "200"))))
        after = request.args.get("after")
        guilds = sorted(user.guilds, key=lambda guild: int(guild["id"]))
        if after is not None:
            guilds = [guild for guild in guilds if int(guild["id"]) > int(after)]
        return json_response(guilds[:limit], headers=self._bucket_headers())


# ================================================================================================
# Platform C: streaming (Twitch OAuth2 + Helix)
# ================================================================================================


@dataclass
class TwitchUser:
    id: str
    login: str
    follower_count: int = 0
    followed: list[dict[str, str]] = field(default_factory=list)
    created_at: str = "2016-12-14T20:32:28Z"


class FakeStreaming(_OAuthFakePlatform):
    """Twitch-like OAuth2 (`oauth_base`) and Helix (`api_base`); `authorize_as` picks who consents."""

    points_per_minute = 800

    def __init__(self, client_id: str = "stream-client", client_secret: str = "stream-secret") -> None:
        self.oauth = _OAuthProvider(client_id, client_secret, lifetime=4 * 3600)
        self.users: dict[str, TwitchUser] = {}
        super().__init__()

    def routes(self) -> Iterable[tuple[str, str, Handler, list[str], bool]]:
        return [
            ("/oauth2/authorize", "oauth2.authorize", self.oauth.authorize, ["GET"], False),
            ("/oauth2/token", "oauth2.token", self._token, ["POST"], False),
            ("/helix/users", "users", self._users, ["GET"], True),
            ("/helix/channels/followed", "channels/followed", self._followed, ["GET"], True),
            ("/helix/channels/followers", "channels/followers", self._followers, ["GET"], True),
        ]

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/helix"

    @property
    def oauth_base(self) -> str:
        return f"{self.base_url}/oauth2"

    def add_user(self, user_id: str, *, followed_count: int = 3, follower_count: int = 42) -> TwitchUser:
        followed = [
            {
                "broadcaster_id": str(5000 + index),
                "broadcaster_login": f"caster{index}",
                "broadcaster_name": f"Caster{index}",
                "followed_at": f"2024-01-{1 + index % 28:02d}T10:00:00Z",
            }
            for index in range(followed_count)
        ]
        user = TwitchUser(user_id, f"streamer{user_id}", follower_count=follower_count, followed=followed)
        self.users[user_id] = user
        return user

    def expire_tokens(self, user_id: str) -> None:
        self.oauth.expire_tokens(user_id)

    def issue_tokens(self, user_id: str) -> dict[str, Any]:
        """A token set as if `user_id` had linked (tests that skip the browser flow)."""
        return self.oauth.issue_for_test(user_id, "user:read:follows")

    def rate_limited_response(self, retry_after: float | None) -> Response:
        reset = int(time.time() + (1.0 if retry_after is None else retry_after)) + 1
        return json_response(
            {"error": "Too Many Requests", "status": 429, "message": "Too Many Requests"},
            status=429,
            headers={
                "Ratelimit-Limit": str(self.points_per_minute),
                "Ratelimit-Remaining": "0",
                "Ratelimit-Reset": str(reset),
            },
        )

    def _token(self, request: Request) -> Response:
        form = request.form
        if not form.get("client_id") or not form.get("client_secret"):
            return json_response({"status": 400, "message": "missing client secret"}, 400)
        if form["client_id"] != self.oauth.client_id or form["client_secret"] != self.oauth.client_secret:
            return json_response({"status": 403, "message": "invalid client secret"}, 403)
        status, body = self.oauth.token(form)
        if status != 200:
            # Twitch answers refused grants without an OAuth `error` member.
            return json_response({"status": 400, "message": body.get("error_description", "Invalid request")}, 400)
        body["scope"] = body["scope"].split()
        body["token_type"] = "bearer"
        return json_response(body)

    def _unauthorized(self, message: str) -> Response:
        return json_response({"error": "Unauthorized", "status": 401, "message": message}, 401)

    def _authorized_user(self, request: Request) -> TwitchUser | Response:
        if request.headers.get("Client-Id") != self.oauth.client_id:
            return self._unauthorized("Client ID and OAuth token do not match")
        user_id = self.oauth.user_of(request)
        if user_id is None or user_id not in self.users:
            return self._unauthorized("Invalid OAuth token")
        return self.users[user_id]

    def _helix_headers(self) -> dict[str, str]:
        return {
            "Ratelimit-Limit": str(self.points_per_minute),
            "Ratelimit-Remaining": "799",
            "Ratelimit-Reset": str(int(time.time()) + 60),
        }

    def _users(self, request: Request) -> Response:
        user = self._authorized_user(request)
        if isinstance(user, Response):
            return user
        wanted = request.args.getlist("id") or [user.id]
        data = [
            {
                "id": found.id,
                "login": found.login,
                "display_name": found.login.title(),
                "type": "",
                "broadcaster_type": "",
                "description": "",
                "profile_image_url": "",
                "offline_image_url": "",
                "view_count": 0,
                "created_at": found.created_at,
            }
            for found in (self.users.get(user_id) for user_id in wanted)
            if found is not None
        ]
        return json_response({"data": data}, headers=self._helix_headers())

    def _followed(self, request: Request) -> Response:
        user = self._authorized_user(request)
        if isinstance(user, Response):
            return user
        if request.args.get("user_id") != user.id:
            return self._unauthorized("The ID in user_id must match the user ID found in the request's OAuth token.")
        first = min(100, max(1, int(request.args.get("first", "20"))))
        offset = _decode_cursor(request.args.get("after"))
        page = user.followed[offset : offset + first]
        pagination = {"cursor": _encode_cursor(offset + first)} if offset + first < len(user.followed) else {}
        return json_response(
            {"total": len(user.followed), "data": page, "pagination": pagination}, headers=self._helix_headers()
        )

    def _followers(self, request: Request) -> Response:
        user = self._authorized_user(request)
        if isinstance(user, Response):
            return user
        target = self.users.get(request.args.get("broadcaster_id", ""))
        if target is None:
            return json_response({"error": "Bad Request", "status": 400, "message": "invalid broadcaster_id"}, 400)
        # Without moderator:read:followers the data stays empty, the total is still given.
        return json_response(
            {"total": target.follower_count, "data": [], "pagination": {}}, headers=self._helix_headers()
        )


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    return int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"])


@dataclass
class Platforms:
    """The three fake platforms a test shares."""

    game_store: FakeGameStore
    chat: FakeChat
    streaming: FakeStreaming

    def all(self) -> tuple[FakeGameStore, FakeChat, FakeStreaming]:
        return self.game_store, self.chat, self.streaming
