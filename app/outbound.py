"""The one outbound fetch policy: every request to a URL someone else chose goes through `fetch`.

Used by did:web resolution, the remote status-list fetcher and the OpenID provider's client
`jwks_uri` and back-channel logout requests; each passes its own allow-listed hosts and limits in an
`OutboundPolicy`. The guard: the host is resolved first and every address must be public (not
private, loopback, link-local, multicast, reserved or unspecified) unless `host:port` is
allow-listed; the request then goes to a checked address itself (TLS still verifies the name, so
a second DNS answer cannot redirect it); redirects are never followed (a 3xx is an answer like any
other, so a redirect can never reach an unchecked address); proxies from the environment are
ignored; connect, read and total time and the body size are bounded.

The total time is a deadline on the wall clock: the name lookup and every socket operation
(connect, TLS handshake, each write and read, headers included) wait at most until it, so neither
a slow resolver nor a peer that drips one byte at a time can hold the caller longer than
`total_timeout`. And no call runs inside an open
database transaction (it would hold locks and a connection for as long as the peer likes):
`fetch` raises `CalledInsideTransaction` when the probe the application registers
(`set_transaction_probe`) says one is open.

Failures raise a subclass of `OutboundFailure`; callers turn them into their own errors and words.
This module has no Flask import.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import httpcore
import httpx

AddressResolver = Callable[[str, int], list[str]]
TransactionProbe = Callable[[], bool]

# The system resolver cannot be given a deadline, so lookups run here and the caller waits only
# until its own; a lookup the resolver never answers pins one of these threads, not the caller.
_RESOLVER_THREADS = 4
_resolvers = ThreadPoolExecutor(max_workers=_RESOLVER_THREADS, thread_name_prefix="outbound-resolve")


def _no_database() -> bool:
    return False


_transaction_open: TransactionProbe = _no_database


def no_preparation() -> None:
    """The default `before_fetch` of a fetching component: nothing to end before it calls out."""


def set_transaction_probe(probe: TransactionProbe) -> None:
    """Have `fetch` ask `probe()` whether a database transaction is open, and refuse to run if so."""
    global _transaction_open
    _transaction_open = probe


class CalledInsideTransaction(RuntimeError):
    """A programming error: a call to another host was made while a database transaction is open."""


def refuse_inside_transaction(what: str) -> None:
    """Raise `CalledInsideTransaction` if a database transaction is open; every call to another host asks first.

    `fetch` asks itself; clients of fixed platforms that keep their own connections (social
    connectors) ask before each request.
    """
    if _transaction_open():
        raise CalledInsideTransaction(f"{what[:200]} while a database transaction is open")


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


def host_list(raw: str) -> frozenset[str]:
    """A comma-separated `host:port` allow-list setting as a set (lower case, blanks dropped)."""
    return frozenset(item.strip().lower() for item in raw.split(",") if item.strip())


def unusable_host_detail(what: str, host: str) -> str:
    """The failure detail for a host that does not resolve or resolves to a non-public address."""
    return f"{what} host {host[:100]} is unknown or has a non-public address; refused"


def connection_reason(error: BaseException | None) -> str:
    """Why a connection failed, without the addresses or OS messages its text may hold."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, ssl.SSLCertVerificationError):
            return "the TLS certificate does not verify"
        if isinstance(error, ssl.SSLError):
            return "the TLS handshake failed"
        error, seen = error.__cause__ or error.__context__, seen + 1
    return "connection failed"


class OutboundFailure(Exception):
    """A guarded fetch failed; the subclass says why."""


class UnusableHost(OutboundFailure):
    """The host does not resolve (`error` set), has no address, or has a non-public one."""

    def __init__(self, host: str, *, error: BaseException | None = None, non_public: bool = False) -> None:
        super().__init__(host)
        self.host, self.error, self.non_public = host, error, non_public


class UnexpectedStatus(OutboundFailure):
    """The answer's status was not the one required."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class TooLarge(OutboundFailure):
    """The body is larger than the policy's `max_bytes`."""


class TooSlow(OutboundFailure):
    """The exchange (name lookup, connect, headers and body) took longer than the policy's `total_timeout`."""


