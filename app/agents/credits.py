"""Credits of the agent network: the price list, the ledger, holds of paid jobs, the testnet claim.

An accepted paid job holds its price (``CreditHold``) from the moment it is accepted: the job's
success turns the hold into the charge, and a failed job's hold no longer counts, so a ``202``
always means the job can pay. Services flush but never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from app.agents import ethereum
from app.agents.accounts import checked_address, dialect_insert, lock_account, lock_or_create_account, start_job
from app.agents.errors import ClaimUnavailable, InsufficientCredits
from app.agents.models import (
    AGENT,
    ORGANISATION,
    AgentAccount,
    AgentSession,
    AuthChallenge,
    CreditEntry,
    CreditHold,
    SpentClaimToken,
)
from app.agents.settings import AgentSettings
from app.db import utcnow
from app.errors import ValidationFailed
from app.extensions import db
from app.jobs.models import FAILED, QUEUED, RUNNING, SUCCEEDED, Job
from app.security import hash_secret
from app.settings import current


def prices() -> dict[str, int]:
    """The price list in credits (``AGENT_PRICES`` overrides single entries)."""
    return current(AgentSettings).prices


def claim_grant() -> int:
    """The credits a claimed key receives; ``ClaimUnavailable`` (404) outside a testnet."""
    settings = current(AgentSettings)
    if not settings.is_testnet:
        raise ClaimUnavailable("The claim page exists only on a testnet.")
    return settings.claim_credits


def spend_claim_token(token: str, issued_at: datetime) -> bool:
    """Use a claim form token once: False if it was used before or is older than its lifetime.

    The token lives in the browser's signed session cookie, which a replay can send again;
    the hash of each spent token is kept until the token would have expired anyway.
    """
    now = utcnow()
    if not token or not now - current(AgentSettings).claim_form_lifetime <= issued_at <= now:
        return False
    spent = db.session.execute(
        dialect_insert()(SpentClaimToken.__table__)
        .values(token_hash=hash_secret(token), spent_at=now)
        .on_conflict_do_nothing(index_elements=[SpentClaimToken.token_hash])
        .returning(SpentClaimToken.token_hash)
    )
    return spent.first() is not None


def claim_key(kind: str = AGENT) -> tuple[str, AgentAccount]:
    """Issue a fresh key with the testnet grant of credits; return (private key hex, account).

    The key is returned once and never stored. Raises ``ClaimUnavailable`` (404) outside a
    testnet and ``ValidationFailed`` for an unknown kind.
    """
    grant = claim_grant()
    if kind not in (AGENT, ORGANISATION):
        raise ValidationFailed(errors={"kind": ["Must be agent or organisation."]})
    private_key = ethereum.generate_private_key()
    account = AgentAccount(
        address=ethereum.address_from_private_key(private_key), kind=kind, balance=0, created_at=utcnow()
    )
    db.session.add(account)
    db.session.flush()
    _add_entry(account, grant, "testnet-claim")
    return private_key, account


def grant_credits(address: str, amount: int, reason: str = "operator-grant") -> AgentAccount:
    """Credit an account (created for the address if new); for operators. Raises ``ValidationFailed``."""
    if amount <= 0:
        raise ValidationFailed(errors={"amount": ["Must be a positive number of credits."]})
    account = lock_or_create_account(checked_address(address))
    _add_entry(account, amount, reason)
    return account


def _add_entry(
    account: AgentAccount, amount: int, reason: str, *, subject_did: str | None = None, job_id: str | None = None
) -> CreditEntry:
    account.balance += amount
    entry = CreditEntry(
        account_id=account.id,
        amount=amount,
        reason=reason,
        subject_did=subject_did,
        job_id=job_id,
        balance_after=account.balance,
        created_at=utcnow(),
    )
    db.session.add(entry)
    db.session.flush()
    return entry


def held_credits(account_id: int) -> int:
    """The credits held for the account's accepted jobs that have not finished yet."""
    return db.session.scalar(
        select(func.coalesce(func.sum(CreditHold.amount), 0))
        .join(Job, Job.id == CreditHold.job_id)
        .where(CreditHold.account_id == account_id, Job.state.in_((QUEUED, RUNNING)))
    )


def start_paid_job(kind: str, operation: str, caller: AgentAccount, target: AgentAccount, **payload: Any) -> Job:
    """Start a job that ``caller`` pays for, holding its price; ``InsufficientCredits`` (402) otherwise.

    The caller's row stays locked until the request commits, so concurrent requests of one
    account reserve one after the other and never promise the same credits twice.
    """
    price = prices()[operation]
    payer = lock_account(caller.id)
    available = payer.balance - held_credits(payer.id)
    if available < price:
        raise InsufficientCredits(price, available)
    job = start_job(kind, caller, target, **payload)
    if price:
        db.session.add(CreditHold(job_id=job.id, account_id=payer.id, amount=price, created_at=utcnow()))
        db.session.flush()
    return job


def charge(payer: AgentAccount, operation: str, subject_did: str, job_id: str) -> int:
    """Turn the job's hold into a debit of ``payer`` (already locked); raises ``InsufficientCredits``.

    The hold's amount is the price the request was accepted at; jobs accepted before holds
    existed pay the current price if the balance allows.
    """
    hold = db.session.get(CreditHold, job_id)
    price = hold.amount if hold is not None else prices()[operation]
    if payer.balance < price:
        raise InsufficientCredits(price, payer.balance)
    if hold is not None:
        db.session.delete(hold)
    _add_entry(payer, -price, operation, subject_did=subject_did, job_id=job_id)
    return price


@dataclass(frozen=True)
class Ledger:
    """An account with its newest ledger entries, newest first."""

    account: AgentAccount
    entries: Sequence[CreditEntry]


def get_ledger(account: AgentAccount, limit: int = 100) -> Ledger:
    """The balance and the newest ledger entries of an account."""
    entries = db.session.execute(
        select(CreditEntry).where(CreditEntry.account_id == account.id).order_by(CreditEntry.id.desc()).limit(limit)
    ).scalars()
    return Ledger(account, entries.all())


def purge_expired() -> int:
    """Delete expired sign-in challenges, sessions and spent claim tokens and the holds of finished
    jobs; returns how many rows went. Flushes only."""
    now = utcnow()
    removed = db.session.execute(delete(AuthChallenge).where(AuthChallenge.expires_at < now)).rowcount
    removed += db.session.execute(delete(AgentSession).where(AgentSession.expires_at < now)).rowcount
    removed += db.session.execute(
        delete(SpentClaimToken).where(SpentClaimToken.spent_at < now - current(AgentSettings).claim_form_lifetime)
    ).rowcount
    finished = select(Job.id).where(Job.state.in_((SUCCEEDED, FAILED)))
    removed += db.session.execute(delete(CreditHold).where(CreditHold.job_id.in_(finished))).rowcount
    return removed
