"""A user's passkeys: WebAuthn public-key credentials registered with this service's RP id."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow


class Passkey(Base):
    """One credential: its id (base64url), COSE public key and the last signature counter seen."""

    __tablename__ = "passkeys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # WebAuthn allows ids up to 1023 bytes: 1364 base64url characters.
    credential_id: Mapped[str] = mapped_column(String(1366), unique=True)
    public_key: Mapped[bytes] = mapped_column(LargeBinary)
    sign_count: Mapped[int] = mapped_column(Integer, default=0)
    aaguid: Mapped[str] = mapped_column(String(36))
    # A credential that may be synced to other devices is software-held (`swk`), else hardware (`hwk`).
    backup_eligible: Mapped[bool] = mapped_column(Boolean, default=False)
    transports: Mapped[list] = mapped_column(JSONType, default=list)
    name: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
