"""Outbound HTTP of the OpenID provider (client `jwks_uri`, back-channel logout).

Through the one outbound fetch policy (`app.outbound`) with `OIDC_OUTBOUND_ALLOW_HOSTS` as the hosts
that may be private; plain `http` is allowed only for those (loopback test servers). A call may take
`OUTBOUND_DEADLINE` seconds in all and never runs inside a database transaction (the guard raises
`CalledInsideTransaction`). Every failure raises `OutboundRefused`, whose message is for the log and
the job record, not for the caller of an endpoint: it may describe what the remote answered, and
whether a host resolves and to what kind of address (an oracle of the internal network). A caller
is told only `unfetched`'s words.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx

import app.outbound as outbound
from app.config import CoreSettings
from app.oidc.settings import OidcSettings
from app.outbound import OutboundPolicy, host_list
from app.settings import current

log = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024


class OutboundRefused(Exception):
    """The URL may not be fetched, or fetching it failed; `transient` when a retry may succeed."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def allowed_hosts() -> frozenset[str]:
    return host_list(current(OidcSettings).outbound_allow_hosts)


def _target(url: str) -> tuple[str, str, int, str]:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise OutboundRefused("The URL is malformed.") from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not host or parts.username or parts.password:
        raise OutboundRefused("The URL must be an https URL without credentials.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, host, port, path


def request(method: str, url: str, *, data: dict | None = None, configured: bool = False) -> httpx.Response:
    """Send one request through the guard; the response body is read (at most MAX_BYTES).

    `configured`: the URL is a setting of the deployment, not a client's, so its own host may be
    private (a local verifier). Must be called with no database transaction open.
    """
    scheme, host, port, path = _target(url)
    core = current(CoreSettings)
    policy = OutboundPolicy(
        allowed_private_hosts=allowed_hosts() | ({f"{host}:{port}"} if configured else set()),
        verify=core.outbound_ca_bundle or True,
        connect_timeout=min(3.0, core.outbound_deadline),
        read_timeout=core.outbound_deadline,
        total_timeout=core.outbound_deadline,
        max_bytes=MAX_BYTES,
    )
    if scheme == "http" and not policy.is_listed(host, port):
        raise OutboundRefused("Only https URLs may be fetched.")
    try:
        return outbound.fetch(
            policy, method, scheme, host, port, path, headers={"Accept": "application/json"}, data=data
        )
    except outbound.UnusableHost as error:
        if error.error is not None:
            raise OutboundRefused(f"Cannot resolve {host}: {error.error}", transient=True) from None
        if error.non_public:
            raise OutboundRefused(f"{host} resolves to a non-public address; refused.") from None
        raise OutboundRefused(f"{host} has no address.") from None
    except outbound.TooLarge:
        raise OutboundRefused(f"{url} answered more than {MAX_BYTES} bytes.") from None
    except outbound.TooSlow:
        raise OutboundRefused(f"{url} took longer than {policy.total_timeout:g} s.", transient=True) from None
    except outbound.ConnectFailed as error:
        raise OutboundRefused(f"Cannot connect to {url}: {error.error.__class__.__name__}", transient=True) from None
    except outbound.TransferFailed as error:
        raise OutboundRefused(f"{method} {url}: {error.error.__class__.__name__}", transient=True) from None


def unfetched(member: str, reason: object) -> str:
    """What the caller who gave the URL `member` (`jwks_uri`, ...) is told when its document could
    not be fetched or used: only that. The `reason` goes to the log, with the request id."""
    log.info("%s could not be fetched: %s", member, reason)
    return f"{member}: the document could not be fetched."
