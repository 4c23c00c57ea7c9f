"""Operator commands: master clients and their API tokens."""

from __future__ import annotations

import functools
import json
from datetime import timedelta

import click
from flask.cli import AppGroup

from app.db import isoformat, transaction, utcnow
from app.errors import DomainError
from app.profile.schemas import PROFILE_FIELDS
from app.tenancy import service, validation
from app.tenancy.models import GRANT_TYPES, SIGN_IN_POLICIES

clients_cli = AppGroup("clients", help="Clients (organisations) and their API tokens.")


def _parse_claims(pairs: tuple[str, ...]) -> dict[str, str]:
    claims = {}
    for pair in pairs:
        claim, sep, field = pair.partition("=")
        if not sep or not claim or not field:
            raise click.BadParameter(f"{pair!r} is not CLAIM=FIELD", param_hint="--id-token-claim")
        problem = validation.claim_name_problem(claim)
        if problem:
            raise click.BadParameter(problem, param_hint="--id-token-claim")
        if field not in PROFILE_FIELDS:
            raise click.BadParameter(f"{field!r} is not a profile field", param_hint="--id-token-claim")
        claims[claim] = field
    return claims


def _check_redirect_uris(uris: tuple[str, ...]) -> None:
    for uri in uris:
        problem = validation.redirect_uri_problem(uri)
        if problem:
            raise click.BadParameter(f"{uri}: {problem}", param_hint="--redirect-uri")


