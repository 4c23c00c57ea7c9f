"""Issuer keys of clients: the keys a client signs credentials with, published in its did:web."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

KEY_ACTIVE, KEY_RETIRED = "active", "retired"


class ClientIssuerKey(Base):
    """A signing key of one client (Ed25519, P-256, P-384 or Bls12381G2).

    The private key is stored encrypted (`app.security.encrypt`, purpose `issuer.client_key`).
    `active` keys sign; a `retired` key signs nothing more but stays in the client's DID
    document, so credentials it signed keep verifying. `replaced_by` names the key a rotation
    made in its place.
    """

    __tablename__ = "client_issuer_keys"
    __table_args__ = (Index("ix_client_issuer_keys_client_state", "client_id", "state"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    key_type: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default=KEY_ACTIVE)
    public_key_multibase: Mapped[str] = mapped_column(String(255))
    private_key_encrypted: Mapped[str] = mapped_column(Text)
    replaced_by: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
