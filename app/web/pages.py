"""The security headers every HTML page carries; only the Content-Security-Policy differs per page."""

from __future__ import annotations


def page_security_headers(content_security_policy: str) -> dict[str, str]:
    """Headers of an HTML page: its CSP, no framing, no sniffing, no referrer."""
    return {
        "Content-Security-Policy": content_security_policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
