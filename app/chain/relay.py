"""Relaying a job's transactions: one nonce per job step under the relayer's lock, kept going until mined.

A job's transaction at one step (`ChainTransaction`) is built in steps, each database write a
short unit of its own and every call to the node made with no transaction open:

1. the call is estimated (a call the contract would refuse raises `TransactionReverted` here,
   before a nonce is taken);
2. a nonce is taken from the relayer's locked `RelayerNonce` row (or the step's own, taken before);
3. the transaction is signed with it and the signed bytes and hash stored (its first version),
   then sent;
4. the receipt is read on the canonical chain: `NotYetMined` while there is none, `NotYetConfirmed`
   until it has `CHAIN_CONFIRMATIONS` blocks on top.

Run again (a retry, a redelivery, a worker killed at any step, beat's `chain.follow_transactions`),
the step is kept going from its stored state (`keep_sent`): mined on the canonical chain, nothing
is sent; dropped (a reorganisation, a node that lost it), its stored bytes are sent again as they
are; unmined `CHAIN_STUCK_SECONDS` after it was sent, or refused by the node for its fees, it is
replaced by a version with the same nonce and raised fees. Every version is kept
(`ChainTransactionVersion`) and any of a step's hashes finds the one mined; they share one nonce,
so the chain mines one transaction per step at most. A nonce that a transaction signed outside
Tessera spent (the relayer's key used elsewhere) ends the step with `NonceTakenElsewhere` once
that transaction has `CHAIN_CONFIRMATIONS` blocks on top: the job fails, its transaction can
never be mined.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from hexbytes import HexBytes
from sqlalchemy import select
from web3 import Web3
from web3.exceptions import BlockNotFound, ContractLogicError, TransactionNotFound, Web3RPCError
from web3.types import TxReceipt

from app.chain.errors import ChainUnavailable, NonceTakenElsewhere, NotYetConfirmed, NotYetMined, TransactionReverted
from app.chain.models import ChainTransaction, ChainTransactionVersion, RelayerNonce
from app.chain.rpc import connect
from app.chain.settings import TESTNET, ChainSettings
from app.chain.transactions import eip1559_fees
from app.db import Mode, as_utc, transaction, unit_of_work, utcnow
from app.extensions import db
from app.jobs.models import RUNNING, Job
from app.settings import current

log = logging.getLogger(__name__)

# How long a job whose transaction is mined waits before it counts the blocks on top again.
CONFIRMATION_POLL_SECONDS = 3.0
# How long a job whose transaction is not mined yet waits before it looks (and keeps it going) again.
MINED_POLL_SECONDS = 5.0
# How often a job waiting for its receipt asks the node, within `CHAIN_RPC_TIMEOUT`.
RECEIPT_POLL_SECONDS = 0.2
# What a node answers when the identical transaction is in its pool already or mined.
_ALREADY_SENT = ("already known", "nonce too low", "known transaction", "already imported")
# What a node answers when it wants higher fees for a transaction (a replacement's included).
_UNDERPRICED = ("underpriced", "fee too low", "less than block base fee", "fee cap less than")
# The networks whose chains beat follows transactions on (`ChainSettings.chain`).
_NETWORKS = (TESTNET, "production")


@dataclass(frozen=True)
class Receipt:
    """A confirmed receipt of a job's transaction: `tx_hash` is the version the chain mined."""

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


def _locked(job_id: str, step: str) -> ChainTransaction:
    return db.session.execute(
        select(ChainTransaction)
        .where(ChainTransaction.job_id == job_id, ChainTransaction.step == step)
        .with_for_update()
    ).scalar_one()


def _store_version(job_id: str, step: str, replaced: str | None, tx_hash: str, raw: str) -> tuple[str, str]:
    """Make a signed transaction the step's latest version unless another run stored one first; the
    latest version's hash and bytes.

    `replaced` is the version the new one replaces (None for the first). Two runs of one step (a
    worker past its lease and the next, a job and beat) sign with the same nonce; only the version
    stored first is sent, so the versions stay one chain of replacements.
    """
    with transaction():
        row = _locked(job_id, step)
        if row.tx_hash == replaced:
            row.tx_hash, row.raw_transaction, row.sent_at = tx_hash, raw, utcnow()
            db.session.add(
                ChainTransactionVersion(
                    tx_hash=tx_hash, job_id=job_id, step=step, raw_transaction=raw, created_at=row.sent_at
                )
            )
        return row.tx_hash, row.raw_transaction


