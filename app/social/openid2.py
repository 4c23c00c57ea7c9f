"""OpenID 2.0 relying party for platform A (game store) account linking.

`build_checkid_setup_url` sends the user to the provider; `verify_id_res` checks the answer the
provider sent back through the user's browser: the claims we require, then the provider's own
verdict (`check_authentication`, direct POST). The caller must store the returned nonce and refuse
an assertion whose nonce was already used (replay); `verify_id_res` checks the nonce's freshness.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import httpx

from app.outbound import refuse_inside_transaction
from app.social.connectors.errors import PlatformUnavailable
from app.social.connectors.http import platform_transport

OPENID_NS = "http://specs.openid.net/auth/2.0"
IDENTIFIER_SELECT = "http://specs.openid.net/auth/2.0/identifier_select"
DEFAULT_OP_ENDPOINT = "https://steamcommunity.com/openid/login"
DEFAULT_CLAIMED_ID_PREFIX = "https://steamcommunity.com/openid/id/"
DEFAULT_NONCE_MAX_AGE = timedelta(minutes=5)

_REQUIRED_SIGNED = ("op_endpoint", "claimed_id", "identity", "return_to", "response_nonce", "assoc_handle")
_NONCE_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)")


class OpenIdVerificationFailed(Exception):
    """The provider's answer does not prove the account; `reason` says why (safe to show)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class OpenIdAssertion:
    """A verified positive assertion: the account id and the nonce to record against replay."""

    claimed_id: str
    account_id: str
    nonce: str
    issued_at: datetime


def build_checkid_setup_url(*, return_to: str, realm: str, op_endpoint: str = DEFAULT_OP_ENDPOINT) -> str:
    """The provider URL that asks the user to sign in and come back to `return_to`.

    `return_to` must lie under `realm` (scheme, host and path prefix), or the provider refuses.
    """
    params = {
        "openid.ns": OPENID_NS,
        "openid.mode": "checkid_setup",
        "openid.claimed_id": IDENTIFIER_SELECT,
        "openid.identity": IDENTIFIER_SELECT,
        "openid.return_to": return_to,
        "openid.realm": realm,
    }
    separator = "&" if "?" in op_endpoint else "?"
    return f"{op_endpoint}{separator}{urlencode(params)}"


def verify_id_res(
    params: Mapping[str, str],
    *,
    return_to: str,
    op_endpoint: str = DEFAULT_OP_ENDPOINT,
    claimed_id_prefix: str = DEFAULT_CLAIMED_ID_PREFIX,
    nonce_max_age: timedelta = DEFAULT_NONCE_MAX_AGE,
    now: datetime | None = None,
    timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> OpenIdAssertion:
    """Verify the provider's answer (the callback's query parameters) and return the assertion.

    `return_to` is the exact URL we sent in the request. Raises `OpenIdVerificationFailed` for a
    cancelled, malformed, stale or forged answer, `PlatformUnavailable` when the provider cannot be
    asked. The caller must still reject the returned `nonce` if it has seen it before.
    """
    openid = {key: value for key, value in params.items() if key.startswith("openid.")}
    mode = openid.get("openid.mode")
    if mode == "cancel":
        raise OpenIdVerificationFailed("the user cancelled the sign-in")
    if openid.get("openid.ns") != OPENID_NS or mode != "id_res":
        raise OpenIdVerificationFailed("not an OpenID 2.0 positive assertion")
    if openid.get("openid.op_endpoint") != op_endpoint:
        raise OpenIdVerificationFailed("assertion from an unexpected provider endpoint")
    if openid.get("openid.return_to") != return_to:
        raise OpenIdVerificationFailed("assertion for another return_to URL")
    signed = set((openid.get("openid.signed") or "").split(","))
    missing = [field for field in _REQUIRED_SIGNED if field not in signed or f"openid.{field}" not in openid]
    if missing or not openid.get("openid.sig"):
        raise OpenIdVerificationFailed(f"assertion does not sign {', '.join(missing) or 'anything'}")
    claimed_id = openid["openid.claimed_id"]
    if openid["openid.identity"] != claimed_id:
        raise OpenIdVerificationFailed("identity and claimed_id differ")
    match = re.fullmatch(re.escape(claimed_id_prefix) + r"(\d{17})", claimed_id)
    if match is None:
        raise OpenIdVerificationFailed("claimed_id is not an account of this provider")
    nonce = openid["openid.response_nonce"]
    issued_at = _nonce_time(nonce)
    current = now or datetime.now(UTC)
    if not current - nonce_max_age <= issued_at <= current + timedelta(minutes=1):
        raise OpenIdVerificationFailed("response_nonce is stale")
    if not _provider_confirms(openid, op_endpoint, timeout, transport):
        raise OpenIdVerificationFailed("the provider did not confirm the assertion")
    return OpenIdAssertion(claimed_id=claimed_id, account_id=match.group(1), nonce=nonce, issued_at=issued_at)


def _nonce_time(nonce: str) -> datetime:
    match = _NONCE_TIME.match(nonce)
    if match is None:
        raise OpenIdVerificationFailed("malformed response_nonce")
    try:
        return datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError as exc:
        raise OpenIdVerificationFailed("malformed response_nonce") from exc


def _provider_confirms(
    openid: Mapping[str, str], op_endpoint: str, timeout: float, transport: httpx.BaseTransport | None
) -> bool:
    # Always ask the configured endpoint, never the one named inside the (untrusted) message.
    form = {**openid, "openid.mode": "check_authentication"}
    refuse_inside_transaction("openid check_authentication")
    try:
        with httpx.Client(
            timeout=timeout, transport=platform_transport(timeout, transport), follow_redirects=False
        ) as client:
            response = client.post(op_endpoint, data=form)
    except httpx.HTTPError as exc:
        raise PlatformUnavailable(f"openid provider: {type(exc).__name__}") from exc
    if response.status_code >= 500 or response.status_code == 429:
        raise PlatformUnavailable(f"openid provider: HTTP {response.status_code}")
    if response.status_code != 200:
        return False
    fields = _key_value_form(response.text)
    return fields.get("ns") == OPENID_NS and fields.get("is_valid") == "true"


def _key_value_form(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields
