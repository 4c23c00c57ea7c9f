"""Deploying Tessera's registry and the ERC-8004 IdentityRegistry to a chain (`flask chain deploy`)."""

from __future__ import annotations

from dataclasses import dataclass

from web3 import Web3

from app.chain.abi import IDENTITY_REGISTRY, REGISTRY, load_artifact
from app.chain.errors import ChainUnavailable
from app.chain.transactions import send_transaction, wait_for_receipt


@dataclass(frozen=True)
class Deployment:
    """Where both contracts were created, and the registry's version read back from the chain."""

    chain_id: int
    registry_address: str
    identity_registry_address: str
    version: str


def deploy_contract(w3: Web3, relayer_key: bytes, name: str) -> str:
    """Create contract `name` from its committed artifact and return its address once mined."""
    artifact = load_artifact(name)
    receipt = wait_for_receipt(w3, send_transaction(w3, relayer_key, {"data": artifact.bytecode}))
    if receipt["status"] != 1 or not receipt["contractAddress"]:
        raise ChainUnavailable(f"Creating {name} failed (transaction {receipt['transactionHash'].hex()}).")
    return receipt["contractAddress"]


def deploy_contracts(w3: Web3, relayer_key: bytes) -> Deployment:
    """Deploy both contracts from the relayer's account (which pays the gas)."""
    registry = deploy_contract(w3, relayer_key, REGISTRY)
    identity_registry = deploy_contract(w3, relayer_key, IDENTITY_REGISTRY)
    version = w3.eth.contract(address=registry, abi=load_artifact(REGISTRY).abi).functions.version().call()
    return Deployment(w3.eth.chain_id, registry, identity_registry, version)
