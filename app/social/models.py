"""Social links (a user's proven account at a platform, its tokens and last good data)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, utcnow

PLATFORMS = ("platform_a", "platform_b", "platform_c")

LINKED, BROKEN = "linked", "broken"


class SocialLink(Base):
    """One user's account at one platform.

    `data` holds the platform's spec 2.5 members from the last successful fetch (kept when a later
    fetch fails). Tokens are encrypted (`app.security.encrypt`). `fetch_job_id` names the fetch job
    that owns the next refresh; while that job is not final, nobody starts another. No refresh
    starts before `next_fetch_at` (set when the platform refused the service's own configuration).
    """

    __tablename__ = "social_links"
    __table_args__ = (UniqueConstraint("user_id", "platform", name="uq_social_links_user_id_platform"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), index=True)
    platform: Mapped[str] = mapped_column(String(16))
    account_id: Mapped[str] = mapped_column(String(64))
    account_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default=LINKED)
    access_token_encrypted: Mapped[str | None] = mapped_column(Text, nullable=True)
    refresh_token_encrypted: Mapped[str | None] = mapped_column(Text, nullable=True)
    token_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    scope: Mapped[str] = mapped_column(String(255), default="")
    data: Mapped[dict | None] = mapped_column(JSONType, nullable=True)
    linked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_fetched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_attempted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True, index=True)
    last_error: Mapped[dict | None] = mapped_column(JSONType, nullable=True)
    fetch_job_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    next_fetch_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class SocialLinkAttempt(Base):
    """A started link flow, found again on the platform's callback by the hash of its `state`."""

    __tablename__ = "social_link_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state_hash: Mapped[str] = mapped_column(String(128), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"))
    platform: Mapped[str] = mapped_column(String(16))
    return_to: Mapped[str] = mapped_column(String(2048))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class OpenIdNonce(Base):
    """A `response_nonce` already accepted from the OpenID provider: a second use is a replay."""

    __tablename__ = "social_openid_nonces"

    nonce: Mapped[str] = mapped_column(String(255), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
