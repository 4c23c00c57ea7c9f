"""The deployed TesseraRegistry: reads (eth_call) and a job's relayed write, outside any database transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from web3 import Web3
from web3.contract import Contract

from app.chain.abi import REGISTRY, load_artifact
from app.chain.relay import Receipt
from app.chain.rpc import connect
from app.chain.settings import ChainSettings
from app.chain.typed_data import ZERO_ADDRESS
from app.chain.writes import relay_confirmed
from app.settings import current

# The step of a job's transactions (`app.chain.relay`) that writes the DID's record.
RECORD_STEP = "record"


@dataclass(frozen=True)
class ChainRecord:
    """The record of a DID as the contract holds it now, and the nonce its next signed write must carry."""

    agent: str | None
    owner: str | None
    card_uri: str
    nonce: int

    @property
    def exists(self) -> bool:
        return self.agent is not None

    @property
    def authority(self) -> str | None:
        """The address whose signature a write of the record needs: its owner once named, else its agent."""
        return self.owner or self.agent


def registry_contract(w3: Web3, address: str) -> Contract:
    """The TesseraRegistry at `address`, with its committed ABI."""
    return w3.eth.contract(address=address, abi=load_artifact(REGISTRY).abi)


def read_registry_version(network: str) -> str:
    """`version()` of the registry deployed on `network`'s chain.

    Raises `ChainNotConfigured` or `ChainUnavailable`; must be called with no transaction open.
    """
    chain = current(ChainSettings).require_chain(network)
    return registry_contract(connect(chain.rpc_url), chain.registry_address).functions.version().call()


def read_chain_record(network: str, did: str) -> ChainRecord:
    """The record of `did` and its nonce, read with eth_call from the latest block.

    Raises `ChainNotConfigured` or `ChainUnavailable`; must be called with no transaction open.
    """
    chain = current(ChainSettings).require_chain(network)
    functions = registry_contract(connect(chain.rpc_url), chain.registry_address).functions
    agent, owner, card_uri = functions.getRecord(did).call()
    nonce = functions.nonce(did).call()
    return ChainRecord(
        None if agent == ZERO_ADDRESS else agent, None if owner == ZERO_ADDRESS else owner, card_uri, nonce
    )


def relay_registry_write(network: str, job_id: str, function: str, args: list[Any]) -> Receipt:
    """Send `function(*args)` of the registry (its signatures inside) as the job's `RECORD_STEP`; the
    confirmed receipt. Must run with no transaction open; raises as `app.chain.writes.relay_confirmed`."""
    chain = current(ChainSettings).require_chain(network)
    w3 = connect(chain.rpc_url)
    registry = registry_contract(w3, chain.registry_address)
    return relay_confirmed(w3, job_id, registry.address, registry.encode_abi(function, args=args), step=RECORD_STEP)