def _send_raw(w3: Web3, raw: str) -> bool:
    """Send signed bytes; True once the node has them (or has mined them), False when it wants higher fees."""
    try:
        w3.eth.send_raw_transaction(raw)
    except Web3RPCError as error:
        answer = str(error).lower()
        if any(words in answer for words in _UNDERPRICED):
            return False
        if not any(words in answer for words in _ALREADY_SENT):
            raise ChainUnavailable(f"The chain node refused the transaction: {error}") from None
    return True


def _raised(value: int) -> int:
    """`value` raised by more than 12.5 %: what nodes ask of a replacement's fees (geth 10 %)."""
    return value + value // 8 + 1


def _fees(w3: Web3) -> dict[str, int]:
    """The fees of a transaction sent now, `maxFeePerGas` at most `CHAIN_MAX_FEE_PER_GAS`."""
    market = eip1559_fees(w3)
    fee = min(market["maxFeePerGas"], current(ChainSettings).max_fee_per_gas)
    return {"maxFeePerGas": fee, "maxPriorityFeePerGas": min(market["maxPriorityFeePerGas"], fee)}


def _replace(w3: Web3, relayer_key: bytes, row: ChainTransaction) -> tuple[str, str]:
    """Sign the step's latest version again with the same nonce and raised fees, and store it; the
    latest version's hash and bytes (another run's replacement, if it stored one first).

    `NotYetMined` when the raise would pass `CHAIN_MAX_FEE_PER_GAS`: the version sent waits.
    """
    old = TypedTransaction.from_bytes(HexBytes(row.raw_transaction)).as_dict()
    market = eip1559_fees(w3)
    tip = max(_raised(old["maxPriorityFeePerGas"]), market["maxPriorityFeePerGas"])
    fee = max(_raised(old["maxFeePerGas"]), market["maxFeePerGas"], tip)
    ceiling = current(ChainSettings).max_fee_per_gas
    if fee > ceiling:
        log.warning(
            "%s (nonce %d) waits: replacing it needs %d wei per gas, above the ceiling", row.tx_hash, row.nonce, fee
        )
        raise NotYetMined(
            f"{row.tx_hash} waits for fees to fall: replacing it needs {fee} wei per gas, "
            f"above CHAIN_MAX_FEE_PER_GAS ({ceiling})",
            MINED_POLL_SECONDS,
        )
    replacement = {
        **{name: old[name] for name in ("chainId", "nonce", "value", "data", "gas", "accessList")},
        "to": Web3.to_checksum_address(old["to"]),
        "type": 2,
        "maxFeePerGas": fee,
        "maxPriorityFeePerGas": tip,
    }
    signed = Account.sign_transaction(replacement, relayer_key)
    log.info("replacing %s (nonce %d) with fees %d/%d", row.tx_hash, row.nonce, fee, tip)
    return _store_version(
        row.job_id, row.step, row.tx_hash, signed.hash.to_0x_hex(), signed.raw_transaction.to_0x_hex()
    )


def _step_hashes(job_id: str, step: str) -> list[str]:
    """Every version's hash of the step: the one last seen mined first, then the newest first."""
    with unit_of_work(Mode.READ):
        row = db.session.get(ChainTransaction, (job_id, step))
        versions = db.session.scalars(
            select(ChainTransactionVersion.tx_hash)
            .where(ChainTransactionVersion.job_id == job_id, ChainTransactionVersion.step == step)
            .order_by(ChainTransactionVersion.created_at.desc())
        ).all()
        mined = [row.mined_tx_hash] if row is not None and row.mined_tx_hash else []
        return list(dict.fromkeys([*mined, *versions]))


def _hashes_sent_with(tx_hash: str) -> list[str]:
    """Every hash of the step that sent `tx_hash` (`tx_hash` alone if no step of Tessera's did)."""
    with unit_of_work(Mode.READ):
        version = db.session.get(ChainTransactionVersion, tx_hash)
        key = None if version is None else (version.job_id, version.step)
    return [tx_hash] if key is None else _step_hashes(*key)


def _canonical_receipt(w3: Web3, hashes: list[str]) -> TxReceipt | None:
    """The receipt of whichever of `hashes` is mined in a block of the canonical chain, or None."""
    for tx_hash in hashes:
        try:
            receipt = w3.eth.get_transaction_receipt(tx_hash)
            block = w3.eth.get_block(receipt["blockNumber"])
        except (TransactionNotFound, BlockNotFound):
            continue
        if block["hash"] == receipt["blockHash"]:  # not a receipt of a block a reorganisation dropped
            return receipt
    return None


def _stuck(row: ChainTransaction) -> bool:
    waited = utcnow() - as_utc(row.sent_at)
    return waited >= timedelta(seconds=current(ChainSettings).stuck_seconds)