class ConnectFailed(OutboundFailure):
    """No checked address accepted a connection; `error` is the last one's error."""

    def __init__(self, error: BaseException | None) -> None:
        super().__init__(error)
        self.error = error


class TransferFailed(OutboundFailure):
    """The connection was made but the exchange failed; `error` is the httpx error."""

    def __init__(self, error: httpx.HTTPError) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class OutboundPolicy:
    """Limits of one feature's outbound requests.

    `allowed_private_hosts`: `"host:port"` entries that may resolve to non-public addresses (and be
    fetched over plain http). `verify`: TLS verification (True, a CA bundle path or an SSL context).
    `total_timeout`: seconds for the whole exchange, a deadline on the wall clock.
    """

    allowed_private_hosts: frozenset[str] = field(default_factory=frozenset)
    verify: ssl.SSLContext | str | bool = True
    connect_timeout: float = 3.0
    read_timeout: float = 5.0
    total_timeout: float = 10.0
    max_bytes: int = 256 * 1024
    resolve_addresses: AddressResolver = system_addresses

    def is_listed(self, host: str, port: int) -> bool:
        return f"{host}:{port}" in self.allowed_private_hosts

    def checked_addresses(self, host: str, port: int, deadline: float | None = None) -> list[str]:
        """The addresses of `host`, all public unless allow-listed; raises `UnusableHost`, and
        `TooSlow` when the resolver has not answered by `deadline` (`time.monotonic()` seconds)."""
        lookup = _resolvers.submit(self.resolve_addresses, host, port)
        try:
            addresses = lookup.result(timeout=None if deadline is None else max(deadline - time.monotonic(), 0.001))
        except FutureTimeout:
            raise TooSlow() from None
        except (OSError, UnicodeError) as error:
            raise UnusableHost(host, error=error) from None
        if not addresses:
            raise UnusableHost(host)
        if not self.is_listed(host, port) and any(not is_public_address(address) for address in addresses):
            raise UnusableHost(host, non_public=True)
        return addresses


def fetch(
    policy: OutboundPolicy,
    method: str,
    scheme: str,
    host: str,
    port: int,
    path: str,
    *,
    headers: Mapping[str, str],
    data: dict | None = None,
    content: bytes | None = None,
    require_status: int | None = None,
) -> httpx.Response:
    """Send one request through the guard and return the answer with its body read.

    `scheme`, `host` (lower case), `port` and `path` (with its query) come from the caller's own
    URL checks. `data` is sent as a form, `content` as the body itself (JSON-RPC). With
    `require_status`, any other status raises `UnexpectedStatus` before the body is read. Raises
    an `OutboundFailure` subclass, and `CalledInsideTransaction` (before anything is sent) when a
    database transaction is open.
    """
    refuse_inside_transaction(f"{method} to {host[:100]}")
    deadline = time.monotonic() + policy.total_timeout
    addresses = policy.checked_addresses(host, port, deadline)
    default_port = 443 if scheme == "https" else 80
    sent_headers = {"Host": host if port == default_port else f"{host}:{port}", **headers}
    verify = ssl.create_default_context(cafile=policy.verify) if isinstance(policy.verify, str) else policy.verify
    timeout = httpx.Timeout(policy.read_timeout, connect=policy.connect_timeout)
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    last_error: Exception | None = None
    transport = DeadlineTransport(lambda: deadline, verify=verify, max_connections=1)
    with httpx.Client(timeout=timeout, transport=transport, follow_redirects=False, trust_env=False) as client:
        for address in addresses:
            literal = f"[{address}]" if ":" in address else address
            request = client.build_request(
                method,
                f"{scheme}://{literal}:{port}{path}",
                data=data,
                content=content,
                headers=sent_headers,
                extensions=extensions,
            )
            try:
                return _exchange(client, request, policy, require_status)
            except httpx.TimeoutException as error:
                if time.monotonic() >= deadline:
                    raise TooSlow() from None
                if not isinstance(error, httpx.ConnectTimeout):
                    raise TransferFailed(error) from None
                last_error = error
            except httpx.ConnectError as error:
                last_error = error
            except httpx.HTTPError as error:
                raise TransferFailed(error) from None
    raise ConnectFailed(last_error)


