"""did:web resolution over HTTPS with time and size limits and an SSRF guard.

The host is resolved first and every address is checked: private, loopback, link-local,
multicast, reserved and unspecified addresses are refused before any connection is made, unless
`host:port` is on the explicit `allowed_private_hosts` list (tests). The request then goes to the
checked address itself (TLS still verifies the certificate for the DID's host name), so a second
DNS answer cannot redirect it. Redirects are not followed and proxies from the environment are
ignored. Every failure raises `ProofCheckFailed("did_resolution_failed")`.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

import httpx

from app.credentials.cryptosuites.base import ProofCheckFailed

AddressResolver = Callable[[str, int], list[str]]
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


def system_addresses(host: str, port: int) -> list[str]:
    """The IP addresses of `host` from the system resolver (IPv4 first)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    return sorted(addresses, key=lambda address: ":" in address)


def is_public_address(address: str) -> bool:
    """True for a globally routable unicast address; False for anything an SSRF could abuse."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None and not is_public_address(str(embedded)):
            return False
    return ip.is_global and not (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified
    )


def _reason(error: BaseException | None) -> str:
    """Why a connection failed, without the addresses or OS messages its text may hold."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, ssl.SSLCertVerificationError):
            return "the TLS certificate does not verify"
        if isinstance(error, ssl.SSLError):
            return "the TLS handshake failed"
        error, seen = error.__cause__ or error.__context__, seen + 1
    return "connection failed"


def unusable_host_detail(what: str, host: str) -> str:
    """The failure detail for a host that does not resolve or resolves to a non-public address."""
    return f"{what} host {host[:100]} is unknown or has a non-public address; refused"


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
        raise ProofCheckFailed("did_resolution_failed", f"{did[:100]!r} is not a did:web")
    segments = did[len(prefix) :].split(":")
    authority = unquote(segments[0]).lower()
    host, _, port_text = authority.partition(":")
    if not host or not set(host) <= _HOST_CHARS or host.startswith(("-", ".")) or ".." in host:
        raise ProofCheckFailed("did_resolution_failed", f"did:web host {host[:100]!r} is not a domain name")
    try:
        port = int(port_text) if port_text else 443
    except ValueError:
        raise ProofCheckFailed("did_resolution_failed", "did:web port is not a number") from None
    if not 0 < port < 65536:
        raise ProofCheckFailed("did_resolution_failed", "did:web port is out of range")
    path_segments = [unquote(segment) for segment in segments[1:]]
    if any(not segment or "/" in segment or segment in (".", "..") for segment in path_segments):
        raise ProofCheckFailed("did_resolution_failed", "did:web path segment is invalid")
    path = "/" + "/".join(path_segments) + "/did.json" if path_segments else "/.well-known/did.json"
    return DidWebLocation(host=host, port=port, path=path)


@dataclass
class DidWebResolver:
    """Fetches did:web documents; see the module docstring for the guard.

    `allowed_private_hosts`: `"host:port"` entries that may resolve to non-public addresses.
    `verify`: TLS verification for httpx (True, a CA bundle path, or an `ssl.SSLContext`).
    """

    connect_timeout: float = 3.0
    read_timeout: float = 5.0
    total_timeout: float = 10.0
    max_bytes: int = 256 * 1024
    allowed_private_hosts: frozenset[str] = field(default_factory=frozenset)
    verify: ssl.SSLContext | str | bool = True
    resolve_addresses: AddressResolver = system_addresses

    def __call__(self, did: str) -> dict:
        """The DID document of `did` (a did:web); raises `ProofCheckFailed`."""
        location = did_web_location(did)
        addresses = self._checked_addresses(location)
        body = self._fetch(location, addresses)
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise ProofCheckFailed("did_resolution_failed", "did:web document is not JSON") from None
        if not isinstance(document, dict) or document.get("id") != did:
            raise ProofCheckFailed("did_resolution_failed", "did:web document id does not match the DID")
        return document

    def _checked_addresses(self, location: DidWebLocation) -> list[str]:
        # One answer for "unknown" and "internal", never the addresses: details reach the caller,
        # who must learn nothing about the internal network from them.
        unusable = ProofCheckFailed("did_resolution_failed", unusable_host_detail("did:web", location.host))
        try:
            addresses = self.resolve_addresses(location.host, location.port)
        except (OSError, UnicodeError):
            raise unusable from None
        if not addresses:
            raise unusable
        allowed = f"{location.host}:{location.port}" in self.allowed_private_hosts
        if not allowed and any(not is_public_address(address) for address in addresses):
            raise unusable
        return addresses

    def _fetch(self, location: DidWebLocation, addresses: list[str]) -> bytes:
        timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
        host_header = location.host if location.port == 443 else f"{location.host}:{location.port}"
        headers = {"Host": host_header, "Accept": "application/did+json, application/json"}
        last_error: Exception | None = None
        verify = ssl.create_default_context(cafile=self.verify) if isinstance(self.verify, str) else self.verify
        with httpx.Client(timeout=timeout, verify=verify, follow_redirects=False, trust_env=False) as client:
            for address in addresses:
                literal = f"[{address}]" if ":" in address else address
                pinned_url = f"https://{literal}:{location.port}{location.path}"
                try:
                    return self._read(client, pinned_url, headers, location)
                except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                    last_error = error
                except httpx.HTTPError as error:
                    raise ProofCheckFailed(
                        "did_resolution_failed", f"fetching {location.url} failed ({type(error).__name__})"
                    ) from None
        raise ProofCheckFailed("did_resolution_failed", f"cannot connect to {location.url} ({_reason(last_error)})")

    def _read(self, client: httpx.Client, url: str, headers: dict, location: DidWebLocation) -> bytes:
        with client.stream("GET", url, headers=headers, extensions={"sni_hostname": location.host}) as response:
            if response.status_code != 200:
                raise ProofCheckFailed("did_resolution_failed", f"{location.url} answered HTTP {response.status_code}")
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > self.max_bytes:
                raise ProofCheckFailed("did_resolution_failed", f"{location.url} is larger than {self.max_bytes} bytes")
            body = bytearray()
            deadline = time.monotonic() + self.total_timeout
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if time.monotonic() > deadline:
                    raise ProofCheckFailed("did_resolution_failed", f"{location.url} took too long")
                if len(body) > self.max_bytes:
                    raise ProofCheckFailed(
                        "did_resolution_failed", f"{location.url} is larger than {self.max_bytes} bytes"
                    )
            return bytes(body)