def _nonce_used(w3: Web3, row: ChainTransaction, block: int | str = "latest") -> bool:
    """Whether the chain has mined, by `block`, a transaction of the relayer with the step's nonce."""
    address = row.account.split(":", 1)[1]
    return w3.eth.get_transaction_count(address, block) > row.nonce


def _nonce_settled(w3: Web3, row: ChainTransaction) -> bool:
    """Whether a transaction of the relayer with the step's nonce has `CHAIN_CONFIRMATIONS` blocks
    on top (at least one: a receipt may be served a moment after its block)."""
    settled = w3.eth.block_number - max(current(ChainSettings).confirmations, 1)
    return settled >= 0 and _nonce_used(w3, row, settled)


def keep_sent(w3: Web3, relayer_key: bytes, row: ChainTransaction) -> tuple[str, TxReceipt | None]:
    """Keep a step's signed transaction on its way; the hash to wait for and, once mined, its receipt.

    Must run with no database transaction open. Mined in a block of the canonical chain: nothing is
    sent. Its nonce spent by another transaction, settled: `NonceTakenElsewhere`. Otherwise the
    latest version is sent again as stored (a reorganisation dropped it, or the node lost it),
    unless it was sent `CHAIN_STUCK_SECONDS` ago or the node wants higher fees for it: then a
    replacement with the same nonce and raised fees is signed, stored, and sent.
    `ChainUnavailable` when the node refuses it otherwise.
    """
    hashes = _step_hashes(row.job_id, row.step)
    receipt = _canonical_receipt(w3, hashes)
    if receipt is not None:
        return receipt["transactionHash"].to_0x_hex(), receipt
    if _nonce_settled(w3, row):
        receipt = _canonical_receipt(w3, hashes)  # read again: mined after the first look
        if receipt is not None:
            return receipt["transactionHash"].to_0x_hex(), receipt
        raise NonceTakenElsewhere(
            f"Nonce {row.nonce} of the relayer was spent by a transaction signed outside Tessera; "
            f"{row.tx_hash} can never be mined."
        )
    if not _stuck(row) and _send_raw(w3, row.raw_transaction):
        return row.tx_hash, None
    if _nonce_used(w3, row):  # mined meanwhile, its receipt not served yet: a replacement could not be mined
        return row.tx_hash, None
    tx_hash, raw = _replace(w3, relayer_key, row)
    if not _send_raw(w3, raw):
        raise ChainUnavailable(f"The chain node wants higher fees than the replacement {tx_hash} offers.")
    return tx_hash, None


def send_once(w3: Web3, relayer_key: bytes, job_id: str, call: dict[str, Any], *, step: str = "") -> str:
    """Send `call` (`to`, `data`) for step `step` of job `job_id` with one nonce; the hash to wait for.

    Must run with no database transaction open. A step signed before is kept going (`keep_sent`):
    nothing new is sent once it is mined. A job relaying several transactions names each by its
    step, and sends them one after the other.
    """
    stored = _stored(job_id, step)
    if stored is not None and stored.raw_transaction is not None:
        return keep_sent(w3, relayer_key, stored)[0]
    sender, account = relayer_account(w3, relayer_key)
    full = {**call, "from": sender, "chainId": w3.eth.chain_id, "type": 2, **_fees(w3)}
    try:
        full["gas"] = w3.eth.estimate_gas(full)
    except ContractLogicError as error:
        if stored is not None:  # an earlier run took a nonce for the call: later transactions wait behind it
            _fill_nonce(w3, relayer_key, stored)
        raise TransactionReverted(f"The contract refuses the call: {error}.") from None
    full["nonce"] = _take_nonce(job_id, step, account, w3.eth.get_transaction_count(sender, "pending"))
    signed = Account.sign_transaction(full, relayer_key)
    tx_hash, raw = _store_version(job_id, step, None, signed.hash.to_0x_hex(), signed.raw_transaction.to_0x_hex())
    if not _send_raw(w3, raw):  # the fees went up since they were read: the next run replaces it
        raise NotYetMined(f"{tx_hash} was refused for its fees; it is replaced on the next run", MINED_POLL_SECONDS)
    return tx_hash


def _fill_nonce(w3: Web3, relayer_key: bytes, taken: ChainTransaction) -> None:
    """Spend the nonce a step took for a call the contract now refuses on a transfer of nothing to
    the relayer itself, stored as the step's transaction (sent once, as any other), so the
    relayer's later transactions are not left waiting behind an unused nonce."""
    sender = Account.from_key(relayer_key).address
    filler = {
        "to": sender,
        "value": 0,
        "gas": 21_000,
        "nonce": taken.nonce,
        "chainId": w3.eth.chain_id,
        "type": 2,
        **_fees(w3),
    }
    signed = Account.sign_transaction(filler, relayer_key)
    log.info("filling nonce %d of %s with a transfer to itself (its call was refused)", taken.nonce, sender)
    tx_hash, raw = _store_version(
        taken.job_id, taken.step, None, signed.hash.to_0x_hex(), signed.raw_transaction.to_0x_hex()
    )
    _send_raw(w3, raw)


