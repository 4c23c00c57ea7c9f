"""Chain tasks: beat follows the relayer's unconfirmed transactions (`AGENT_REGISTRY_BACKEND=evm` only)."""

from __future__ import annotations

from app.chain.settings import EVM, ChainSettings
from app.extensions import celery
from app.settings import current

# How often beat follows the transactions of running jobs on the chain.
FOLLOW_SECONDS = 5.0


@celery.task(name="chain.follow_transactions", ignore_result=True)
def follow_transactions() -> int:
    """Keep every unconfirmed transaction of a running job going and record what the chain has of it.

    Re-sends a dropped one, replaces a stuck one, records the version mined and its confirmations
    (`app.chain.relay.follow_sent_transactions`); the job's next run then finds the receipt.
    """
    from app.chain.relay import follow_sent_transactions  # web3 (about 1 s) loads only where a chain is used

    return follow_sent_transactions()


def beat_schedule(app) -> dict:
    if current(ChainSettings, app).registry_backend != EVM:
        return {}
    return {"chain-follow-transactions": {"task": "chain.follow_transactions", "schedule": FOLLOW_SECONDS}}
