"""The DID method of this network and the shape of its DIDs."""

from __future__ import annotations

import re
import secrets

from app.dids.settings import DidSettings
from app.settings import current


def did_method() -> str:
    """The DID method name of this network (`DID_METHOD`, default `tessera`)."""
    return current(DidSettings).method


def new_network_did() -> str:
    """A fresh DID of this network: `did:<method>:` and 20 random bytes as lower-case hex."""
    return f"did:{did_method()}:{secrets.token_hex(20)}"


def is_network_did(did: str) -> bool:
    """Whether `did` has the shape of a DID of this network (`did:<method>:<40 hex>`)."""
    return re.fullmatch(rf"did:{re.escape(did_method())}:[0-9a-f]{{40}}", did) is not None
