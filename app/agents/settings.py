"""Settings of the agent network, read once by `create_app` (see `app.settings`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from app.settings import Derived, env, feature_settings

DEFAULT_PRICES = {"host-card": 10, "set-card": 5, "card-unpublish": 1, "deregister": 0}
TESTNET = "testnet"


def _network_url(config: Mapping[str, Any]) -> str:
    return str(config["BASE_URL"]).rstrip("/")


def _network(config: Mapping[str, Any]) -> str:
    # The embedded default (SQLite) is a testnet; a deployment on its own database is not unless it says so.
    return TESTNET if str(config.get("SQLALCHEMY_DATABASE_URI", "")).startswith("sqlite") else "production"


def _prices(text: str) -> dict[str, int]:
    overrides = json.loads(text)
    if not isinstance(overrides, dict):
        raise ValueError("must be a JSON object of prices")
    return overrides


@feature_settings
@dataclass(frozen=True)
class AgentSettings:
    network: str = env(
        "AGENT_NETWORK",
        Derived(_network, "testnet on the embedded default, else production"),
        "`testnet` opens the `/claim` page and its credit grants; anything else (`production`) closes them.",
    )
    network_url: str = env(
        "AGENT_NETWORK_URL",
        Derived(_network_url, "BASE_URL"),
        "Public URL of the agent network.",
        parse=lambda text: text.rstrip("/"),
    )
    chain_id: int = env("AGENT_CHAIN_ID", 1, "EIP-155 chain id of sign-in challenges and `blockchainAccountId`.")
    claim_credits: int = env("AGENT_CLAIM_CREDITS", 1000, "Credits a key claimed on the testnet receives.")
    claim_rate_limit: str = env("AGENT_CLAIM_RATE_LIMIT", "10 per hour", "Rate limit of claim form posts.")
    claim_form_seconds: int = env("AGENT_CLAIM_FORM_SECONDS", 3600, "How long a claim form's token may be used (once).")
    challenge_rate_limit: str = env("AGENT_CHALLENGE_RATE_LIMIT", "60 per minute", "Rate limit of sign-in challenges.")
    session_seconds: int = env("AGENT_SESSION_SECONDS", 3600, "Lifetime of an agent session token.")
    challenge_seconds: int = env(
        "AGENT_CHALLENGE_SECONDS", 300, "Lifetime of a sign-in challenge; also the window of owner revocations."
    )
    consent_seconds: int = env("AGENT_CONSENT_SECONDS", 7 * 24 * 3600, "Lifetime of a pending consent.")
    price_overrides: Mapping[str, Any] | None = env(
        "AGENT_PRICES",
        None,
        'Prices in credits overriding single entries (JSON, e.g. `{"host-card": 10}`).',
        parse=_prices,
    )
    card_cache_seconds: int = env("AGENT_CARD_CACHE_SECONDS", 60, "max-age of public card and DID document reads.")
    registry_version: str = env(
        "AGENT_REGISTRY_VERSION",
        "1.7.0",
        "Version of the agent-registry contract of the `database` backend (with `evm`, the deployed "
        "contract answers its own).",
    )

    @property
    def is_testnet(self) -> bool:
        """Only an explicit (or derived) ``testnet`` is one."""
        return self.network == TESTNET

    @property
    def prices(self) -> dict[str, int]:
        """The price list in credits: the defaults with ``AGENT_PRICES`` overriding single entries."""
        return {**DEFAULT_PRICES, **{name: int(price) for name, price in (self.price_overrides or {}).items()}}

    @property
    def challenge_lifetime(self) -> timedelta:
        return timedelta(seconds=self.challenge_seconds)

    @property
    def session_lifetime(self) -> timedelta:
        return timedelta(seconds=self.session_seconds)

    @property
    def claim_form_lifetime(self) -> timedelta:
        return timedelta(seconds=self.claim_form_seconds)

    @property
    def consent_lifetime(self) -> timedelta:
        return timedelta(seconds=self.consent_seconds)
