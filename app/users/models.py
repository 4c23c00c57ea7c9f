"""The user: a profile created in one node of a client tree, with its own DID."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow


class User(Base):
    """A person known to a client tree; e-mail addresses are unique within the tree's root."""

    __tablename__ = "users"
    __table_args__ = (
        UniqueConstraint("root_client_id", "email_address", name="uq_users_root_client_id_email_address"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    root_client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    email_address: Mapped[str] = mapped_column(String(254), index=True)
    did: Mapped[str] = mapped_column(String(128), unique=True)
    profile: Mapped[dict] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Set by an operator: the user can no longer sign in and their tokens stop working.
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Access tokens issued at or before this time are refused, even once the user is enabled again.
    tokens_valid_after: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
