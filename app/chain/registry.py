"""Reads of the deployed TesseraRegistry (eth_call), outside any database transaction."""

from __future__ import annotations

from web3 import Web3
from web3.contract import Contract

from app.chain.abi import REGISTRY, load_artifact
from app.chain.rpc import connect
from app.chain.settings import ChainSettings
from app.settings import current


def registry_contract(w3: Web3, address: str) -> Contract:
    """The TesseraRegistry at `address`, with its committed ABI."""
    return w3.eth.contract(address=address, abi=load_artifact(REGISTRY).abi)


def read_registry_version(network: str) -> str:
    """`version()` of the registry deployed on `network`'s chain.

    Raises `ChainNotConfigured` or `ChainUnavailable`; must be called with no transaction open.
    """
    chain = current(ChainSettings).require_chain(network)
    return registry_contract(connect(chain.rpc_url), chain.registry_address).functions.version().call()
