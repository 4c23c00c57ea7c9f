"""Tessera's index of the registry contract's events: each record as the chain has it, and how far
the index has read."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, String, Text
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
