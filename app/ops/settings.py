"""Settings of operations pieces that are not part of the core, built once by `create_app`."""

from __future__ import annotations

from dataclasses import dataclass

from app.settings import env, feature_settings


@feature_settings
@dataclass(frozen=True)
class OpsSettings:
    broker_polling_interval: float = env(
        "BROKER_POLLING_INTERVAL", 0.05, "polling interval of the embedded SQLite broker, seconds"
    )
