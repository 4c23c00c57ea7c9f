"""Relaying one job's transaction: one nonce per job under the relayer's lock, sent as signed once.

A job's transaction (`ChainTransaction`) is built in steps, each database write a short unit of
its own and every call to the node made with no transaction open:

1. the call is estimated (a call the contract would refuse raises `TransactionReverted` here,
   before a nonce is taken);
2. a nonce is taken from the relayer's locked `RelayerNonce` row (or the job's own, taken before);
3. the transaction is signed with it and the signed bytes and hash stored, then sent;
4. the receipt is read: `NotYetMined` while there is none, `NotYetConfirmed` until it has
   `CHAIN_CONFIRMATIONS` blocks on top.

Run again (a retry, a redelivery, a worker killed at any step), the job repeats from its stored
state: the same nonce, the same signed bytes, so the chain sees one transaction per job at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account
from sqlalchemy import select
from web3 import Web3
from web3.exceptions import ContractLogicError, TimeExhausted, TransactionNotFound, Web3RPCError

from app.chain.errors import ChainUnavailable, NotYetConfirmed, NotYetMined, TransactionReverted
from app.chain.models import ChainTransaction, RelayerNonce
from app.chain.settings import ChainSettings
from app.chain.transactions import eip1559_fees
from app.db import Mode, transaction, unit_of_work
from app.extensions import db
from app.settings import current

# How long a job whose transaction is mined waits before it counts the blocks on top again.
CONFIRMATION_POLL_SECONDS = 3.0
# What a node answers when the identical transaction is in its pool already or mined.
_ALREADY_SENT = ("already known", "nonce too low", "known transaction", "already imported")


@dataclass(frozen=True)
class Receipt:
    """A confirmed receipt of a job's transaction."""

    tx_hash: str
    status: int
    block_number: int
    logs: list[Any]
    raw: Any


def relayer_account(w3: Web3, relayer_key: bytes) -> tuple[str, str]:
    """The relayer's address and its nonce row's key `<chainId>:<address>`."""
    address = Account.from_key(relayer_key).address
    return address, f"{w3.eth.chain_id}:{address}"


def _stored(job_id: str, step: str) -> ChainTransaction | None:
    with unit_of_work(Mode.READ):
        row = db.session.get(ChainTransaction, (job_id, step))
        if row is not None:
            db.session.expunge(row)
        return row


def _take_nonce(job_id: str, step: str, account: str, chain_next: int) -> int:
    """The nonce of the job's step: the one it took before, else the next of the relayer's locked row.

    `chain_next` (the node's pending count) moves the row past nonces used outside Tessera.
    """
    with transaction():
        taken = db.session.get(ChainTransaction, (job_id, step))
        if taken is not None:
            return taken.nonce
        row = db.session.execute(
            select(RelayerNonce).where(RelayerNonce.account == account).with_for_update()
        ).scalar_one_or_none()
        if row is None:
            row = RelayerNonce(account=account, next_nonce=chain_next)
            db.session.add(row)
        nonce = max(row.next_nonce, chain_next)
        row.next_nonce = nonce + 1
        db.session.add(ChainTransaction(job_id=job_id, step=step, account=account, nonce=nonce))
        return nonce


def _store_signed(job_id: str, step: str, tx_hash: str, raw: str) -> tuple[str, str]:
    """Store the job's signed transaction unless a run of it stored one first; the stored one's hash and bytes.

    Two runs of one job (a worker past its lease and the next) sign with the same nonce; only the
    first signature stored is ever sent, so the hash the job waits for is the one the chain mines.
    """
    with transaction():
        row = db.session.execute(
            select(ChainTransaction)
            .where(ChainTransaction.job_id == job_id, ChainTransaction.step == step)
            .with_for_update()
        ).scalar_one()
        if row.raw_transaction is None:
            row.tx_hash, row.raw_transaction = tx_hash, raw
        return row.tx_hash, row.raw_transaction


def _send_raw(w3: Web3, raw: str) -> None:
    try:
        w3.eth.send_raw_transaction(raw)
    except Web3RPCError as error:
        if not any(words in str(error).lower() for words in _ALREADY_SENT):
            raise ChainUnavailable(f"The chain node refused the transaction: {error}") from None


def send_once(w3: Web3, relayer_key: bytes, job_id: str, call: dict[str, Any], *, step: str = "") -> str:
    """Send `call` (`to`, `data`) for step `step` of job `job_id` at most once; its transaction hash.

    Must run with no database transaction open. A job that signed before sends the same bytes again.
    A job relaying several transactions names each by its step, and sends them one after the other.
    """
    stored = _stored(job_id, step)
    if stored is not None and stored.raw_transaction is not None:
        _send_raw(w3, stored.raw_transaction)
        return stored.tx_hash
    sender, account = relayer_account(w3, relayer_key)
    full = {**call, "from": sender, "chainId": w3.eth.chain_id, "type": 2, **eip1559_fees(w3)}
    try:
        full["gas"] = w3.eth.estimate_gas(full)
    except ContractLogicError as error:
        raise TransactionReverted(f"The contract refuses the call: {error}.") from None
    full["nonce"] = _take_nonce(job_id, step, account, w3.eth.get_transaction_count(sender, "pending"))
    signed = Account.sign_transaction(full, relayer_key)
    tx_hash, raw = _store_signed(job_id, step, signed.hash.to_0x_hex(), signed.raw_transaction.to_0x_hex())
    _send_raw(w3, raw)
    return tx_hash


def confirmed_receipt(w3: Web3, tx_hash: str) -> Receipt:
    """The receipt of `tx_hash` with `CHAIN_CONFIRMATIONS` blocks on top; `NotYetMined`, `NotYetConfirmed` before.

    Waits at most `CHAIN_RPC_TIMEOUT` seconds for it to be mined (the job's retry asks again later).
    """
    try:
        receipt = w3.eth.wait_for_transaction_receipt(
            tx_hash, timeout=current(ChainSettings).rpc_timeout, poll_latency=0.2
        )
    except (TransactionNotFound, TimeExhausted) as error:
        raise NotYetMined(f"{tx_hash} is not mined yet: {error}") from None
    confirmations = current(ChainSettings).confirmations
    on_top = w3.eth.block_number - receipt["blockNumber"]
    if on_top < confirmations:
        raise NotYetConfirmed(f"{tx_hash} has {on_top} of {confirmations} blocks on top", CONFIRMATION_POLL_SECONDS)
    return Receipt(tx_hash, int(receipt["status"]), int(receipt["blockNumber"]), list(receipt["logs"]), receipt)
