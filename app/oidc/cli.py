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

from app.config import served_address
from app.db import isoformat, transaction
from app.errors import DomainError
from app.oidc import keys, subjects
from app.oidc.demo import DEMO_REDIRECT_URI, ensure_demo_sign_in
from app.oidc.settings import OidcSettings
from app.settings import current
from app.tenancy.models import SUBJECT_PAIRWISE, SUBJECT_TYPES

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


# Prints the id_token's claims, or what the token endpoint answered instead (`invalid_grant`, ...).
_SHOW_CLAIMS = (
    "python3 -c 'import base64,json,sys; r=sys.stdin.read(); "
    't=json.loads(r) if r.lstrip().startswith("{") else {}; p=str(t.get("id_token","")).split("."); '
    'print(json.dumps(json.loads(base64.urlsafe_b64decode(p[1]+"==")),indent=2)) if len(p)==3 '
    'else sys.exit("The token endpoint answered: "+(r.strip() or "nothing (is the service running?)"))\''
)


@click.command("demo")
@click.option("--email", default="ada@example.org", show_default=True, help="E-mail address of the demo user.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def create_demo(email: str, as_json: bool) -> None:
    """Create the demo organisation and user (once: run again, the same); prints the authorize URL and
    how to exchange the code.

    The organisation's redirect URI is a loopback address nothing listens on: after the sign-in the
    browser shows the code in its address bar. Login codes are readable at /dev/outbox when the
    service runs with DEV_OUTBOX=1 (the README's run command does).
    """
    base = current_app.config["BASE_URL"].rstrip("/")
    try:
        with transaction():
            demo = ensure_demo_sign_in(email)
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    query = urlencode({"response_type": "code", "client_id": demo.client_id, "redirect_uri": DEMO_REDIRECT_URI,
                       "scope": "openid profile email", "state": "demo",
                       "nonce": secrets.token_urlsafe(8)})  # fmt: skip
    served = served_address()
    outbox = current_app.config["DEV_OUTBOX"] or (served is not None and served.base_url == base and served.dev_outbox)
    output = {
        "created": demo.created,
        "client_id": demo.client_id,
        "client_secret": demo.client_secret,
        "api_token": demo.api_token,
        "user": {"user_id": demo.user_id, "email_address": demo.email_address, "did": demo.did},
        "authorize_url": f"{base}/v1/openidc/authorize?{query}",
        "outbox_url": f"{base}/dev/outbox?{urlencode({'to': demo.email_address})}" if outbox else None,
        "exchange_command": (
            f'curl -sS {base}/v1/openidc/token -d grant_type=authorization_code -d "code=$CODE" '
            f"-d client_id={demo.client_id} -d client_secret={demo.client_secret} "
            f"--data-urlencode redirect_uri={DEMO_REDIRECT_URI} | {_SHOW_CLAIMS}"
        ),
    }
    if as_json:
        click.echo(json.dumps(output))
        return
    if demo.created:
        click.echo(f"Demo organisation: client_id {demo.client_id}; user {demo.email_address}\n")
    else:
        click.echo(f"The demo organisation exists already: client_id {demo.client_id}, its secret as before; "
                   f"user {demo.email_address}\n")  # fmt: skip
    click.echo(f"1. Open this URL in a browser and sign in as {demo.email_address}:\n   {output['authorize_url']}")
    if outbox:
        click.echo(f"2. The login code is at {output['outbox_url']}; then allow the demo organisation.")
    else:
        click.echo(f"2. The login code is e-mailed to {demo.email_address} (the service runs without DEV_OUTBOX=1, "
                   "which would show it at /dev/outbox); then allow the demo organisation.")  # fmt: skip
    click.echo(f"3. The browser lands on {DEMO_REDIRECT_URI}?code=...&state=demo (nothing listens there):"
               "\n   copy the code from the address bar.")  # fmt: skip
    ttl = current(OidcSettings).code_ttl
    click.echo(f"4. Exchange it for tokens at once (a code holds for {ttl} seconds, for one exchange); this prints "
               "the id_token's claims,\n   or the server's error: for invalid_grant open the URL of step 1 again, "
               "which, signed in, lands on the callback with a fresh code.")  # fmt: skip
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
