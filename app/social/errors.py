"""Problems of the social feature, one class per response shape."""

from __future__ import annotations

from app.errors import BadRequest, DomainError, NotFound


class UnknownPlatform(NotFound):
    status, code, title = 404, "unknown_platform", "Unknown platform"


class SocialLinkNotFound(NotFound):
    status, code, title = 404, "social_link_not_found", "Social link not found"


class LinkStateInvalid(BadRequest):
    status, code, title = 400, "invalid_link_state", "Invalid or expired link state"


class PlatformNotConfigured(DomainError):
    status, code, title = 503, "platform_not_configured", "Platform not configured"


class FetchDeferred(Exception):
    """A fetch must run again in `seconds` (rate limit or transient fault); nothing was written."""

    def __init__(self, seconds: float, reason: str) -> None:
        super().__init__(reason)
        self.seconds = seconds
