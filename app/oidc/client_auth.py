"""Client authentication at the token, PAR, revocation and introspection endpoints.

Methods: `client_secret_basic`, `client_secret_post`, and the RFC 7523 assertions
`client_secret_jwt` (HS256 with the client secret) and `private_key_jwt` (a key of the client's
`jwks` or `jwks_uri`). The keys of a `jwks_uri` are fetched through the outbound guard by
`fetch_assertion_keys`, before the endpoint's unit of work begins (never inside a transaction),
and cached; authentication reads them from that cache only. A fetch that fails answers the caller a
generic `invalid_client` (the log says why): what the remote answered is not echoed. A client with a
`token_endpoint_auth_method` must use exactly that method; one without it may use either secret
method (as before the setting existed). An assertion's `jti` is accepted once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import current_app
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, OctKey
from sqlalchemy import and_, func

from app.cache import Cache
from app.db import end_reads
from app.oidc import outbound, replay
from app.oidc.errors import InvalidClient, InvalidRequest
from app.oidc.settings import OidcSettings
from app.oidc.tokens import b64_json
from app.security import decrypt
from app.settings import current
from app.tenancy.models import Client
from app.tenancy.service import (
    CLIENT_SECRET_PURPOSE,
    client_secret_clause,
    get_active_client,
    verify_client_secret,
)

log = logging.getLogger(__name__)

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
METHODS = (*SECRET_METHODS, "client_secret_jwt", "private_key_jwt")
KEY_ALGORITHMS = ("RS256", "PS256", "ES256")
# An assertion must be short-lived: its jti is remembered only until it expires.
MAX_ASSERTION_LIFETIME = 600
_JWKS_CACHE_SECONDS = 300.0
_JWKS_CACHE_SIZE = 1024
# Also how long a failed fetch is remembered, so requests naming a broken jwks_uri answer at once.
_JWKS_MISS_REFETCH_SECONDS = 10.0
KEYS_UNAVAILABLE = "The client's keys could not be obtained from its jwks_uri."


@dataclass(frozen=True)
class PresentedCredentials:
    """What a request offered to authenticate its client, not yet checked."""

    method: str
    client_id: str | None
    secret: str | None = None
    assertion: str | None = None


def parse_client_id(client_id: str | None) -> int | None:
    """The numeric id an OpenID `client_id` (decimal) names, else None."""
    value = (client_id or "").strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18 or int(value) <= 0:
        return None
    return int(value)


def get_client_by_id(client_id: str | None, loaded: Client | None = None) -> Client | None:
    """The enabled client whose OpenID `client_id` (decimal id) is given, else None.

    `loaded` is that client when the caller already read it, enabled and with no disabled
    ancestor, in its own statement of this transaction: it is used instead of a new query.
    """
    value = parse_client_id(client_id)
    if value is None:
        return None
    if loaded is not None and loaded.id == value:
        return loaded
    return get_active_client(value)


def presented_credentials(values: dict[str, str], basic: tuple[str, str] | None) -> PresentedCredentials:
    """Which method the request uses; InvalidRequest when it mixes methods."""
    assertion_type, assertion = values.get("client_assertion_type"), values.get("client_assertion")
    if assertion_type or assertion:
        if basic is not None or values.get("client_secret"):
            raise InvalidRequest("Use one client authentication method, not several.")
        if assertion_type != ASSERTION_TYPE or not assertion:
            raise InvalidRequest(f"client_assertion_type must be {ASSERTION_TYPE} with a client_assertion.")
        return PresentedCredentials("assertion", values.get("client_id"), assertion=assertion)
    if basic is not None:
        if values.get("client_secret"):
            raise InvalidRequest("Use one client authentication method, not Basic and the body together.")
        if values.get("client_id") and values["client_id"] != basic[0]:
            raise InvalidRequest("client_id in the body differs from the authenticated client.")
        return PresentedCredentials("client_secret_basic", basic[0], secret=basic[1])
    return PresentedCredentials("client_secret_post", values.get("client_id"), secret=values.get("client_secret"))


@dataclass(frozen=True)
class ClientAuthenticator:
    """Proves a request's client when called; `claimed_id` is the id it names, before any proof."""

    credentials: PresentedCredentials
    audiences: frozenset[str]

    @property
    def claimed_id(self) -> int | None:
        return parse_client_id(self.credentials.client_id)

    def __call__(self, loaded: Client | None = None) -> Client:
        """The proven client (see `authenticate`); `loaded` as in `get_client_by_id`."""
        return authenticate(self.credentials, self.audiences, loaded)


