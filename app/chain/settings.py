"""Settings of the chain the agent registry may live on, read once by `create_app` (see `app.settings`).

The agent network's `AGENT_NETWORK` (what `--env testnet|production` names on the command line)
picks the chain: each network has its RPC URL, chain id and contract addresses here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.chain.errors import ChainNotConfigured
from app.settings import env, feature_settings

DATABASE = "database"
EVM = "evm"
BACKENDS = (DATABASE, EVM)
TESTNET = "testnet"
SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_PRIVATE_KEY = re.compile(r"^0x[0-9a-fA-F]{64}$")


def _backend(text: str) -> str:
    value = text.strip().lower()
    if value not in BACKENDS:
        raise ValueError(f"must be one of {', '.join(BACKENDS)}")
    return value


def _address(text: str) -> str:
    # Checked again, EIP-55 checksum included, by web3 at the first call.
    if not _ADDRESS.match(text.strip()):
        raise ValueError("must be an address: 0x and 40 hex digits")
    return text.strip()


@dataclass(frozen=True)
class RelayerKey:
    """The relayer's private key; its text is never part of a repr, a log line or a table."""

    secret: bytes = field(repr=False)


def _relayer_key(text: str) -> RelayerKey:
    # The error never quotes the text: it is a secret.
    if not _PRIVATE_KEY.match(text.strip()) or not 0 < int(text.strip(), 16) < SECP256K1_ORDER:
        raise ValueError("must be a secp256k1 private key: 0x and 64 hex digits")
    return RelayerKey(bytes.fromhex(text.strip()[2:]))


@dataclass(frozen=True)
class Chain:
    """One configured chain: where its node answers and where the contracts are."""

    network: str
    rpc_url: str | None
    chain_id: int | None
    registry_address: str | None
    identity_registry_address: str | None

    @property
    def agent_registry_id(self) -> str:
        """The ERC-8004 `agentRegistry` of the identity registry: `eip155:<chainId>:<address>`."""
        return f"eip155:{self.chain_id}:{self.identity_registry_address}"


@feature_settings
@dataclass(frozen=True)
class ChainSettings:
    registry_backend: str = env(
        "AGENT_REGISTRY_BACKEND",
        DATABASE,
        "Where the agent registry lives: `database` (Tessera's own tables) or `evm` (the registry "
        "contract on the network's chain, below).",
        parse=_backend,
    )
    testnet_rpc_url: str | None = env("CHAIN_TESTNET_RPC_URL", None, "JSON-RPC URL of the testnet's chain node.")
    testnet_chain_id: int | None = env(
        "CHAIN_TESTNET_CHAIN_ID", None, "EIP-155 chain id of the testnet's chain.", parse=int
    )
    testnet_registry_address: str | None = env(
        "CHAIN_TESTNET_REGISTRY_ADDRESS",
        None,
        "Address of the TesseraRegistry contract on the testnet's chain.",
        parse=_address,
    )
    testnet_identity_registry_address: str | None = env(
        "CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS",
        None,
        "Address of the ERC-8004 IdentityRegistry on the testnet's chain.",
        parse=_address,
    )
    production_rpc_url: str | None = env("CHAIN_PRODUCTION_RPC_URL", None, "JSON-RPC URL of production's chain node.")
    production_chain_id: int | None = env(
        "CHAIN_PRODUCTION_CHAIN_ID", None, "EIP-155 chain id of production's chain.", parse=int
    )
    production_registry_address: str | None = env(
        "CHAIN_PRODUCTION_REGISTRY_ADDRESS",
        None,
        "Address of the TesseraRegistry contract on production's chain.",
        parse=_address,
    )
    production_identity_registry_address: str | None = env(
        "CHAIN_PRODUCTION_IDENTITY_REGISTRY_ADDRESS",
        None,
        "Address of the ERC-8004 IdentityRegistry on production's chain.",
        parse=_address,
    )
    relayer_key: RelayerKey | None = env(
        "CHAIN_RELAYER_KEY",
        None,
        "Private key (0x + 64 hex digits) of the account that sends registry transactions and pays "
        "their gas; read from the environment only, never stored or shown.",
        parse=_relayer_key,
    )
    rpc_timeout: float = env("CHAIN_RPC_TIMEOUT", 10.0, "Seconds one JSON-RPC call may take in all.")
    confirmations: int = env("CHAIN_CONFIRMATIONS", 2, "Blocks on top of a registry transaction before it counts.")
    stuck_seconds: float = env(
        "CHAIN_STUCK_SECONDS",
        60.0,
        "Seconds a relayed transaction may wait unmined before it is replaced by one with the same "
        "nonce and fees raised by at least 12.5 % (and to at least what the node asks now).",
    )
    max_fee_per_gas: int = env(
        "CHAIN_MAX_FEE_PER_GAS",
        500 * 10**9,
        "Most the relayer offers per unit of gas, in wei (default 500 gwei): no transaction is sent "
        "or replaced with a higher `maxFeePerGas`; one that would need more waits for fees to fall.",
        parse=int,
    )

    def chain(self, network: str) -> Chain:
        """The chain of `network`: `testnet`'s, else production's (as the agent network decides)."""
        prefix = TESTNET if network == TESTNET else "production"
        return Chain(
            network=prefix,
            rpc_url=getattr(self, f"{prefix}_rpc_url"),
            chain_id=getattr(self, f"{prefix}_chain_id"),
            registry_address=getattr(self, f"{prefix}_registry_address"),
            identity_registry_address=getattr(self, f"{prefix}_identity_registry_address"),
        )

    def require_chain(self, network: str) -> Chain:
        """The chain of `network` with its node and both contracts set; `ChainNotConfigured` names what is missing."""
        chain = self.chain(network)
        missing = [
            name
            for name, value in (
                ("RPC_URL", chain.rpc_url),
                ("CHAIN_ID", chain.chain_id),
                ("REGISTRY_ADDRESS", chain.registry_address),
                ("IDENTITY_REGISTRY_ADDRESS", chain.identity_registry_address),
            )
            if value is None
        ]
        if missing:
            prefix = f"CHAIN_{chain.network.upper()}_"
            raise ChainNotConfigured("Set " + ", ".join(prefix + name for name in missing) + ".")
        return chain
