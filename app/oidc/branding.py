"""A client's branding on the hosted pages: its accent colour as a small stylesheet.

Pure module. The stylesheet is inline (one per page) and allowed by the CSP through its hash, so
the pages keep `style-src 'self'` without `unsafe-inline`.
"""

from __future__ import annotations

import base64
import hashlib
import re

_COLOR = re.compile(r"#[0-9a-f]{6}")


def _linear(channel: int) -> float:
    value = channel / 255
    return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4


def relative_luminance(color: str) -> float:
    """WCAG relative luminance of a `#rrggbb` colour."""
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * _linear(red) + 0.7152 * _linear(green) + 0.0722 * _linear(blue)


def contrast_ratio(first: str, second: str) -> float:
    """WCAG contrast ratio of two `#rrggbb` colours (1 to 21)."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def text_on(color: str) -> str:
    """Black or white, whichever reads better on `color`."""
    return "#000000" if contrast_ratio(color, "#000000") >= contrast_ratio(color, "#ffffff") else "#ffffff"


def brand_style(accent_color: str | None) -> str | None:
    """The page's inline stylesheet for a client's accent colour, or None without (a valid) one."""
    if not accent_color or not _COLOR.fullmatch(accent_color.lower()):
        return None
    accent = accent_color.lower()
    return f":root{{--accent:{accent};--on-accent:{text_on(accent)}}}"


def style_hash(style: str) -> str:
    """The CSP source expression (`sha256-...`) allowing exactly this inline stylesheet."""
    return "sha256-" + base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
