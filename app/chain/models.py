"""Tessera's index of the registry contract's events: each record as the chain has it, and how far
the index has read."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class IndexedRecord(Base):
    """A TesseraRegistry record as its confirmed events left it (`contract`: `<chainId>:<address>`)."""

    __tablename__ = "chain_registry_records"

    contract: Mapped[str] = mapped_column(String(80), primary_key=True)
    did: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent_address: Mapped[str] = mapped_column(String(42))
    owner_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    card_uri: Mapped[str] = mapped_column(Text, default="")
    block_number: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class IndexCursor(Base):
    """The first block of `contract` (`<chainId>:<address>`) the index has not read yet."""

    __tablename__ = "chain_registry_cursors"

    contract: Mapped[str] = mapped_column(String(80), primary_key=True)
    next_block: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RelayerNonce(Base):
    """The next nonce Tessera gives a transaction of relayer `account` (`<chainId>:<address>`).

    Taken under the row's lock, one per job (`ChainTransaction`), so two jobs never share one.
    """

    __tablename__ = "chain_relayer_nonces"

    account: Mapped[str] = mapped_column(String(80), primary_key=True)
    next_nonce: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChainTransaction(Base):
    """One transaction a job relays at its step `step` (a job may relay several, one per step): its
    nonce, then the signed bytes and hash of its latest version, sent again as they are.

    A version stuck unmined is replaced by one signed with the same nonce and higher fees (all
    versions are kept in `ChainTransactionVersion`); at most one of them is ever mined. The
    `mined_*` columns and `confirmed_at` are what the relay last saw of it on the canonical chain.
    """

    __tablename__ = "chain_job_transactions"

    job_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    step: Mapped[str] = mapped_column(String(40), primary_key=True, default="")
    account: Mapped[str] = mapped_column(String(80))
    nonce: Mapped[int] = mapped_column(BigInteger)
    tx_hash: Mapped[str | None] = mapped_column(String(66), nullable=True)
    raw_transaction: Mapped[str | None] = mapped_column(Text, nullable=True)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    mined_tx_hash: Mapped[str | None] = mapped_column(String(66), nullable=True)
    mined_block_number: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    mined_block_hash: Mapped[str | None] = mapped_column(String(66), nullable=True)
    confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChainTransactionVersion(Base):
    """One signed version of a job step's transaction (same nonce, its own fees), kept so that
    whichever version the chain mines is found by any of the step's hashes."""

    __tablename__ = "chain_transaction_versions"
    __table_args__ = (Index("ix_chain_transaction_versions_step", "job_id", "step"),)

    tx_hash: Mapped[str] = mapped_column(String(66), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(36))
    step: Mapped[str] = mapped_column(String(40))
    raw_transaction: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentIdentity(Base):
    """The ERC-8004 `agentId` a DID was given in identity registry `agent_registry` (`eip155:<chainId>:<address>`)."""

    __tablename__ = "chain_agent_identities"

    agent_registry: Mapped[str] = mapped_column(String(120), primary_key=True)
    did: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(78))
    tx_hash: Mapped[str] = mapped_column(String(66))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
