"""Failures a platform connector reports, each carrying what the caller needs to react.

Callers decide from the class alone: `RateLimited` and `PlatformUnavailable` are transient (retry
later, never by sleeping in a worker), `TokenExpired` asks for one token refresh, `LinkBroken` is
final for the link until the user links again, `PlatformMisconfigured` is the service's own fault
(every link of the platform fails alike until an operator fixes the configuration),
`MalformedAnswer` is an answer out of the platform's documented shape.
"""

from __future__ import annotations

import random
from collections.abc import Callable


class ConnectorError(Exception):
    """Base of every connector failure; `detail` is safe to store and show to API callers."""

    code = "connector_error"
    transient = False

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class RateLimited(ConnectorError):
    """The platform (or our own call budget) refused the call for now.

    `retry_after` is the platform's hint in seconds from now, or `None` when the platform gives none
    (the caller then backs off exponentially with jitter, see `retry_delay`).
    """

    code = "rate_limited"
    transient = True

    def __init__(self, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class BudgetExhausted(RateLimited):
    """Our shared per-platform call budget is spent; no request was sent to the platform."""

    code = "budget_exhausted"


class TokenExpired(ConnectorError):
    """The platform answered 401 to the access token: refresh it once, then call again."""

    code = "token_expired"


class LinkBroken(ConnectorError):
    """The link cannot be used (bad API key, revoked grant, unknown account): do not retry."""

    code = "link_broken"


class PlatformMisconfigured(ConnectorError):
    """The platform refused the service's own credentials (a wrong API key), not the user's link.

    Retrying soon cannot help and the link is not to blame: keep it, wait for the operator.
    """

    code = "platform_misconfigured"


class MalformedAnswer(ConnectorError):
    """The platform answered, but not in its documented shape (a game without `appid`, ...).

    Not retried soon (the same answer would come again); the next regular refresh tries again.
    """

    code = "malformed_answer"


class PlatformUnavailable(ConnectorError):
    """The platform failed (5xx, timeout, network, unreadable answer): transient, retry later."""

    code = "platform_unavailable"
    transient = True


def retry_delay(
    error: ConnectorError,
    attempt: int,
    *,
    base: float = 2.0,
    cap: float = 900.0,
    rng: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before retry number `attempt` (1-based) after a transient `error`.

    A platform's own hint wins (plus up to 10 % jitter so waiting tasks do not return in a herd);
    otherwise "full jitter" exponential backoff: uniform in [0, min(cap, base * 2**(attempt-1))].
    """
    hint = getattr(error, "retry_after", None)
    if hint is not None:
        return min(cap, max(0.0, hint) * (1.0 + 0.1 * rng()))
    ceiling = min(cap, base * 2 ** max(0, attempt - 1))
    return max(0.1, ceiling * rng())
