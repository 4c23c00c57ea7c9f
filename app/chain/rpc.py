"""JSON-RPC to the configured chain node, through the one outbound policy (`app.outbound`).

web3.py speaks through `GuardedProvider`, so every call has the total deadline `CHAIN_RPC_TIMEOUT`
and never runs inside an open database transaction. The node's URL is a deployment setting, so
its own host may be private (a node beside the service, or anvil in the tests).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from web3 import Web3
from web3.providers.base import JSONBaseProvider
from web3.types import RPCEndpoint, RPCResponse

import app.outbound as outbound
from app.chain.errors import ChainNotConfigured, ChainUnavailable
from app.chain.settings import ChainSettings
from app.config import CoreSettings
from app.outbound import OutboundPolicy
from app.settings import current

MAX_RPC_BYTES = 8 * 1024 * 1024


class GuardedProvider(JSONBaseProvider):
    """A web3 provider that sends each JSON-RPC request with `app.outbound.fetch`."""

    def __init__(self, url: str, *, timeout: float, verify: Any) -> None:
        super().__init__()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ChainNotConfigured(f"The chain's RPC URL must be an http(s) URL, not {url!r}.")
        self._scheme = parts.scheme
        self._host = parts.hostname.lower()
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._policy = OutboundPolicy(
            allowed_private_hosts=frozenset({f"{self._host}:{self._port}"}),
            verify=verify,
            connect_timeout=min(3.0, timeout),
            read_timeout=timeout,
            total_timeout=timeout,
            max_bytes=MAX_RPC_BYTES,
        )

    def make_request(self, method: RPCEndpoint, params: Any) -> RPCResponse:
        body = self.encode_rpc_request(method, params)
        try:
            response = outbound.fetch(
                self._policy,
                "POST",
                self._scheme,
                self._host,
                self._port,
                self._path,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                content=body,
                require_status=200,
            )
        except outbound.OutboundFailure as error:
            raise ChainUnavailable(f"The chain node at {self._host}:{self._port} failed: {error!r}") from None
        return self.decode_rpc_response(response.content)

    def is_connected(self, show_traceback: bool = False) -> bool:
        try:
            return "result" in self.make_request(RPCEndpoint("web3_clientVersion"), [])
        except ChainUnavailable:
            if show_traceback:
                raise
            return False


def connect(rpc_url: str) -> Web3:
    """A web3 client of the node at `rpc_url` (the deployment's own setting)."""
    core = current(CoreSettings)
    provider = GuardedProvider(
        rpc_url, timeout=current(ChainSettings).rpc_timeout, verify=core.outbound_ca_bundle or True
    )
    return Web3(provider)
