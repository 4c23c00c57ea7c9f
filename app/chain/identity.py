"""ERC-8004 identity of hosted agents: `register(agentURI)` and `setAgentURI` in the IdentityRegistry,
each relayed once per job, and `tokenURI` read back."""

from __future__ import annotations

from dataclasses import dataclass

from web3 import Web3
from web3.contract import Contract
from web3.logs import DISCARD

from app.chain.abi import IDENTITY_REGISTRY, load_artifact
from app.chain.errors import TransactionReverted
from app.chain.relay import Receipt
from app.chain.rpc import connect
from app.chain.settings import Chain, ChainSettings
from app.chain.writes import relay_confirmed
from app.settings import current

# The steps of a job's transactions (`app.chain.relay`) that register the agent's identity and
# change its URI.
IDENTITY_STEP = "identity"
IDENTITY_URI_STEP = "identity-uri"


@dataclass(frozen=True)
class IdentityRegistration:
    """A confirmed `register(agentURI)`: the new `agentId` and where it lives."""

    agent_id: int
    agent_registry: str
    tx_hash: str
    block_number: int


def _identity_registry(chain: Chain) -> tuple[Web3, Contract]:
    w3 = connect(chain.rpc_url)
    return w3, w3.eth.contract(address=chain.identity_registry_address, abi=load_artifact(IDENTITY_REGISTRY).abi)


def register_identity(network: str, job_id: str, agent_uri: str) -> IdentityRegistration:
    """Register an agent whose registration file is at `agent_uri`; the job's one transaction.

    Must run with no database transaction open. `NotYetMined`, then `NotYetConfirmed`, until the
    transaction has its confirmations; `TransactionReverted` when the contract refuses it (at
    estimation or mined); `ChainUnavailable` when the node does not answer or refuses to send it.
    """
    chain = current(ChainSettings).require_chain(network)
    w3, identity = _identity_registry(chain)
    call = identity.encode_abi("register", args=[agent_uri])
    receipt = relay_confirmed(w3, job_id, identity.address, call, step=IDENTITY_STEP)
    tx_hash = receipt.tx_hash
    registered = identity.events.Registered().process_receipt(receipt.raw, errors=DISCARD)  # other events
    if not registered:
        raise TransactionReverted(f"The transaction {receipt.tx_hash} registered no agent.")
    agent_id = int(registered[0]["args"]["agentId"])
    return IdentityRegistration(agent_id, chain.agent_registry_id, tx_hash, receipt.block_number)


def set_agent_uri(network: str, job_id: str, agent_id: int, agent_uri: str) -> Receipt:
    """Point the `tokenURI` of `agent_id` (the relayer owns the token) at `agent_uri`: the job's `IDENTITY_URI_STEP`.

    Must run with no database transaction open; raises as `register_identity`.
    """
    chain = current(ChainSettings).require_chain(network)
    w3, identity = _identity_registry(chain)
    call = identity.encode_abi("setAgentURI", args=[agent_id, agent_uri])
    return relay_confirmed(w3, job_id, identity.address, call, step=IDENTITY_URI_STEP)


def read_agent_uri(network: str, agent_id: int) -> str:
    """The `tokenURI` of `agent_id`, read with eth_call from the latest block.

    Raises `ChainNotConfigured` or `ChainUnavailable`; must be called with no transaction open.
    """
    chain = current(ChainSettings).require_chain(network)
    _w3, identity = _identity_registry(chain)
    return identity.functions.tokenURI(agent_id).call()
