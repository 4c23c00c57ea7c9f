"""ERC-8004 identity of hosted agents: `register(agentURI)` in the IdentityRegistry, relayed once per job."""

from __future__ import annotations

from dataclasses import dataclass

from web3.logs import DISCARD

from app.chain.abi import IDENTITY_REGISTRY, load_artifact
from app.chain.errors import ChainNotConfigured, TransactionReverted
from app.chain.relay import confirmed_receipt, send_once
from app.chain.rpc import connect
from app.chain.settings import ChainSettings
from app.settings import current

# The step of a job's transactions that registers the agent's identity (`app.chain.relay`).
IDENTITY_STEP = "identity"


@dataclass(frozen=True)
class IdentityRegistration:
    """A confirmed `register(agentURI)`: the new `agentId` and where it lives."""

    agent_id: int
    agent_registry: str
    tx_hash: str
    block_number: int


def register_identity(network: str, job_id: str, agent_uri: str) -> IdentityRegistration:
    """Register an agent whose registration file is at `agent_uri`; the job's one transaction.

    Must run with no database transaction open. `NotYetMined`, then `NotYetConfirmed`, until the
    transaction has its confirmations; `TransactionReverted` when the contract refuses it (at
    estimation or mined); `ChainUnavailable` when the node does not answer or refuses to send it.
    """
    settings = current(ChainSettings)
    chain = settings.require_chain(network)
    if settings.relayer_key is None:
        raise ChainNotConfigured("Set CHAIN_RELAYER_KEY.")
    w3 = connect(chain.rpc_url)
    identity = w3.eth.contract(address=chain.identity_registry_address, abi=load_artifact(IDENTITY_REGISTRY).abi)
    call = identity.encode_abi("register", args=[agent_uri])
    tx_hash = send_once(
        w3, settings.relayer_key.secret, job_id, {"to": identity.address, "data": call}, step=IDENTITY_STEP
    )
    receipt = confirmed_receipt(w3, tx_hash)  # of the version mined, if a stuck one was replaced
    if receipt.status != 1:
        raise TransactionReverted(
            f"The registration transaction {receipt.tx_hash} reverted (block {receipt.block_number})."
        )
    registered = identity.events.Registered().process_receipt(receipt.raw, errors=DISCARD)  # other events
    if not registered:
        raise TransactionReverted(f"The transaction {receipt.tx_hash} registered no agent.")
    agent_id = int(registered[0]["args"]["agentId"])
    return IdentityRegistration(agent_id, chain.agent_registry_id, receipt.tx_hash, receipt.block_number)
