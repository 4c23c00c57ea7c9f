"""Stored credentials, the status lists the service hosts, and the service's issuer key."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow

PENDING, VERIFIED, FAILED = "pending", "verified", "failed"
REVOCATION, SUSPENSION = "revocation", "suspension"
ACTIVE, REVOKED, SUSPENDED = "active", "revoked", "suspended"


class StoredCredential(Base):
    """A verifiable credential stored by a client for one of its users, kept byte for byte.

    `vc_json` is the exact JSON text the client sent; `cid` is computed over its RFC 8785 form.
    One record per (client, cid): storing the same credential again finds this record.
    `valid_until` (from `validUntil`) keeps expired credentials out of the user's list;
    `foreign_status` marks credentials whose status lists others host, re-checked periodically.
    """

    __tablename__ = "stored_credentials"
    __table_args__ = (
        UniqueConstraint("client_id", "cid", name="uq_stored_credentials_client_id_cid"),
        Index("ix_stored_credentials_user_state_created", "user_id", "verification_state", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cid: Mapped[str] = mapped_column(String(80), index=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    user_id: Mapped[int] = mapped_column(Integer)
    subject_did: Mapped[str] = mapped_column(String(255))
    vc_json: Mapped[str] = mapped_column(Text)
    valid_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    foreign_status: Mapped[bool] = mapped_column(Boolean, default=False)
    verification_state: Mapped[str] = mapped_column(String(16), default=PENDING)
    verification_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    verification_errors: Mapped[list | None] = mapped_column(JSONType, nullable=True)
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StatusList(Base):
    """A Bitstring Status List hosted by the service; its bits live in `StatusEntry` rows.

    `credential_json` is the signed `BitstringStatusListCredential` as served, re-signed in the
    same transaction as every change of one of its entries.
    """

    __tablename__ = "status_lists"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    purpose: Mapped[str] = mapped_column(String(16), index=True)
    size: Mapped[int] = mapped_column(Integer)
    credential_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    signed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StatusEntry(Base):
    """One allocated index of a status list, owned by the client that asked for it."""

    __tablename__ = "status_entries"
    __table_args__ = (UniqueConstraint("list_id", "list_index", name="uq_status_entries_list_id_list_index"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    list_id: Mapped[str] = mapped_column(ForeignKey("status_lists.id"), index=True)
    list_index: Mapped[int] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(16))
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default=ACTIVE)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CredentialStatusLink(Base):
    """A stored credential whose `credentialStatus` names one of the service's entries.

    A change of the entry re-checks every credential linked to it.
    """

    __tablename__ = "credential_status_links"

    credential_id: Mapped[int] = mapped_column(ForeignKey("stored_credentials.id"), primary_key=True)
    entry_id: Mapped[str] = mapped_column(ForeignKey("status_entries.id"), primary_key=True, index=True)


class IssuerKey(Base):
    """The service's Ed25519 signing key for status list credentials; its DID is a did:key.

    The private key is stored encrypted (`app.security.encrypt`, purpose `credentials.issuer_key`).
    """

    __tablename__ = "credential_issuer_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    did: Mapped[str] = mapped_column(String(128), unique=True)
    private_key_encrypted: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
