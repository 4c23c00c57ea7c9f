"""The DID method of this network and the shape of its DIDs."""

from __future__ import annotations

import re
import secrets

from flask import Flask

from app.dids.settings import DidSettings
from app.dids.syntax import NETWORK_DID
from app.settings import current

_NETWORK_DID = re.compile(NETWORK_DID)


def did_method(app: Flask | None = None) -> str:
    """The DID method name of this network (`DID_METHOD`, default `tessera`)."""
    return current(DidSettings, app).method


def new_network_did() -> str:
    """A fresh DID of this network: `did:<method>:` and 20 random bytes as lower-case hex."""
    return f"did:{did_method()}:{secrets.token_hex(20)}"


def is_network_did(did: str, app: Flask | None = None) -> bool:
    """Whether `did` has the shape of a DID of this network (`did:<method>:<40 hex>`)."""
    return _NETWORK_DID.fullmatch(did) is not None and did.split(":", 2)[1] == did_method(app)
