"""Operator commands: master clients and their API tokens."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.db import transaction
from app.tenancy import service

clients_cli = AppGroup("clients", help="Clients (organisations) and their API tokens.")


def _parse_claims(pairs: tuple[str, ...]) -> dict[str, str]:
    claims = {}
    for pair in pairs:
        claim, sep, field = pair.partition("=")
        if not sep or not claim or not field:
            raise click.BadParameter(f"{pair!r} is not CLAIM=FIELD", param_hint="--id-token-claim")
        claims[claim] = field
    return claims


@clients_cli.command("create-master")
@click.option("--name", required=True, help="Organisation name (1 to 70 characters).")
@click.option("--redirect-uri", "redirect_uris", multiple=True, help="OpenID redirect URI (repeatable).")
@click.option("--id-token-claim", "claims", multiple=True, help="CLAIM=FIELD mapping for id_tokens.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def create_master(name: str, redirect_uris: tuple[str, ...], claims: tuple[str, ...], as_json: bool) -> None:
    """Create a master client; prints its client_id, client_secret and an API token once."""
    if not 1 <= len(name) <= 70:
        raise click.BadParameter("must be 1 to 70 characters", param_hint="--name")
    with transaction():
        client, secret = service.create_master_client(
            name, redirect_uris=list(redirect_uris), id_token_claims=_parse_claims(claims)
        )
        issued = service.issue_api_token(client.id, name="created by operator")
        output = {"client_id": client.id, "client_secret": secret, "api_token": issued.plaintext}
    if as_json:
        click.echo(json.dumps(output))
    else:
        click.echo(f"client_id:     {output['client_id']}")
        click.echo(f"client_secret: {output['client_secret']}")
        click.echo(f"api_token:     {output['api_token']}")
        click.echo("Store the secret and the token now; they are not shown again.")