def _exchange(
    client: httpx.Client, request: httpx.Request, policy: OutboundPolicy, require_status: int | None
) -> httpx.Response:
    response = client.send(request, stream=True)
    try:
        if require_status is not None and response.status_code != require_status:
            raise UnexpectedStatus(response.status_code)
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > policy.max_bytes:
            raise TooLarge()
        body = bytearray()
        for chunk in response.iter_bytes():
            body.extend(chunk)
            if len(body) > policy.max_bytes:
                raise TooLarge()
    finally:
        response.close()
    return httpx.Response(response.status_code, headers=response.headers, content=bytes(body), request=request)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport whose every socket operation ends by a deadline on the wall clock.

    `deadline_of()` gives the deadline (`time.monotonic()` seconds) of each request as it starts:
    a fixed one for a whole exchange (`fetch`), or `now + seconds` for a total per request
    (`DeadlineTransport.per_request`). The body a caller streams after the headers is bounded too.
    """

    def __init__(
        self, deadline_of: Callable[[], float], *, verify: ssl.SSLContext | str | bool, max_connections: int = 10
    ) -> None:
        context = httpx.create_ssl_context(verify=verify, trust_env=False)
        super().__init__(verify=context, trust_env=False)
        self._deadline_of = deadline_of
        self._backend = _DeadlineBackend()
        # httpx takes no network backend, so its pool is replaced by one that has it.
        self._pool = httpcore.ConnectionPool(
            ssl_context=context, max_connections=max_connections, network_backend=self._backend
        )

    @classmethod
    def per_request(cls, seconds: float, *, verify: ssl.SSLContext | str | bool) -> DeadlineTransport:
        """A transport giving each request `seconds` in all (for one thread's client at a time)."""
        return cls(lambda: time.monotonic() + seconds, verify=verify)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._backend.deadline = self._deadline_of()
        return super().handle_request(request)


def _until(deadline: float, timeout: float | None) -> float:
    """`timeout` shortened to what is left before `deadline`; at least a moment, so a read can fail."""
    left = max(deadline - time.monotonic(), 0.001)
    return left if timeout is None else min(timeout, left)


class _DeadlineBackend(httpcore.NetworkBackend):
    """Sockets whose operations end by `deadline`, the current request's (set by `DeadlineTransport`)."""

    def __init__(self) -> None:
        self.deadline = time.monotonic()
        self.sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable | None = None,
    ) -> httpcore.NetworkStream:
        last_error: Exception | None = None
        for address in _addresses_by(host, port, self.deadline):
            try:
                stream = self.sockets.connect_tcp(
                    address, port, _until(self.deadline, timeout), local_address=local_address,
                    socket_options=socket_options,
                )  # fmt: skip
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                last_error = error
                continue
            return _DeadlineStream(stream, self)
        raise last_error or httpcore.ConnectError(f"{host} has no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not outbound calls")


def _addresses_by(host: str, port: int, deadline: float) -> list[str]:
    """The addresses of `host` (TLS still checks the name itself), looked up by `deadline`."""
    lookup = _resolvers.submit(system_addresses, host, port)
    try:
        return lookup.result(timeout=max(deadline - time.monotonic(), 0.001))
    except FutureTimeout:
        raise httpcore.ConnectTimeout(f"looking up {host[:100]} took longer than the deadline") from None
    except (OSError, UnicodeError) as error:
        raise httpcore.ConnectError(f"{host[:100]} does not resolve") from error


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, backend: _DeadlineBackend) -> None:
        self.stream, self.backend = stream, backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, _until(self.backend.deadline, timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, _until(self.backend.deadline, timeout))

    def close(self) -> None:
        self.stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        stream = self.stream.start_tls(ssl_context, server_hostname, _until(self.backend.deadline, timeout))
        return _DeadlineStream(stream, self.backend)

    def get_extra_info(self, info: str) -> object:
        return self.stream.get_extra_info(info)