@clients_cli.command("create-master")
@click.option("--name", required=True, help="Organisation name (1 to 70 characters).")
@click.option("--redirect-uri", "redirect_uris", multiple=True, help="OpenID redirect URI (repeatable).")
@click.option("--id-token-claim", "claims", multiple=True, help="CLAIM=FIELD mapping for id_tokens.")
@click.option(
    "--signing-alg",
    type=click.Choice(service.SIGNING_ALGORITHMS),
    default=service.DEFAULT_SIGNING_ALG,
    show_default=True,
    help="JWS algorithm of this client's tokens.",
)
@click.option("--logo-url", help="https URL of the logo shown on the client's sign-in pages.")
@click.option("--accent-color", help="Accent colour #rrggbb of the client's sign-in pages.")
@click.option(
    "--reads-credentials/--no-reads-credentials",
    default=True,
    show_default=True,
    help="Whether the client reads its users' credentials once they consent.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def create_master(
    name: str,
    redirect_uris: tuple[str, ...],
    claims: tuple[str, ...],
    signing_alg: str,
    logo_url: str | None,
    accent_color: str | None,
    reads_credentials: bool,
    as_json: bool,
) -> None:
    """Create a master client; prints its client_id, client_secret and an API token once."""
    if not 1 <= len(name) <= 70:
        raise click.BadParameter("must be 1 to 70 characters", param_hint="--name")
    _check_redirect_uris(redirect_uris)
    if logo_url is not None and (problem := validation.logo_url_problem(logo_url)):
        raise click.BadParameter(problem, param_hint="--logo-url")
    if accent_color is not None and (problem := validation.accent_color_problem(accent_color)):
        raise click.BadParameter(problem, param_hint="--accent-color")
    with transaction():
        client, secret = service.create_master_client(
            name,
            redirect_uris=list(redirect_uris),
            id_token_claims=_parse_claims(claims),
            signing_alg=signing_alg,
            logo_url=logo_url,
            accent_color=accent_color.lower() if accent_color else None,
            reads_credentials=reads_credentials,
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


def _fail_on_domain_error(func):
    """Report a domain error as a CLI error (exit status 1) instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except DomainError as error:
            raise click.ClickException(error.detail) from error

    return wrapper


def _client_row(client) -> dict:
    return {
        "client_id": client.id,
        "parent_id": client.parent_id,
        "root_id": client.root_id,
        "name": client.name,
        "created_at": isoformat(client.created_at),
        "disabled_at": isoformat(client.disabled_at),
    }


@clients_cli.command("list")
@click.option("--active-only", is_flag=True, help="Leave out disabled clients.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def list_clients(active_only: bool, as_json: bool) -> None:
    """List every client in tree order (indented under its parent)."""
    with transaction():
        clients = service.list_clients(include_disabled=not active_only)
        rows = [(_client_row(client), client.path.count("/") - 2) for client in clients]
    if as_json:
        click.echo(json.dumps([row for row, _depth in rows]))
        return
    for row, depth in rows:
        state = f"  (disabled {row['disabled_at']})" if row["disabled_at"] else ""
        click.echo(f"{'  ' * depth}{row['client_id']:>6}  {row['name']}{state}")


@clients_cli.command("disable")
@click.argument("client_id", type=click.IntRange(min=1))
@_fail_on_domain_error
def disable_client(client_id: int) -> None:
    """Disable a client and its whole subtree; their API tokens and secrets stop working."""
    with transaction():
        changed = service.disable_client(client_id)
    click.echo(f"Disabled {changed} client(s).")


@clients_cli.command("set-release")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option(
    "--id-token-claim",
    "claims",
    multiple=True,
    help="CLAIM=FIELD mapping for id_tokens and userinfo (repeatable; replaces the mapping).",
)
@click.option("--no-claims", is_flag=True, help="Remove the claim mapping.")
@click.option(
    "--reads-credentials/--no-reads-credentials",
    default=None,
    help="Whether the client reads its users' credentials once they consent.",
)
@click.option(
    "--grant-type",
    "grant_types",
    multiple=True,
    type=click.Choice(GRANT_TYPES),
    help="A grant the client may use (repeatable; replaces the list). "
    "authorization_code and refresh_token are always enabled: name one alone to disable the rest.",
)
@click.option("--require-pkce/--no-require-pkce", default=None, help="Refuse authorization requests without PKCE.")
@_fail_on_domain_error
def set_release(
    client_id: int,
    claims: tuple[str, ...],
    no_claims: bool,
    reads_credentials: bool | None,
    grant_types: tuple[str, ...],
    require_pkce: bool | None,
) -> None:
    """Set what a client may receive and use: its claim mapping, credential reading, grants, PKCE.

    A changed mapping or credential reading asks each user for consent again at the next sign-in.
    """
    if claims and no_claims:
        raise click.UsageError("Give --id-token-claim or --no-claims, not both.")
    changes: dict = {}
    if claims or no_claims:
        changes["id_token_claims"] = _parse_claims(claims)
    if reads_credentials is not None:
        changes["reads_credentials"] = reads_credentials
    if grant_types:
        changes["grant_types"] = list(grant_types)
    if require_pkce is not None:
        changes["require_pkce"] = require_pkce
    if not changes:
        raise click.UsageError("Nothing to change: give at least one option.")
    with transaction():
        client = service.configure_client(client_id, changes)
        summary = {
            "client_id": client.id,
            "id_token_claims": client.id_token_claims,
            "reads_credentials": client.reads_credentials,
            "grant_types": client.allowed_grant_types,
            "require_pkce": client.require_pkce,
        }
    click.echo(json.dumps(summary))


_AS_ID_TOKENS = "as-id-token"


@clients_cli.command("set-signing")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option(
    "--signing-alg",
    type=click.Choice(service.SIGNING_ALGORITHMS),
    help="JWS algorithm of the client's id_tokens (and of its access tokens when they follow them).",
)
@click.option(
    "--access-token-alg",
    type=click.Choice((*service.SIGNING_ALGORITHMS, _AS_ID_TOKENS)),
    help=f"JWS algorithm of the client's access tokens; {_AS_ID_TOKENS} (the default) signs them as its id_tokens.",
)
@_fail_on_domain_error
def set_signing(client_id: int, signing_alg: str | None, access_token_alg: str | None) -> None:
    """Set the JWS algorithms of a client's tokens (the keys of every algorithm are in the JWKS)."""
    changes: dict = {}
    if signing_alg is not None:
        changes["signing_alg"] = signing_alg
    if access_token_alg is not None:
        changes["access_token_signed_response_alg"] = None if access_token_alg == _AS_ID_TOKENS else access_token_alg
    if not changes:
        raise click.UsageError("Nothing to change: give --signing-alg or --access-token-alg.")
    with transaction():
        client = service.configure_client(client_id, changes)
        summary = {
            "client_id": client.id,
            "signing_alg": client.signing_alg,
            "access_token_signed_response_alg": client.access_token_signed_response_alg,
        }
    click.echo(json.dumps(summary))


_JSON_USERINFO = "json"


@clients_cli.command("set-userinfo-signing")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option(
    "--alg",
    required=True,
    type=click.Choice((*service.SIGNING_ALGORITHMS, _JSON_USERINFO)),
    help=f"JWS algorithm of the client's userinfo answers (application/jwt); {_JSON_USERINFO} answers plain JSON.",
)
@_fail_on_domain_error
def set_userinfo_signing(client_id: int, alg: str) -> None:
    """Set a client's `userinfo_signed_response_alg`: its userinfo answers as a JWT signed with it."""
    with transaction():
        client = service.configure_client(
            client_id, {"userinfo_signed_response_alg": None if alg == _JSON_USERINFO else alg}
        )
        summary = {"client_id": client.id, "userinfo_signed_response_alg": client.userinfo_signed_response_alg}
    click.echo(json.dumps(summary))


@clients_cli.command("set-authorization-signing")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option(
    "--alg",
    required=True,
    type=click.Choice(service.SIGNING_ALGORITHMS),
    help="JWS algorithm of the client's JWT-secured authorization responses (JARM; RS256 until set).",
)
@_fail_on_domain_error
def set_authorization_signing(client_id: int, alg: str) -> None:
    """Set a client's `authorization_signed_response_alg`: the algorithm of its JARM responses."""
    with transaction():
        client = service.configure_client(client_id, {"authorization_signed_response_alg": alg})
        summary = {
            "client_id": client.id,
            "authorization_signed_response_alg": client.authorization_signed_response_alg,
        }
    click.echo(json.dumps(summary))


@clients_cli.command("set-dpop")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option(
    "--bound-access-tokens/--any-access-tokens",
    "bound",
    required=True,
    help="Require a DPoP proof at every token request of the client (RFC 9449 §5.2 dpop_bound_access_tokens), "
    "or accept Bearer requests too.",
)
@_fail_on_domain_error
def set_dpop(client_id: int, bound: bool) -> None:
    """Set whether a client's access tokens must be DPoP-bound (`dpop_bound_access_tokens`)."""
    with transaction():
        client = service.configure_client(client_id, {"dpop_bound_access_tokens": bound})
        summary = {"client_id": client.id, "dpop_bound_access_tokens": client.dpop_bound_access_tokens}
    click.echo(json.dumps(summary))


@clients_cli.command("set-recaptcha")
@click.argument("client_id", type=click.IntRange(min=1))
@click.option("--site-key", required=True, help="Public reCAPTCHA v3 site key.")
@click.option("--secret", default=None, help="reCAPTCHA secret (stored encrypted); unchanged when left out.")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=0.5, show_default=True)
@click.option("--enable/--disable", "enabled", default=True, show_default=True)
@_fail_on_domain_error
def set_recaptcha(client_id: int, site_key: str, secret: str | None, threshold: float, enabled: bool) -> None:
    """Configure reCAPTCHA v3 on a client's hosted login page."""
    with transaction():
        service.configure_recaptcha(client_id, site_key=site_key, secret=secret, threshold=threshold, enabled=enabled)
    click.echo(f"reCAPTCHA {'enabled' if enabled else 'disabled'} for client {client_id}.")


