"""Operator commands for the signing keys: `flask keys list|rotate|purge`."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.db import isoformat, transaction
from app.oidc import keys

keys_cli = AppGroup("keys", help="OpenID token signing keys.")


@keys_cli.command("rotate")
@click.option(
    "--alg",
    "algs",
    multiple=True,
    type=click.Choice(keys.ALGORITHMS),
    help="Rotate only this algorithm (repeatable; default all).",
)
def rotate(algs: tuple[str, ...]) -> None:
    """Retire the active keys, promote the published next keys and publish new next keys."""
    with transaction():
        keys.ensure_keys()
        activated = keys.rotate_keys(algs or keys.ALGORITHMS)
    for kid in activated:
        click.echo(f"active: {kid}")


@keys_cli.command("list")
def list_keys() -> None:
    """Show every stored key with its state."""
    with transaction():
        for key in keys.list_keys():
            until = f" published until {isoformat(key.publish_until)}" if key.publish_until else ""
            click.echo(f"{key.kid}  {key.alg}  {key.state}  created {isoformat(key.created_at)}{until}")


@keys_cli.command("purge")
def purge() -> None:
    """Delete retired keys that no unexpired token can need."""
    with transaction():
        click.echo(f"deleted {keys.purge_retired_keys()} key(s)")
