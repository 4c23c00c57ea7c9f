"""The authorization-code exchange answered before Flask dispatches: the hot path of every login.

`POST /v1/openidc/token` with a form body, `grant_type=authorization_code` and a client secret
(Basic or in the body) is counted against the token endpoint's rate limit (the same bucket as the
view's), redeemed by `service.exchange_code_at_once` (one autocommitted statement on PostgreSQL,
on the engine of statements run before dispatch)
or else by `service.exchange_code` in one unit of work, and answered here. Only plain
successful exchanges are answered here: any other request, any refusal (the unit of work is rolled
back first, so nothing it did remains), a limit reached or a fault goes on to the Flask view,
which remains the one definition of those answers and of every other grant. A request counted
here is marked so the view's limit does not count it twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote_plus

from flask import Flask
from limits import parse as parse_limit
from werkzeug.datastructures import Authorization

from app.db import transaction
from app.oidc import client_auth, service
from app.oidc.errors import OAuthError
from app.oidc.settings import OidcSettings
from app.oidc.text import has_unstorable
from app.ops.edge import BeforeDispatch, edge_engine, request_body, request_id_of
from app.ops.rate_leases import RateLeases
from app.settings import current

TOKEN_RULE = "/v1/openidc/token"
TOKEN_ENDPOINT = "oidc.token"
# Set on a request whose token-endpoint limit was already counted before dispatch.
COUNTED = "tessera.token_limit_counted"
FORM = "application/x-www-form-urlencoded"
_MAX_BODY = 16 * 1024  # far above any exchange; larger bodies take the view's path and its limits


def token_rate_bucket(issuer: str, address: str | None, client: str) -> str:
    """Rate-limit bucket of the named client *from this network address* (per issuer, so
    deployments may share one Redis).

    The client is named before it authenticates, so a bucket per client alone would let anyone
    exhaust a victim client's budget with junk requests; keyed by address too, they only
    exhaust their own.
    """
    return f"oidc-client:{issuer}:{address or 'unknown'}:{client[:32]}"


class CodeExchangeBeforeDispatch(BeforeDispatch):
    """Successful code exchanges by client secret before dispatch; everything else to the application."""

    def __init__(self, app: Flask, inner: Callable) -> None:
        super().__init__(app, inner)
        self._limits: dict[str, object] = {}
        self._leases = RateLeases()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != TOKEN_RULE or environ.get("REQUEST_METHOD") != "POST":
            return self.inner(environ, start_response)
        started = time.perf_counter()
        body = request_body(environ, FORM, _MAX_BODY)
        if body is None:
            return self.inner(environ, start_response)
        exchange = _plain_exchange(environ, body)
        if exchange is None or not self._count(environ, exchange):
            return self.inner(environ, start_response)
        request_id = request_id_of(environ)  # before the service runs, so its logs carry it
        redeem = {"code": exchange.values["code"], "redirect_uri": exchange.values["redirect_uri"],
                  "code_verifier": exchange.values.get("code_verifier")}  # fmt: skip
        try:
            with self.app.app_context():
                with edge_engine(self.app).connect() as connection:
                    answer = service.exchange_code_at_once(exchange.credentials, connection, **redeem)
                if answer is None:
                    with transaction():
                        authenticate = client_auth.ClientAuthenticator(exchange.credentials, frozenset())
                        answer = service.exchange_code(authenticate, **redeem)
        except Exception:  # refused or failed, and rolled back: the view answers (and reports) it
            return self.inner(environ, start_response)
        payload = (self.app.json.dumps(answer.as_dict()) + "\n").encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(payload)),
                   "Cache-Control": "no-store", "Pragma": "no-cache"}  # fmt: skip
        return self.respond(environ, start_response, rule=TOKEN_RULE, status=200, headers=headers, body=payload,
                            started=started, request_id=request_id)

    def _count(self, environ: dict, exchange: _Exchange) -> bool:
        """Count the request in the view's bucket (a few hits at a time, `RateLeases`); False (not
        counted) when the limit is reached or the limiter fails, so the view answers with its 429 or
        its fallback."""
        from app.extensions import limiter

        if not limiter.enabled:
            environ[COUNTED] = True
            return True
        settings = current(OidcSettings, self.app)
        limit = self._limits.get(settings.token_rate_limit)
        if limit is None:
            limit = self._limits[settings.token_rate_limit] = parse_limit(settings.token_rate_limit)
        bucket = token_rate_bucket(settings.issuer, environ.get("REMOTE_ADDR"), exchange.credentials.client_id or "")
        # The prefix the view's limiter keys with: Flask-Limiter keeps the first configured one.
        prefix = limiter._key_prefix
        try:
            allowed = self._leases.hit(limiter.limiter, limit, *([prefix] if prefix else []), bucket, TOKEN_ENDPOINT)
        except Exception:  # storage down: the view's limiter has the fallback
            return False
        if allowed:
            environ[COUNTED] = True
        return allowed


@dataclass(frozen=True, slots=True)
class _Exchange:
    values: dict[str, str]
    credentials: client_auth.PresentedCredentials


def _plain_exchange(environ: dict, body: bytes) -> _Exchange | None:
    """The parameters and client credentials of a well-formed code exchange by client secret, else None."""
    try:
        text = body.decode("ascii")
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        return None
    values = dict(pairs)
    if len(values) != len(pairs) or values.get("grant_type") != "authorization_code":
        return None
    if not values.get("code") or not values.get("redirect_uri"):
        return None
    if any(has_unstorable(value) for value in values.values()):
        return None
    basic = None
    header = environ.get("HTTP_AUTHORIZATION")
    if header:
        auth = Authorization.from_header(header)
        if auth is None or auth.type != "basic":
            return None
        basic = (unquote_plus(auth.username or ""), unquote_plus(auth.password or ""))
    try:
        credentials = client_auth.presented_credentials(values, basic)
    except OAuthError:  # mixed methods: the view says so
        return None
    if credentials.method not in client_auth.SECRET_METHODS:
        return None
    return _Exchange(values, credentials)