@clients_cli.command("set-sign-in-policy")
@click.argument("client_id", type=click.IntRange(min=1))
@click.argument("policy", type=click.Choice(SIGN_IN_POLICIES))
@_fail_on_domain_error
def set_sign_in_policy(client_id: int, policy: str) -> None:
    """Set how users of a master client's tree sign in: `passkey_alone` (the default: the e-mail code,
    or a passkey on its own), `passkey_second_factor` (the e-mail code, then a passkey, every time) or
    `email_code` (the e-mail code only; passkeys are neither offered nor accepted)."""
    with transaction():
        service.set_sign_in_policy(client_id, policy)
    click.echo(f"Sign-in policy of client {client_id} and its sub-clients: {policy}.")


tokens_cli = AppGroup("tokens", help="API tokens (x-api-token) of a client.")
clients_cli.add_command(tokens_cli)


def _token_row(token) -> dict:
    return {
        "id": token.id,
        "client_id": token.client_id,
        "name": token.name,
        "prefix": token.prefix,
        "created_at": isoformat(token.created_at),
        "expires_at": isoformat(token.expires_at),
        "revoked_at": isoformat(token.revoked_at),
        "last_used_at": isoformat(token.last_used_at),
    }


@tokens_cli.command("create")
@click.option("--client-id", type=click.IntRange(min=1), required=True)
@click.option("--name", default="created by operator", show_default=True)
@click.option("--expires-in-days", type=click.IntRange(min=1, max=3650), default=None, help="Default: never.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_fail_on_domain_error
def create_token(client_id: int, name: str, expires_in_days: int | None, as_json: bool) -> None:
    """Issue an API token for a client; it is printed once and stored only hashed."""
    if len(name) > 100:
        raise click.BadParameter("must be at most 100 characters", param_hint="--name")
    expires_at = utcnow() + timedelta(days=expires_in_days) if expires_in_days else None
    with transaction():
        service.require_client_in_subtree(client_id, "/")
        issued = service.issue_api_token(client_id, name=name, expires_at=expires_at)
        output = {**_token_row(issued.token), "api_token": issued.plaintext}
    if as_json:
        click.echo(json.dumps(output))
    else:
        click.echo(f"token id:  {output['id']}")
        click.echo(f"api_token: {output['api_token']}")
        click.echo("Store the token now; it is not shown again.")


@tokens_cli.command("revoke")
@click.argument("token_id", type=click.IntRange(min=1))
@_fail_on_domain_error
def revoke_token(token_id: int) -> None:
    """Revoke an API token (any client's)."""
    with transaction():
        token = service.get_api_token(token_id)
        if token is None:
            raise click.ClickException(f"No API token {token_id}.")
        service.revoke_api_token(token.client_id, token_id)
    click.echo(f"Revoked API token {token_id}.")


@tokens_cli.command("list")
@click.option("--client-id", type=click.IntRange(min=1), required=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def list_tokens(client_id: int, as_json: bool) -> None:
    """List a client's API tokens (never their secrets)."""
    with transaction():
        rows = [_token_row(token) for token in service.list_all_api_tokens(client_id)]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        state = "revoked" if row["revoked_at"] else f"expires {row['expires_at']}" if row["expires_at"] else "active"
        click.echo(f"{row['id']:>6}  {row['prefix']}…  {row['name']}  ({state}; last used {row['last_used_at']})")
