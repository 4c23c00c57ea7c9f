"""The DID settings of this network, built once by `create_app` (see `app.settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from app.settings import env, feature_settings


@feature_settings
@dataclass(frozen=True)
class DidSettings:
    method: str = env("DID_METHOD", "tessera", "method name of the network's DIDs")
