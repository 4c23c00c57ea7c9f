"""Pure checks of sub-client settings: time zones, DNS names, redirect URIs, id_token claims.

No Flask import. The `canonical_*` functions return the normalised value or None when invalid;
`redirect_uri_problem` returns a message naming what is wrong, or None when the URI is usable.
"""

from __future__ import annotations

import ipaddress
import re
import zoneinfo
from functools import lru_cache
from urllib.parse import urlsplit

from app.fields import has_unstorable_characters

# Used with fullmatch: `$` alone also matches before a trailing newline.
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_CLAIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
CLAIM_NAME_PATTERN = _CLAIM_NAME.pattern

# Claims the service itself sets in an id_token; a client mapping may not replace them.
RESERVED_CLAIMS = frozenset(
    {
        "iss", "sub", "aud", "exp", "iat", "nbf", "jti", "auth_time", "nonce", "at_hash", "c_hash",
        "acr", "amr", "azp", "sid", "user_id", "did", "typ", "cnf", "scope", "client_id",
    }
)  # fmt: skip
MAX_REDIRECT_URI_LENGTH = 2048


@lru_cache(maxsize=1)
def time_zones() -> tuple[str, ...]:
    """Every IANA time zone name known to this installation (tzdata), sorted."""
    return tuple(sorted(zoneinfo.available_timezones() | {"UTC"}))


def is_time_zone(name: str) -> bool:
    return name in set(time_zones())


def canonical_dns_label(value: str) -> str | None:
    """One DNS label (letters, digits, inner hyphens; 1 to 63 characters), lower case."""
    lowered = value.lower()
    return lowered if lowered.isascii() and _LABEL.fullmatch(lowered) else None


def canonical_host_name(value: str) -> str | None:
    """A DNS host name of at least two labels (no IP address), in lower-case A-label form.

    Internationalised names are converted to their ASCII (punycode) form.
    """
    if not value or value != value.strip() or value.endswith("."):
        return None
    if not value.isascii():
        try:
            value = value.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    lowered = value.lower()
    if len(lowered) > 253:
        return None
    labels = lowered.split(".")
    if len(labels) < 2 or any(canonical_dns_label(label) is None for label in labels):
        return None
    if labels[-1].isdigit():  # a top-level domain is never numeric: this is an IPv4 address
        return None
    return lowered


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: str) -> str | None:
    """Why `uri` cannot be an OpenID redirect URI, or None when it can.

    Allowed: absolute `https` URIs, and `http` only towards a loopback host (RFC 8252 section
    7.3). No fragment, no user information, at most 2048 characters.
    """
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        return f"Must be at most {MAX_REDIRECT_URI_LENGTH} characters."
    if not uri.isascii() or any(ch.isspace() for ch in uri) or has_unstorable_characters(uri):
        return "Must be an ASCII URI without spaces or control characters."
    try:
        parts = urlsplit(uri)
        host, _port = parts.hostname, parts.port  # reading the port raises ValueError when it is malformed
    except ValueError:
        return "Not a valid URI."
    if parts.scheme not in {"https", "http"} or not host:
        return "Must be an absolute https URI (or http to a loopback address)."
    if parts.fragment or uri.endswith("#"):
        return "Must not contain a fragment."
    if parts.username is not None or parts.password is not None:
        return "Must not contain user information."
    if parts.scheme == "http" and not is_loopback_host(host):
        return "http is allowed only for loopback addresses; use https."
    return None


MAX_LOGO_URL_LENGTH = 2048
_ACCENT_COLOR = re.compile(r"#[0-9a-fA-F]{6}")


def logo_url_problem(url: str) -> str | None:
    """Why `url` cannot be a client's logo on the hosted pages (they load images over https only)."""
    if len(url) > MAX_LOGO_URL_LENGTH:
        return f"Must be at most {MAX_LOGO_URL_LENGTH} characters."
    if not url.isascii() or any(ch.isspace() for ch in url) or has_unstorable_characters(url):
        return "Must be an ASCII URL without spaces or control characters."
    try:
        parts = urlsplit(url)
    except ValueError:
        return "Not a valid URL."
    if parts.scheme != "https" or not parts.hostname:
        return "Must be an absolute https URL."
    if parts.username is not None or parts.password is not None:
        return "Must not contain user information."
    return None


def accent_color_problem(color: str) -> str | None:
    """Why `color` cannot be a client's accent colour, or None when it is `#rrggbb`."""
    return None if _ACCENT_COLOR.fullmatch(color) else "Must be a colour written #rrggbb."


def claim_name_problem(name: str) -> str | None:
    """Why `name` cannot be a custom id_token claim, or None when it can."""
    if not _CLAIM_NAME.fullmatch(name):
        return "Claim names are 1 to 64 characters: letters, digits, _ . : - (not starting with a digit)."
    if name in RESERVED_CLAIMS:
        return f"{name!r} is set by the service and cannot be mapped."
    return None
