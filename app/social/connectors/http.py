"""One guarded HTTP call to a platform API: budget, time and size limits, status → error mapping."""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self

import httpx

from app.outbound import DeadlineTransport, refuse_inside_transaction
from app.social.connectors.errors import (
    BudgetExhausted,
    ConnectorError,
    LinkBroken,
    PlatformUnavailable,
    RateLimited,
    TokenExpired,
)

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_BYTES = 4 * 1024 * 1024


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one verifying TLS context every outbound client shares (building one costs ~100 ms)."""
    return httpx.create_ssl_context()


def platform_transport(timeout: float, transport: httpx.BaseTransport | None = None) -> httpx.BaseTransport:
    """`transport` when one is given (tests), else one that gives each request `timeout` seconds in all."""
    return transport or DeadlineTransport.per_request(timeout, verify=tls_context())


class CallBudgetLike(Protocol):
    """What a connector needs from `app.social.budget.CallBudget`."""

    def acquire(self, platform: str, cost: int = 1) -> float: ...


RetryAfterReader = Callable[[httpx.Response, bytes], "float | None"]


class PlatformHttp:
    """Sends GET requests to one platform and maps its failure answers to connector errors.

    Every call first takes one unit of the platform's shared budget (when one is given); a spent
    budget raises `BudgetExhausted` without sending anything. `read_retry_after` extracts the
    platform's own delay hint from a 429; `unauthorized` and `forbidden` are the errors a 401 and a
    403 mean on this platform.
    """

    def __init__(
        self,
        platform: str,
        *,
        read_retry_after: RetryAfterReader,
        unauthorized: type[ConnectorError] = TokenExpired,
        forbidden: type[ConnectorError] = LinkBroken,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        budget: CallBudgetLike | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.platform = platform
        self._read_retry_after = read_retry_after
        self._unauthorized = unauthorized
        self._forbidden = forbidden
        self._max_bytes = max_bytes
        self._budget = budget
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"Accept": "application/json", **(headers or {})},
            transport=platform_transport(timeout, transport),
            follow_redirects=False,
        )

    def close(self) -> None:
        """Release the connection pool."""
        self._client.close()

    def get_json(
        self, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        """GET `url` and return its decoded JSON body; raises a `ConnectorError` subclass otherwise.

        Never with a database transaction open (`CalledInsideTransaction`).
        """
        refuse_inside_transaction(f"{self.platform} API call")
        self._take_budget()
        try:
            with self._client.stream("GET", url, params=params, headers=headers) as response:
                body = self._read_limited(response)
        except httpx.TimeoutException as exc:
            raise PlatformUnavailable(f"{self.platform}: timed out") from exc
        except httpx.TransportError as exc:
            raise PlatformUnavailable(f"{self.platform}: {type(exc).__name__}") from exc
        raise_for_platform_status(
            self.platform, response, body, self._read_retry_after, self._unauthorized, self._forbidden
        )
        try:
            return json.loads(body)
        except ValueError as exc:
            raise PlatformUnavailable(f"{self.platform}: answer is not JSON") from exc

    def _take_budget(self) -> None:
        if self._budget is None:
            return
        wait = self._budget.acquire(self.platform)
        if wait > 0:
            raise BudgetExhausted(f"{self.platform}: call budget spent", retry_after=wait)

    def _read_limited(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise PlatformUnavailable(f"{self.platform}: answer larger than {self._max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)


def raise_for_platform_status(
    platform: str,
    response: httpx.Response,
    body: bytes,
    read_retry_after: RetryAfterReader,
    unauthorized: type[ConnectorError] = TokenExpired,
    forbidden: type[ConnectorError] = LinkBroken,
) -> None:
    """Raise the connector error a non-2xx `response` means; return quietly on success."""
    status = response.status_code
    if 200 <= status < 300:
        return
    if status == 429:
        raise RateLimited(f"{platform}: rate limited", retry_after=read_retry_after(response, body))
    if status == 401:
        raise unauthorized(f"{platform}: 401 unauthorized")
    if status == 403:
        raise forbidden(f"{platform}: 403 forbidden")
    if status >= 500:
        raise PlatformUnavailable(f"{platform}: HTTP {status}")
    raise LinkBroken(f"{platform}: HTTP {status}")


def retry_after_header(response: httpx.Response, body: bytes) -> float | None:
    """Read a standard `Retry-After` header given in seconds (None when absent or a date)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class PlatformConnector:
    """Base of a platform's API client that calls through one `PlatformHttp`; a context manager."""

    _http: PlatformHttp

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
