"""OAuth 2.0 authorization-code client for platforms B and C, built on Authlib's httpx client.

`OAuthApp` makes the authorization URL, exchanges a code and refreshes a token; every answer is a
new `TokenSet` (platforms rotate refresh tokens: the caller must store the returned one, the old one
is dead). `call_with_refresh` runs an API call with the "refresh on expiry or on one 401" rule.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from authlib.deprecate import AuthlibDeprecationWarning

# Authlib >= 1.9 warns at import that it fell back to httpx because httpx2 is not installed. The
# connectors are built on httpx on purpose (one transport, timeout and error mapping for every
# platform), so the fallback is what we want: exactly that message is silenced, only for this import.
with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", message="The httpx module is deprecated; please use httpx2", category=AuthlibDeprecationWarning
    )
    from authlib.integrations.httpx_client import OAuth2Client, OAuthError

from app.outbound import refuse_inside_transaction
from app.social.connectors.answers import member
from app.social.connectors.errors import (
    LinkBroken,
    MalformedAnswer,
    PlatformMisconfigured,
    PlatformUnavailable,
    TokenExpired,
)
from app.social.connectors.http import (
    DEFAULT_TIMEOUT,
    RetryAfterReader,
    platform_transport,
    raise_for_platform_status,
    retry_after_header,
)

T = TypeVar("T")

# Refresh a little before the platform would refuse the token, so a call does not race expiry.
EXPIRY_LEEWAY_SECONDS = 60.0


@dataclass(frozen=True)
class TokenSet:
    """The tokens of one link; `expires_at` is epoch seconds (None when the platform did not say)."""

    access_token: str
    refresh_token: str | None
    expires_at: float | None
    scope: str

    @classmethod
    def from_token_response(cls, token: Mapping[str, Any], *, now: float | None = None) -> TokenSet:
        """Build from a token endpoint answer (`scope` may be a string or, on platform C, a list)."""
        scope = token.get("scope") or ""
        if isinstance(scope, list | tuple):
            scope = " ".join(str(item) for item in scope)
        expires_at = token.get("expires_at")
        if expires_at is None and token.get("expires_in") is not None:
            expires_at = (now if now is not None else time.time()) + float(token["expires_in"])
        return cls(
            access_token=str(token["access_token"]),
            refresh_token=token.get("refresh_token"),
            expires_at=float(expires_at) if expires_at is not None else None,
            scope=str(scope),
        )

    def is_expired(self, *, now: float | None = None, leeway: float = EXPIRY_LEEWAY_SECONDS) -> bool:
        """True when the access token is expired or about to expire."""
        if self.expires_at is None:
            return False
        return (now if now is not None else time.time()) >= self.expires_at - leeway


class OAuthApp:
    """The service registered as an OAuth client at one platform (client id/secret, endpoints).

    Client credentials go in the form body (`client_secret_post`), which both platforms accept and
    platform C requires. Failures raise: `LinkBroken` (grant refused: invalid/used code, revoked or
    rotated-away refresh token), `PlatformMisconfigured` (our client id/secret refused:
    `invalid_client`), `RateLimited`, `PlatformUnavailable`. `read_retry_after` reads the
    platform's delay hint from a 429 of its token endpoint.
    """

    def __init__(
        self,
        *,
        platform: str,
        authorize_url: str,
        token_url: str,
        client_id: str,
        client_secret: str,
        scope: str,
        read_retry_after: RetryAfterReader = retry_after_header,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.platform = platform
        self._read_retry_after = read_retry_after
        self.authorize_url = authorize_url
        self.token_url = token_url
        self.client_id = client_id
        self.scope = scope
        self._client_secret = client_secret
        self._timeout = timeout
        self._transport = transport

    def authorization_url(self, *, redirect_uri: str, state: str, **extra: str) -> str:
        """The URL to send the user to; `state` must be checked on the callback by the caller."""
        with self._client(redirect_uri=redirect_uri) as client:
            url, _ = client.create_authorization_url(self.authorize_url, state=state, scope=self.scope, **extra)
        return url

    def exchange_code(self, *, code: str, redirect_uri: str) -> TokenSet:
        """Exchange an authorization code (single use) for the link's first tokens."""
        with self._client(redirect_uri=redirect_uri) as client:
            token = self._call(
                lambda: client.fetch_token(
                    self.token_url, grant_type="authorization_code", code=code, redirect_uri=redirect_uri
                )
            )
        return TokenSet.from_token_response(token)

    def refresh(self, refresh_token: str | None) -> TokenSet:
        """Trade `refresh_token` for new tokens; the answer's refresh token replaces the old one."""
        if not refresh_token:
            raise LinkBroken(f"{self.platform}: no refresh token stored")
        with self._client() as client:
            token = self._call(lambda: client.refresh_token(self.token_url, refresh_token=refresh_token))
        return TokenSet.from_token_response(token)

    def _client(self, *, redirect_uri: str | None = None) -> OAuth2Client:
        client = OAuth2Client(
            client_id=self.client_id,
            client_secret=self._client_secret,
            token_endpoint_auth_method="client_secret_post",
            redirect_uri=redirect_uri,
            timeout=self._timeout,
            transport=platform_transport(self._timeout, self._transport),
        )
        # Map the platform's own error answers (429 styles, HTML 5xx pages, bodies without an OAuth
        # `error` member) before Authlib tries to read them as a token.
        client.register_compliance_hook("access_token_response", self._check_token_response)
        client.register_compliance_hook("refresh_token_response", self._check_token_response)
        return client

    def _check_token_response(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            body = response.read()
            if _oauth_error(body) == "invalid_client":
                raise PlatformMisconfigured(f"{self.platform}: token endpoint refused the service's client credentials")
            raise_for_platform_status(self.platform, response, body, self._read_retry_after, unauthorized=LinkBroken)
        return response

    def _call(self, fetch: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
        refuse_inside_transaction(f"{self.platform} token endpoint call")
        try:
            token = fetch()
        except OAuthError as exc:
            if exc.error == "invalid_client":
                raise PlatformMisconfigured(
                    f"{self.platform}: token endpoint refused the service's client credentials"
                ) from exc
            raise LinkBroken(f"{self.platform}: token endpoint refused: {exc.error}") from exc
        except httpx.TimeoutException as exc:
            raise PlatformUnavailable(f"{self.platform}: token endpoint timed out") from exc
        except httpx.TransportError as exc:
            raise PlatformUnavailable(f"{self.platform}: token endpoint {type(exc).__name__}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedAnswer(f"{self.platform}: unreadable token answer ({type(exc).__name__})") from exc
        member(self.platform, token, "access_token", str, "token answer")
        member(self.platform, token, "refresh_token", str, "token answer", default=None)
        member(self.platform, token, "expires_in", (int, float), "token answer", default=None)
        member(self.platform, token, "expires_at", (int, float), "token answer", default=None)
        member(self.platform, token, "scope", (str, list), "token answer", default=None)
        return token


def oauth_app(
    *,
    platform: str,
    scope: str,
    read_retry_after: RetryAfterReader,
    client_id: str,
    client_secret: str,
    oauth_base: str,
    timeout: float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
) -> OAuthApp:
    """The service's OAuth client at a platform whose endpoints are `<oauth_base>/authorize` and `/token`.

    Each platform module binds its `platform`, `scope`, default `oauth_base` and 429 reader.
    """
    base = oauth_base.rstrip("/")
    return OAuthApp(
        platform=platform,
        authorize_url=f"{base}/authorize",
        token_url=f"{base}/token",
        client_id=client_id,
        client_secret=client_secret,
        scope=scope,
        read_retry_after=read_retry_after,
        timeout=timeout,
        transport=transport,
    )


def _oauth_error(body: bytes) -> str | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload.get("error") if isinstance(payload, dict) else None


def call_with_refresh(
    call: Callable[[str], T],
    tokens: TokenSet,
    oauth: OAuthApp,
    on_refreshed: Callable[[TokenSet], None],
    *,
    now: float | None = None,
) -> T:
    """Run `call(access_token)`, refreshing first when expired, or once after a 401.

    `on_refreshed` receives every new `TokenSet` immediately (persist it before anything else can
    fail: the old refresh token no longer works). A 401 right after a refresh raises `LinkBroken`.
    """
    refreshed = False
    if tokens.is_expired(now=now):
        tokens = oauth.refresh(tokens.refresh_token)
        on_refreshed(tokens)
        refreshed = True
    try:
        return call(tokens.access_token)
    except TokenExpired as exc:
        if refreshed:
            raise LinkBroken(f"{oauth.platform}: token refused right after a refresh") from exc
    tokens = oauth.refresh(tokens.refresh_token)
    on_refreshed(tokens)
    try:
        return call(tokens.access_token)
    except TokenExpired as exc:
        raise LinkBroken(f"{oauth.platform}: token refused right after a refresh") from exc