def authenticate(credentials: PresentedCredentials, audiences: Set[str], loaded: Client | None = None) -> Client:
    """The client proven by `credentials`; InvalidClient (401) without saying which part was wrong.

    `audiences` are the values an assertion's `aud` may hold (the issuer, the endpoint's URL);
    `loaded` as in `get_client_by_id`. Flushes the assertion's jti when one is accepted.
    """
    if credentials.method == "assertion":
        return _authenticate_assertion(credentials, audiences, loaded)
    # `secret_authentication_clause` says the same in SQL.
    client = get_client_by_id(credentials.client_id, loaded)
    if client is None or not credentials.secret or not verify_client_secret(client, credentials.secret):
        raise InvalidClient()
    if client.token_endpoint_auth_method not in (None, credentials.method):
        raise InvalidClient(f"This client authenticates with {client.token_endpoint_auth_method}.")
    return client


def secret_authentication_clause(method: Any, hashes: Sequence[Any], now: Any) -> Any:
    """`authenticate` for a secret method (`SECRET_METHODS`) as a condition on the outer `Client`:
    the secret its own (current, or previous within its grace) and the client authenticating with
    `method` or with no method set. `method`, `hashes` (one per `secret_hash_candidates`) and `now`
    are bound parameters of the caller's statement, which also holds `enabled_client_clause()`."""
    return and_(client_secret_clause(hashes, now), func.coalesce(Client.token_endpoint_auth_method, method) == method)


def _unverified_claims(assertion: str) -> tuple[dict, dict]:
    """Header and claims before verification: they only say which client and key to check with."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise InvalidClient("client_assertion is not a signed JWT.")
    try:
        return b64_json(parts[0]), b64_json(parts[1])
    except (ValueError, UnicodeError, RecursionError):
        raise InvalidClient("client_assertion is malformed.") from None


def _authenticate_assertion(credentials: PresentedCredentials, audiences: Set[str], loaded: Client | None) -> Client:
    header, claims = _unverified_claims(credentials.assertion or "")
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or claims.get("sub") != issuer:
        raise InvalidClient("client_assertion must have iss and sub equal to the client_id.")
    if credentials.client_id and credentials.client_id != issuer:
        raise InvalidClient("client_id differs from the assertion's issuer.")
    alg = header.get("alg")
    if alg != "HS256" and alg not in KEY_ALGORITHMS:
        raise InvalidClient("The assertion's algorithm is not accepted.")
    method = "client_secret_jwt" if alg == "HS256" else "private_key_jwt"
    # Until the signature is checked the answer is the same whether or not the client exists, and
    # whatever method it authenticates with.
    client = get_client_by_id(issuer, loaded)
    if client is None or client.token_endpoint_auth_method != method:
        raise InvalidClient()
    if method == "client_secret_jwt":
        key: OctKey | KeySet = _secret_key(client)
        algorithms = ["HS256"]
    else:
        key, algorithms = _client_keys(client, header.get("kid")), [alg]
    try:
        verified = jwt.decode(credentials.assertion or "", key, algorithms=algorithms).claims
    except (JoseError, ValueError):
        raise InvalidClient() from None
    _check_assertion_claims(verified, audiences)
    _remember_jti(client, str(verified["jti"]), int(verified["exp"]))
    return client


def _secret_key(client: Client) -> OctKey:
    if not client.secret_encrypted:
        raise InvalidClient()  # a secret from before secrets were sealed: rotating it makes one
    return OctKey.import_key(decrypt(client.secret_encrypted, CLIENT_SECRET_PURPOSE))


def _check_assertion_claims(claims: dict, audiences: Set[str]) -> None:
    now = int(time.time())
    leeway = current(OidcSettings).clock_leeway
    exp, jti = claims.get("exp"), claims.get("jti")
    if not isinstance(exp, int) or isinstance(exp, bool) or exp <= now - leeway:
        raise InvalidClient("The client_assertion has expired or lacks exp.")
    if exp > now + MAX_ASSERTION_LIFETIME:
        raise InvalidClient(f"The client_assertion may live at most {MAX_ASSERTION_LIFETIME} seconds.")
    if not isinstance(jti, str) or not jti or len(jti) > 256:
        raise InvalidClient("The client_assertion lacks a jti.")
    nbf, iat = claims.get("nbf"), claims.get("iat")
    for value in (nbf, iat):
        if isinstance(value, int) and value > now + leeway:
            raise InvalidClient("The client_assertion is not valid yet.")
    audience = claims.get("aud")
    given = set(audience) if isinstance(audience, list) else {audience}
    if not given & audiences:
        raise InvalidClient("The client_assertion's audience is not this server.")


def _remember_jti(client: Client, jti: str, exp: int) -> None:
    """Record the assertion's jti; a second use, even a concurrent one, is refused."""
    if not replay.remember_once(f"assertion:{client.id}:{jti}", datetime.fromtimestamp(exp, UTC)):
        raise InvalidClient("This client_assertion was already used.")


