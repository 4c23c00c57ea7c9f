"""did:web resolution over HTTPS through the outbound fetch policy (`app.outbound`).

Private hosts may be fetched only when `host:port` is on the policy's explicit
`allowed_private_hosts` list (tests). Every failure raises `DidResolutionFailed("did_resolution_failed")`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

import app.json_text as json_text
import app.outbound as outbound
from app.dids.errors import DidResolutionFailed
from app.outbound import OutboundPolicy, no_preparation

_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


@dataclass(frozen=True)
class DidWebLocation:
    """Where a did:web document lives: `host` (lower case), `port`, `path` (absolute)."""

    host: str
    port: int
    path: str

    @property
    def url(self) -> str:
        port = "" if self.port == 443 else f":{self.port}"
        return f"https://{self.host}{port}{self.path}"


def did_web_location(did: str) -> DidWebLocation:
    """The HTTPS location of a did:web document; raises `did_resolution_failed` if malformed."""
    prefix = "did:web:"
    if not did.startswith(prefix) or len(did) > 2048:
        raise DidResolutionFailed("did_resolution_failed", f"{did[:100]!r} is not a did:web")
    segments = did[len(prefix) :].split(":")
    authority = unquote(segments[0]).lower()
    host, _, port_text = authority.partition(":")
    if not host or not set(host) <= _HOST_CHARS or host.startswith(("-", ".")) or ".." in host:
        raise DidResolutionFailed("did_resolution_failed", f"did:web host {host[:100]!r} is not a domain name")
    try:
        port = int(port_text) if port_text else 443
    except ValueError:
        raise DidResolutionFailed("did_resolution_failed", "did:web port is not a number") from None
    if not 0 < port < 65536:
        raise DidResolutionFailed("did_resolution_failed", "did:web port is out of range")
    path_segments = [unquote(segment) for segment in segments[1:]]
    if any(not segment or "/" in segment or segment in (".", "..") for segment in path_segments):
        raise DidResolutionFailed("did_resolution_failed", "did:web path segment is invalid")
    path = "/" + "/".join(path_segments) + "/did.json" if path_segments else "/.well-known/did.json"
    return DidWebLocation(host=host, port=port, path=path)


@dataclass
class DidWebResolver:
    """Fetches did:web documents under `policy`; see the module docstring for the guard.

    The default policy allows no private host and verifies TLS: 3 s to connect, 5 s to read,
    10 s in all, at most 256 KiB.
    """

    policy: OutboundPolicy = field(default_factory=OutboundPolicy)
    # Called before each fetch: the application ends the read transaction its caller may hold.
    before_fetch: Callable[[], None] = no_preparation

    def __call__(self, did: str) -> dict:
        """The DID document of `did` (a did:web); raises `DidResolutionFailed`."""
        location = did_web_location(did)
        body = self._fetch(location)
        try:
            document = json_text.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise DidResolutionFailed("did_resolution_failed", "did:web document is not JSON") from None
        if not isinstance(document, dict) or document.get("id") != did:
            raise DidResolutionFailed("did_resolution_failed", "did:web document id does not match the DID")
        return document

    def _fetch(self, location: DidWebLocation) -> bytes:
        headers = {"Accept": "application/did+json, application/json"}
        self.before_fetch()
        try:
            response = outbound.fetch(
                self.policy,
                "GET",
                "https",
                location.host,
                location.port,
                location.path,
                headers=headers,
                require_status=200,
            )
        except outbound.UnusableHost:
            # One answer for "unknown" and "internal", never the addresses: details reach the caller,
            # who must learn nothing about the internal network from them.
            raise DidResolutionFailed(
                "did_resolution_failed", outbound.unusable_host_detail("did:web", location.host)
            ) from None
        except outbound.UnexpectedStatus as error:
            raise DidResolutionFailed("did_resolution_failed", f"{location.url} answered HTTP {error.status}") from None
        except outbound.TooLarge:
            raise DidResolutionFailed(
                "did_resolution_failed", f"{location.url} is larger than {self.policy.max_bytes} bytes"
            ) from None
        except outbound.TooSlow:
            raise DidResolutionFailed("did_resolution_failed", f"{location.url} took too long") from None
        except outbound.ConnectFailed as error:
            raise DidResolutionFailed(
                "did_resolution_failed",
                f"cannot connect to {location.url} ({outbound.connection_reason(error.error)})",
            ) from None
        except outbound.TransferFailed as error:
            raise DidResolutionFailed(
                "did_resolution_failed", f"fetching {location.url} failed ({type(error.error).__name__})"
            ) from None
        return response.content
