"""Operator commands of the social feature: which linked platforms sign users of a tree in."""

from __future__ import annotations

import click

from app.db import transaction
from app.errors import DomainError
from app.social import sign_in
from app.social.models import PLATFORMS


@click.command("set-linked-sign-in")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    type=click.Choice(PLATFORMS),
    help="A platform whose linked accounts sign users in (repeat for several; none turns it off). "
    "platform_a is Steam, platform_b Discord, platform_c Twitch.",
)
@click.option(
    "--sign-up/--no-sign-up",
    default=False,
    show_default=True,
    help="Whether a first sign-in with a platform account that gives a verified e-mail address "
    "(platform_b) may create an account.",
)
def set_linked_sign_in(client_id: int, platforms: tuple[str, ...], sign_up: bool) -> None:
    """Let users of a master client's tree (and its sub-clients) sign in with their linked accounts."""
    try:
        with transaction():
            client = sign_in.set_linked_sign_in(client_id, platforms, sign_up)
            chosen = client.linked_sign_in or "none"
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    click.echo(
        f"Linked-account sign-in of client {client_id} and its sub-clients: {chosen}; "
        f"sign-up {'allowed' if sign_up else 'not allowed'}."
    )