class _JwksCache:
    """Documents (or a failure, `None`) per `jwks_uri` with when they were fetched (whether one is
    still good is `_needs_fetch`'s to say); one fetch per URL at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: Cache[tuple[float, dict | None]] = Cache("client_jwks", maxsize=_JWKS_CACHE_SIZE)
        self.fetching: dict[str, threading.Lock] = {}

    def get(self, url: str) -> tuple[float, dict | None] | None:
        return self.entries.get(url)

    def put(self, url: str, fetched_at: float, document: dict | None) -> None:
        self.entries.put(url, (fetched_at, document))

    def drop(self, url: str) -> None:
        self.entries.discard(url)

    def fetch_lock(self, url: str) -> threading.Lock:
        with self.lock:
            if len(self.fetching) >= _JWKS_CACHE_SIZE:  # locks of URLs no fetch holds are dropped
                self.fetching = {name: held for name, held in self.fetching.items() if held.locked()}
            return self.fetching.setdefault(url, threading.Lock())


def _jwks_cache() -> _JwksCache:
    return current_app.extensions.setdefault("oidc_client_jwks", _JwksCache())


def fetch_jwks(url: str) -> dict:
    """The JWK set at `url`; raises `OutboundRefused` with the reason, for the log only.

    A remote that answered something else may answer well later: that failure is `transient`.
    """
    response = outbound.request("GET", url)
    if response.status_code != 200:
        raise outbound.OutboundRefused(f"{url} answered HTTP {response.status_code}", transient=True)
    try:
        document = response.json()
    except ValueError:
        raise outbound.OutboundRefused(f"{url} is not JSON", transient=True) from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise outbound.OutboundRefused(f"{url} is not a JWK set", transient=True)
    return document


def _needs_fetch(cached: tuple[float, dict | None] | None, kid: object, now: float) -> bool:
    """Whether the cached entry cannot serve an assertion with `kid` (a new key is fetched at most every 10 s)."""
    if cached is None:
        return True
    fetched_at, document = cached
    age = now - fetched_at
    if age < _JWKS_MISS_REFETCH_SECONDS:
        return False
    if document is None or age >= _JWKS_CACHE_SECONDS:
        return True
    return kid is not None and not any(key.get("kid") == kid for key in document["keys"] if isinstance(key, dict))


def fetch_assertion_keys(credentials: PresentedCredentials) -> None:
    """Fetch the `jwks_uri` keys a `private_key_jwt` assertion names, unless cached; before the unit of work.

    Reads the client, then (when a fetch is due) ends that read transaction and fetches through the
    outbound guard, one request per URL at a time, within `OUTBOUND_DEADLINE`. Never raises for
    the request's sake: a failure is remembered and `authenticate` answers it as `invalid_client`.
    Must be called before the endpoint's first write.
    """
    if credentials.method != "assertion" or not credentials.assertion:
        return
    try:
        header, claims = _unverified_claims(credentials.assertion)
    except InvalidClient:
        return
    if header.get("alg") not in KEY_ALGORITHMS or not isinstance(claims.get("iss"), str):
        return
    client = get_client_by_id(claims["iss"])
    if client is not None and client.token_endpoint_auth_method == "private_key_jwt":
        fetch_client_keys(client, header.get("kid"))


def fetch_client_keys(client: Client, kid: object) -> None:
    """Fetch the keys of `client`'s `jwks_uri` unless it registers `jwks` or they are cached (a key
    named `kid` is looked for at most every 10 s); for `client_key_set` to read.

    Ends the reads first and fetches through the outbound guard, one request per URL at a time,
    within `OUTBOUND_DEADLINE`: must be called before the unit of work's first write. Never raises
    for the request's sake: a failure is remembered and `client_key_set` says the keys are unavailable.
    """
    url, client_id = client.jwks_uri, client.id
    if not url or client.jwks:
        return
    cache = _jwks_cache()
    if not _needs_fetch(cache.get(url), kid, time.monotonic()):
        return
    end_reads("the client's jwks_uri is fetched with no transaction open")
    with cache.fetch_lock(url):
        now = time.monotonic()
        if not _needs_fetch(cache.get(url), kid, now):  # fetched meanwhile by a concurrent request
            return
        try:
            cache.put(url, now, fetch_jwks(url))
        except outbound.OutboundRefused as error:
            log.warning("jwks_uri of client %s cannot be used: %s", client_id, error)
            # A failure of the remote is remembered for a while; a refusal of the URL itself is decided afresh.
            if error.transient:
                cache.put(url, now, None)
            else:
                cache.drop(url)


class KeysUnavailable(Exception):
    """The client registers no keys, or its `jwks_uri` keys were not obtained, or they cannot be read."""


def _jwks_document(url: str) -> dict:
    """The cached JWK set of `url` (`fetch_client_keys` fetched it); `KeysUnavailable` without one."""
    cached = _jwks_cache().get(url)
    if cached is None or cached[1] is None:
        raise KeysUnavailable(KEYS_UNAVAILABLE)
    return cached[1]


def client_key_set(client: Client, kid: object) -> KeySet:
    """The public keys of `client` (only the one named `kid` when given) from its `jwks`, or from its
    `jwks_uri` as `fetch_client_keys` cached them; `KeysUnavailable` with the reason otherwise."""
    if client.jwks:
        document = client.jwks
    elif client.jwks_uri:
        document = _jwks_document(client.jwks_uri)
    else:
        raise KeysUnavailable(InvalidClient().description)
    public = [key for key in document.get("keys", []) if isinstance(key, dict) and "d" not in key]
    if kid is not None:
        public = [key for key in public if key.get("kid") == kid]
    try:
        return KeySet.import_key_set({"keys": public})
    except (JoseError, ValueError, TypeError, KeyError):
        raise KeysUnavailable("The client's keys cannot be read.") from None


def _client_keys(client: Client, kid: object) -> KeySet:
    try:
        return client_key_set(client, kid)
    except KeysUnavailable as error:
        raise InvalidClient(str(error)) from None
