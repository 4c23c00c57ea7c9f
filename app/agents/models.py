"""Agent network state: accounts bound to keys, sessions, credits, cards, registry, consents."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

AGENT, ORGANISATION = "agent", "organisation"
PENDING, APPROVED, REVOKED = "pending", "approved", "revoked"


class AgentAccount(Base):
    """One secp256k1 key (by address) on the network; its DID is assigned at first authentication.

    ``balance`` is the sum of the account's ledger entries, kept on the row so a charge is one
    conditional update; ``deactivated_at`` is set by deregistration and never cleared.
    """

    __tablename__ = "agent_accounts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    address: Mapped[str] = mapped_column(String(42), unique=True)
    did: Mapped[str | None] = mapped_column(String(128), unique=True, nullable=True)
    kind: Mapped[str] = mapped_column(String(16), default=AGENT)
    balance: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    did_bound_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    deactivated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    @property
    def deactivated(self) -> bool:
        """Whether the account's DID was deregistered."""
        return self.deactivated_at is not None


class AuthChallenge(Base):
    """An EIP-4361 message issued to an address; its nonce is spent by one successful verify."""

    __tablename__ = "agent_auth_challenges"

    nonce: Mapped[str] = mapped_column(String(64), primary_key=True)
    address: Mapped[str] = mapped_column(String(42), index=True)
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class AgentSession(Base):
    """A short-lived bearer session; only the keyed hash of its token is stored."""

    __tablename__ = "agent_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("agent_accounts.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SpentClaimToken(Base):
    """A claim form token already used: its keyed hash, so a replayed form post is refused."""

    __tablename__ = "agent_spent_claim_tokens"

    token_hash: Mapped[str] = mapped_column(String(128), primary_key=True)
    spent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class CreditEntry(Base):
    """One movement on an account's credit ledger (grants positive, charges negative or zero)."""

    __tablename__ = "agent_credit_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("agent_accounts.id"), index=True)
    amount: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(64))
    subject_did: Mapped[str | None] = mapped_column(String(128), nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    balance_after: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CreditHold(Base):
    """Credits set aside for an accepted job: its success charges them, its failure releases them.

    A hold counts against the account only while its job is queued or running; the job's
    charge deletes it in the transaction that finishes the job.
    """

    __tablename__ = "agent_credit_holds"

    job_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("agent_accounts.id"), index=True)
    amount: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PrivateCard(Base):
    """The card as hosted, stored privately under the DID (exact bytes)."""

    __tablename__ = "agent_private_cards"

    did: Mapped[str] = mapped_column(String(128), primary_key=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    etag: Mapped[str] = mapped_column(String(80))
    hosted_by_did: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str] = mapped_column(String(36))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PublicCard(Base):
    """The published copy served at ``/api/agent-card/<did>`` (the same bytes as the private card)."""

    __tablename__ = "agent_public_cards"

    did: Mapped[str] = mapped_column(String(128), primary_key=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    etag: Mapped[str] = mapped_column(String(80))
    job_id: Mapped[str] = mapped_column(String(36))
    published_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RegistryRecord(Base):
    """The agent's registry entry: created by its first registry write, removed by deregistration."""

    __tablename__ = "agent_registry_records"

    did: Mapped[str] = mapped_column(String(128), primary_key=True)
    address: Mapped[str] = mapped_column(String(42))
    owner_did: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    card_uri: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Consent(Base):
    """An organisation's request to own an agent, approved by the agent's signature.

    An approved consent becomes ``revoked`` when the agent revokes its owner or the owner
    organisation is deregistered.
    """

    __tablename__ = "agent_consents"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner_did: Mapped[str] = mapped_column(String(128), index=True)
    agent_did: Mapped[str] = mapped_column(String(128), index=True)
    message: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default=PENDING)
    signature: Mapped[str | None] = mapped_column(String(132), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    approved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # With AGENT_REGISTRY_BACKEND=evm: the organisation's EIP-712 signature naming itself owner on
    # chain (`SetOwner`, or `Register` while the DID has no record there) and that typed data's deadline.
    registry_signature: Mapped[str | None] = mapped_column(String(132), nullable=True)
    registry_deadline: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
