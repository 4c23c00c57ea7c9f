"""Operator commands for users: `flask users disable` and `flask users enable`."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.db import isoformat, transaction
from app.errors import DomainError
from app.users import service

users_cli = AppGroup("users", help="Users of the client trees.")


@users_cli.command("disable")
@click.argument("reference", metavar="USER")
def disable_user(reference: str) -> None:
    """Disable a user (by id, or by an e-mail address only one tree has): sign-in is refused, their
    refresh and access tokens stop working for good, and their sign-in sessions end with back-channel
    logouts."""
    try:
        with transaction():
            user = service.require_user_by_reference(reference)
            changed, ended = service.disable_user(user)
            user_id, disabled_at = user.id, isoformat(user.disabled_at)
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    state = "Disabled" if changed else "Already disabled"
    click.echo(f"{state} user {user_id} (since {disabled_at}); {ended} sign-in session(s) ended.")


@users_cli.command("enable")
@click.argument("reference", metavar="USER")
def enable_user(reference: str) -> None:
    """Let a disabled user (by id, or by an e-mail address only one tree has) sign in again; the tokens
    and sessions the disable ended stay ended."""
    try:
        with transaction():
            user = service.require_user_by_reference(reference)
            changed = service.enable_user(user)
            user_id = user.id
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    click.echo(f"{'Enabled' if changed else 'Not disabled'}: user {user_id} may sign in.")
