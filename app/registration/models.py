"""Rows of dynamic client registration: initial access tokens, registered clients, and what each
registering client lets its registrations ask for.

Both bearer values (the initial access token and the registration access token) are stored only as
keyed hashes (`app.security.hash_secret`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow


class InitialAccessToken(Base):
    """Lets its holder register sub-clients of one master client until it expires or is revoked."""

    __tablename__ = "registration_initial_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class RegisteredClient(Base):
    """A client created by registration: its registration access token and the metadata only it keeps."""

    __tablename__ = "registered_clients"

    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), primary_key=True)
    initial_token_id: Mapped[int | None] = mapped_column(
        ForeignKey("registration_initial_tokens.id", ondelete="SET NULL"), nullable=True
    )
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    # What the client table does not hold (application_type), as registered.
    extra_metadata: Mapped[dict] = mapped_column(JSONType, default=dict)
    issued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RegistrationPolicy(Base):
    """What the clients registered under one client's initial access tokens may ask for: the scopes
    their `client_credentials` grant may be given. No row: none."""

    __tablename__ = "registration_policies"

    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id", ondelete="CASCADE"), primary_key=True)
    client_credentials_scopes: Mapped[list] = mapped_column(JSONType, default=list)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