def confirmed_receipt(w3: Web3, tx_hash: str) -> Receipt:
    """The receipt of the version of `tx_hash`'s step the chain mined, once it has `CHAIN_CONFIRMATIONS`
    blocks on top; `NotYetMined`, `NotYetConfirmed` before.

    Given any version's hash. Counts on the canonical chain only: a receipt whose block a
    reorganisation dropped is not mined. Waits at most `CHAIN_RPC_TIMEOUT` seconds for it to be
    mined (the job asks again later, and keeps its transaction going then).
    """
    hashes = _hashes_sent_with(tx_hash)
    deadline = time.monotonic() + current(ChainSettings).rpc_timeout
    while (receipt := _canonical_receipt(w3, hashes)) is None:
        if time.monotonic() >= deadline:
            raise NotYetMined(f"{tx_hash} is not mined yet", MINED_POLL_SECONDS)
        time.sleep(RECEIPT_POLL_SECONDS)
    confirmations = current(ChainSettings).confirmations
    on_top = w3.eth.block_number - receipt["blockNumber"]
    mined = receipt["transactionHash"].to_0x_hex()
    if on_top < confirmations:
        raise NotYetConfirmed(f"{mined} has {on_top} of {confirmations} blocks on top", CONFIRMATION_POLL_SECONDS)
    return Receipt(mined, int(receipt["status"]), int(receipt["blockNumber"]), list(receipt["logs"]), receipt)


def unconfirmed_steps() -> list[ChainTransaction]:
    """The signed steps of running jobs not confirmed yet, detached from the session. Reads only."""
    rows = db.session.scalars(
        select(ChainTransaction)
        .join(Job, Job.id == ChainTransaction.job_id)
        .where(
            Job.state == RUNNING,
            ChainTransaction.raw_transaction.is_not(None),
            ChainTransaction.confirmed_at.is_(None),
        )
    ).all()
    for row in rows:
        db.session.expunge(row)
    return list(rows)


def follow_step(w3: Web3, relayer_key: bytes, row: ChainTransaction) -> None:
    """Keep one step's transaction going (`keep_sent`, no transaction open), then record what the
    canonical chain has of it: the version mined, its block, and when it had its confirmations."""
    _, receipt = keep_sent(w3, relayer_key, row)
    on_top = None if receipt is None else w3.eth.block_number - receipt["blockNumber"]
    with transaction():
        locked = _locked(row.job_id, row.step)
        if receipt is None:
            locked.mined_tx_hash = locked.mined_block_number = locked.mined_block_hash = None
            return
        locked.mined_tx_hash = receipt["transactionHash"].to_0x_hex()
        locked.mined_block_number = int(receipt["blockNumber"])
        locked.mined_block_hash = receipt["blockHash"].to_0x_hex()
        if on_top >= current(ChainSettings).confirmations and locked.confirmed_at is None:
            locked.confirmed_at = utcnow()


def follow_sent_transactions() -> int:
    """Follow every unconfirmed step of a running job on its chain (`follow_step`); how many were followed.

    Each step is followed on the configured chain of its relayer row's chain id, with the relayer
    key that signed it; a node that does not answer leaves its steps to the next round.
    """
    settings = current(ChainSettings)
    with unit_of_work(Mode.READ):
        rows = unconfirmed_steps()
    if not rows or settings.relayer_key is None:
        return 0
    nodes = {
        chain.chain_id: chain.rpc_url
        for chain in (settings.chain(network) for network in _NETWORKS)
        if chain.chain_id is not None and chain.rpc_url is not None
    }
    relayer = Account.from_key(settings.relayer_key.secret).address
    followed = 0
    for row in rows:
        chain_id, address = row.account.split(":")
        if address != relayer or int(chain_id) not in nodes:
            continue
        try:
            follow_step(connect(nodes[int(chain_id)]), settings.relayer_key.secret, row)
        except ChainUnavailable as error:
            log.warning("transaction of job %s (%s) not followed: %s", row.job_id, row.step, error.detail)
            continue
        except NotYetMined:  # waits at the fee ceiling (logged where it was decided)
            continue
        except NonceTakenElsewhere as error:  # the job fails at its next run, which finds the same
            log.warning("transaction of job %s (%s) can never be mined: %s", row.job_id, row.step, error.detail)
            continue
        followed += 1
    return followed
