"""A job's write to a contract, relayed once (`app.chain.relay`) and read back once confirmed.

Every function here must run with no database transaction open (a job's `CallOutside`).
"""

from __future__ import annotations

from web3 import Web3

from app.chain.errors import ChainNotConfigured, TransactionReverted
from app.chain.relay import Receipt, confirmed_receipt, send_once
from app.chain.settings import ChainSettings
from app.settings import current


def relayer_key() -> bytes:
    """The relayer's private key; `ChainNotConfigured` when `CHAIN_RELAYER_KEY` is not set."""
    key = current(ChainSettings).relayer_key
    if key is None:
        raise ChainNotConfigured("Set CHAIN_RELAYER_KEY.")
    return key.secret


def relay_confirmed(w3: Web3, job_id: str, to: str, data: str, *, step: str) -> Receipt:
    """Send the call (`to`, `data`) as step `step` of job `job_id` at most once; its confirmed, successful receipt.

    `NotYetMined`, then `NotYetConfirmed`, until it has its confirmations; `TransactionReverted` when
    the contract refuses it (at estimation, nothing sent, or mined with status 0); `ChainUnavailable`
    when the node does not answer or refuses to send it.
    """
    tx_hash = send_once(w3, relayer_key(), job_id, {"to": to, "data": data}, step=step)
    receipt = confirmed_receipt(w3, tx_hash)  # of the version mined, if a stuck one was replaced
    if receipt.status != 1:
        raise TransactionReverted(f"The transaction {receipt.tx_hash} reverted (block {receipt.block_number}).")
    return receipt
