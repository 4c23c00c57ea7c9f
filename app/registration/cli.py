"""Operator commands of dynamic client registration: initial access tokens of master clients, and
what the clients registered under a client may ask for.

Added to the `clients` group (`tessera-admin clients registration-token ...`).
"""

from __future__ import annotations

import json

import click

from app.db import isoformat, transaction
from app.errors import DomainError
from app.registration import service
from app.registration.metadata import MAX_SCOPES, SCOPE_TOKEN


@click.command("registration-token")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option("--name", default="", help="A label for your records.")
@click.option(
    "--expires-in",
    type=click.IntRange(min=0),
    default=None,
    help="Seconds the token registers clients (0: never; default OIDC_INITIAL_ACCESS_TOKEN_TTL).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def issue_registration_token(client_id: int, name: str, expires_in: int | None, as_json: bool) -> None:
    """Issue an initial access token registering sub-clients of master client CLIENT_ID (shown once)."""
    try:
        with transaction():
            issued = service.issue_initial_token(client_id, name=name[:100], expires_in=expires_in)
            output = {
                "id": issued.token.id,
                "client_id": issued.token.client_id,
                "token": issued.plaintext,
                "expires_at": isoformat(issued.token.expires_at),
            }
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    if as_json:
        click.echo(json.dumps(output))
        return
    click.echo(f"Initial access token {output['id']} (shown once): {output['token']}")
    click.echo(f"Expires: {output['expires_at'] or 'never'}")


@click.command("revoke-registration-token")
@click.argument("token_id", type=click.IntRange(min=1))
def revoke_registration_token(token_id: int) -> None:
    """Revoke an initial access token; the clients it registered stay."""
    try:
        with transaction():
            service.revoke_initial_token(token_id)
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    click.echo(f"Revoked initial access token {token_id}.")


@click.command("registration-scopes")
@click.argument("client_id", type=click.IntRange(min=1))
@click.argument("scopes", nargs=-1)
def set_registration_scopes(client_id: int, scopes: tuple[str, ...]) -> None:
    """Let the clients registered under CLIENT_ID's initial access tokens ask their client_credentials
    grant to be given SCOPES (none given: no scope at all)."""
    malformed = [scope for scope in scopes if not SCOPE_TOKEN.fullmatch(scope)]
    if malformed or len(scopes) > MAX_SCOPES:
        raise click.BadParameter(f"at most {MAX_SCOPES} RFC 6749 scope tokens", param_hint="SCOPES")
    try:
        with transaction():
            allowed = service.configure_registration_scopes(client_id, list(scopes))
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    click.echo(f"Clients registered under {client_id} may ask for: {' '.join(allowed) or 'no scope'}.")
