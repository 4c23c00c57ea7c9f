"""Operator commands for the signing keys (`flask keys list|rotate|purge`), the newcomer's demo
sign-in (`flask clients demo`) and a client's subject type (`flask clients set-subject`); the last
two are added to the clients group by the application factory."""

from __future__ import annotations

import json
import secrets
from urllib.parse import urlencode

import click
from flask import current_app
from flask.cli import AppGroup

from app.db import isoformat, transaction
from app.errors import DomainError
from app.oidc import keys, subjects
from app.tenancy import service as tenancy
from app.tenancy.auth import caller_of
from app.tenancy.models import SUBJECT_PAIRWISE, SUBJECT_TYPES
from app.users.service import create_user

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


DEMO_REDIRECT_URI = "http://127.0.0.1:8400/callback"
_SHOW_CLAIMS = (
    'python3 -c \'import base64,json,sys; t=json.load(sys.stdin); p=t["id_token"].split(".")[1]; '
    'print(json.dumps(json.loads(base64.urlsafe_b64decode(p+"==")), indent=2))\''
)


@click.command("demo")
@click.option("--email", default="ada@example.org", show_default=True, help="E-mail address of the demo user.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def create_demo(email: str, as_json: bool) -> None:
    """Create a demo organisation and user; prints the authorize URL and how to exchange the code.

    The organisation's redirect URI is a loopback address nothing listens on: after the sign-in the
    browser shows the code in its address bar. Login codes are readable at /dev/outbox when the
    service runs with DEV_OUTBOX=1 (the README's run command does).
    """
    base = current_app.config["BASE_URL"].rstrip("/")
    with transaction():
        client, secret = tenancy.create_master_client("Demo organisation", redirect_uris=[DEMO_REDIRECT_URI])
        issued = tenancy.issue_api_token(client.id, name="demo")
        caller = caller_of(tenancy.find_active_token(issued.plaintext))
        user = create_user(caller, {"email_address": email, "first_name": "Ada", "last_name": "Lovelace"})
        output = {"client_id": client.id, "client_secret": secret, "api_token": issued.plaintext,
                  "user": {"user_id": user.id, "email_address": user.email_address, "did": user.did}}  # fmt: skip
    query = urlencode({"response_type": "code", "client_id": client.id, "redirect_uri": DEMO_REDIRECT_URI,
                       "scope": "openid profile email", "state": "demo",
                       "nonce": secrets.token_urlsafe(8)})  # fmt: skip
    output["authorize_url"] = f"{base}/v1/openidc/authorize?{query}"
    output["outbox_url"] = f"{base}/dev/outbox?{urlencode({'to': output['user']['email_address']})}"
    output["exchange_command"] = (
        f'curl -sS {base}/v1/openidc/token -d grant_type=authorization_code -d "code=$CODE" '
        f"-d client_id={client.id} -d client_secret={secret} --data-urlencode redirect_uri={DEMO_REDIRECT_URI} "
        f"| {_SHOW_CLAIMS}"
    )
    if as_json:
        click.echo(json.dumps(output))
        return
    click.echo(f"Demo organisation: client_id {client.id}; user {output['user']['email_address']}\n")
    click.echo(f"1. Open this URL in a browser and sign in as {output['user']['email_address']}:\n   "
               f"{output['authorize_url']}")  # fmt: skip
    click.echo(f"2. The login code is at {output['outbox_url']}; then allow the demo organisation.")
    click.echo(f"3. The browser lands on {DEMO_REDIRECT_URI}?code=...&state=demo (nothing listens there):"
               "\n   copy the code from the address bar.")  # fmt: skip
    click.echo("4. Within a minute, exchange it for tokens; this prints the id_token's claims:")
    click.echo(f"   CODE=<the code>\n   {output['exchange_command']}")


@click.command("set-subject")
@click.argument("client_id", type=click.IntRange(min=1))
@click.argument("subject_type", type=click.Choice(SUBJECT_TYPES))
@click.option(
    "--sector-identifier-uri",
    default=None,
    help="https URL of a JSON array listing every redirect URI of the client (pairwise; needed when they have "
    "several hosts) and, for a client whose tokens need no redirect (device flow), its jwks_uri. Its host is "
    "the sector.",
)
def set_subject(client_id: int, subject_type: str, sector_identifier_uri: str | None) -> None:
    """Give a client public subjects (the user id, the default) or pairwise ones (one per user and sector).

    The sector document is fetched before the transaction that stores the change. Once pairwise, a
    client keeps its sector: re-run this after changing its redirect URIs to check them again.
    """
    try:
        listed = None
        if sector_identifier_uri is not None:
            if subject_type != SUBJECT_PAIRWISE:
                raise click.UsageError("--sector-identifier-uri is for pairwise subjects only.")
            listed = subjects.fetch_sector_document(sector_identifier_uri)
        with transaction():
            client = subjects.set_subject_type(
                client_id, subject_type, sector_identifier_uri=sector_identifier_uri, listed=listed
            )
            summary = {"client_id": client.id, "subject_type": client.subject_type,
                       "sector_identifier": client.sector_identifier}  # fmt: skip
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    click.echo(json.dumps(summary))
