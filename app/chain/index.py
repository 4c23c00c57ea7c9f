"""Tessera's index of TesseraRegistry's events, followed block by block for fast reads.

Reading the chain and writing the index are separate steps, because no call to the node may run
inside a database transaction: `read_registry_events` (no transaction open) reads the confirmed
blocks from the index's cursor on (`CHAIN_CONFIRMATIONS` below the head, so a reorganisation of
the newest blocks never reaches the index); `apply_registry_events` (in the caller's unit of work,
flushing only) applies them and moves the cursor, unless another follower already did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update

from app.chain.models import IndexCursor, IndexedRecord
from app.chain.settings import Chain, ChainSettings
from app.db import utcnow
from app.extensions import db
from app.settings import current

# Blocks read per `eth_getLogs` call: public nodes refuse wider ranges.
MAX_BLOCK_RANGE = 2000
EVENTS = ("Registered", "CardSet", "OwnerSet", "Deregistered")
ZERO_ADDRESS = "0x" + "00" * 20


@dataclass(frozen=True)
class RegistryEvent:
    name: str
    args: dict[str, Any]
    block_number: int


@dataclass(frozen=True)
class EventBatch:
    """The events of blocks `from_block`..`to_block` of one registry, in chain order."""

    contract: str
    from_block: int
    to_block: int
    events: list[RegistryEvent]


def registry_key(chain: Chain) -> str:
    """The index's name of a chain's registry: `<chainId>:<address>`."""
    return f"{chain.chain_id}:{chain.registry_address}"


def next_block(network: str) -> int:
    """The first block the index of `network`'s registry has not read."""
    key = registry_key(current(ChainSettings).require_chain(network))
    return db.session.scalar(select(IndexCursor.next_block).where(IndexCursor.contract == key)) or 0


def read_registry_events(network: str, from_block: int) -> EventBatch:
    """The registry's events of the confirmed blocks from `from_block` on (at most `MAX_BLOCK_RANGE`).

    Must be called with no transaction open; raises `ChainNotConfigured` or `ChainUnavailable`.
    """
    # web3 costs every process seconds of imports; only a network on a chain pays them.
    from app.chain.registry import registry_contract
    from app.chain.rpc import connect

    chain = current(ChainSettings).require_chain(network)
    w3 = connect(chain.rpc_url)
    confirmed = w3.eth.block_number - current(ChainSettings).confirmations
    to_block = min(confirmed, from_block + MAX_BLOCK_RANGE - 1)
    if to_block < from_block:
        return EventBatch(registry_key(chain), from_block, from_block - 1, [])
    contract = registry_contract(w3, chain.registry_address)
    decoders = {event.topic: event for event in (contract.events[name]() for name in EVENTS)}
    logs = w3.eth.get_logs({"address": chain.registry_address, "fromBlock": from_block, "toBlock": to_block})
    events = []
    for log in logs:
        decoder = decoders.get(log["topics"][0].to_0x_hex() if log["topics"] else None)
        if decoder is not None:
            decoded = decoder.process_log(log)
            events.append(RegistryEvent(decoded.event, dict(decoded.args), decoded.blockNumber))
    return EventBatch(registry_key(chain), from_block, to_block, events)


def apply_registry_events(batch: EventBatch) -> int:
    """Apply `batch` to the index and move its cursor past it; the number of events applied.

    Nothing is applied (0) when the cursor is no longer at `batch.from_block`: another follower
    got there first. Flushes, never commits.
    """
    cursor = db.session.get(IndexCursor, batch.contract, with_for_update=True)
    if cursor is None:
        cursor = IndexCursor(contract=batch.contract, next_block=0)
        db.session.add(cursor)
    if cursor.next_block != batch.from_block or batch.to_block < batch.from_block:
        return 0
    for event in batch.events:
        _apply(batch.contract, event)
    cursor.next_block = batch.to_block + 1
    cursor.updated_at = utcnow()
    db.session.flush()
    return len(batch.events)


def _apply(contract: str, event: RegistryEvent) -> None:
    did = event.args["did"]
    where = (IndexedRecord.contract == contract, IndexedRecord.did == did)
    if event.name == "Registered":
        db.session.execute(delete(IndexedRecord).where(*where))
        owner = event.args["owner"]
        db.session.add(
            IndexedRecord(
                contract=contract,
                did=did,
                agent_address=event.args["agent"],
                owner_address=None if owner == ZERO_ADDRESS else owner,
                card_uri=event.args["cardURI"],
                block_number=event.block_number,
                updated_at=utcnow(),
            )
        )
        db.session.flush()
    elif event.name == "Deregistered":
        db.session.execute(delete(IndexedRecord).where(*where))
    else:
        values = (
            {"card_uri": event.args["cardURI"]}
            if event.name == "CardSet"
            else {"owner_address": None if event.args["owner"] == ZERO_ADDRESS else event.args["owner"]}
        )
        db.session.execute(
            update(IndexedRecord)
            .where(*where)
            .values(**values, block_number=event.block_number, updated_at=utcnow())
            .execution_options(synchronize_session=False)
        )


def get_indexed_record(network: str, did: str) -> IndexedRecord | None:
    """The record of `did` in the index of `network`'s registry; None when it has none."""
    return db.session.get(IndexedRecord, (registry_key(current(ChainSettings).require_chain(network)), did))
