"""Outbound HTTP of the OpenID provider (client `jwks_uri`, back-channel logout) behind the SSRF guard.

The same guard as did:web resolution (`app.credentials.dids.web`): the host is resolved first and
every address must be public unless `host:port` is on `OIDC_OUTBOUND_ALLOW_HOSTS`; the request then
goes to the checked address itself (TLS still verifies the name), redirects are not followed,
proxies from the environment are ignored, and time and size are bounded. Plain `http` is allowed
only for allow-listed hosts (loopback test servers). Every failure raises `OutboundRefused`.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import httpx
from flask import current_app

from app.credentials.dids.web import is_public_address, system_addresses

MAX_BYTES = 256 * 1024


class OutboundRefused(Exception):
    """The URL may not be fetched, or fetching it failed; `transient` when a retry may succeed."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def allowed_hosts() -> frozenset[str]:
    raw = current_app.config.get("OIDC_OUTBOUND_ALLOW_HOSTS", "")
    return frozenset(item.strip().lower() for item in raw.split(",") if item.strip())


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


def request(method: str, url: str, *, data: dict | None = None, timeout: float = 5.0) -> httpx.Response:
    """Send one request through the guard; the response body is read (at most MAX_BYTES)."""
    scheme, host, port, path = _target(url)
    listed = f"{host}:{port}" in allowed_hosts()
    if scheme == "http" and not listed:
        raise OutboundRefused("Only https URLs may be fetched.")
    try:
        addresses = system_addresses(host, port)
    except (OSError, UnicodeError) as error:
        raise OutboundRefused(f"Cannot resolve {host}: {error}", transient=True) from None
    if not addresses:
        raise OutboundRefused(f"{host} has no address.")
    if not listed and any(not is_public_address(address) for address in addresses):
        raise OutboundRefused(f"{host} resolves to a non-public address; refused.")
    ca_bundle = current_app.config.get("OUTBOUND_CA_BUNDLE")
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
    headers = {"Host": host if port in (80, 443) else f"{host}:{port}", "Accept": "application/json"}
    last_error: Exception | None = None
    with httpx.Client(timeout=httpx.Timeout(timeout, connect=3.0), verify=verify, follow_redirects=False,
                      trust_env=False) as http:
        for address in addresses:
            literal = f"[{address}]" if ":" in address else address
            try:
                return _send(http, method, f"{scheme}://{literal}:{port}{path}", data=data, headers=headers,
                             host=host, url=url)
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                last_error = error
            except httpx.HTTPError as error:
                raise OutboundRefused(f"{method} {url}: {error.__class__.__name__}", transient=True) from None
    raise OutboundRefused(f"Cannot connect to {url}: {last_error.__class__.__name__}", transient=True)


def _send(http: httpx.Client, method: str, pinned_url: str, *, data: dict | None, headers: dict, host: str,
          url: str) -> httpx.Response:
    """One request to a checked address; the body is read in chunks and refused beyond MAX_BYTES."""
    request = http.build_request(method, pinned_url, data=data, headers=headers, extensions={"sni_hostname": host})
    response = http.send(request, stream=True)
    try:
        body = bytearray()
        for chunk in response.iter_bytes():
            body.extend(chunk)
            if len(body) > MAX_BYTES:
                raise OutboundRefused(f"{url} answered more than {MAX_BYTES} bytes.")
    finally:
        response.close()
    return httpx.Response(response.status_code, headers=response.headers, content=bytes(body), request=request)
