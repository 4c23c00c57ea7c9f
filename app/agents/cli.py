"""Operator commands of the agent network: ``flask agents ...``."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.agents import accounts, credits
from app.db import transaction
from app.errors import DomainError

agents_cli = AppGroup("agents", help="Agent network accounts and credits.")


def _fail(error: DomainError) -> click.ClickException:
    details = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in (error.errors or {}).items())
    return click.ClickException(details or error.detail)


@agents_cli.command("grant-credits")
@click.argument("address")
@click.argument("amount", type=int)
@click.option("--reason", default="operator-grant", show_default=True, help="Ledger entry reason.")
def grant_credits(address: str, amount: int, reason: str) -> None:
    """Add AMOUNT credits to the account of ADDRESS (the account is created if new)."""
    try:
        with transaction():
            account = credits.grant_credits(address, amount, reason)
            click.echo(f"{account.address}: balance {account.balance} credits")
    except DomainError as error:
        raise _fail(error) from error


@agents_cli.command("set-kind")
@click.argument("address")
@click.argument("kind", type=click.Choice(["agent", "organisation"]))
def set_kind(address: str, kind: str) -> None:
    """Make the account of ADDRESS an agent or an organisation (created if new)."""
    try:
        with transaction():
            account = accounts.set_account_kind(address, kind)
            click.echo(f"{account.address}: {account.kind}")
    except DomainError as error:
        raise _fail(error) from error
