"""The ``tessera`` command-line tool: a thin shell over ``app.client.library``.

Exit codes: 0 success, 1 error, 2 usage, 3 authentication. With ``--json`` the result (or the
error) is one JSON document on stdout; messages and progress go to stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from app.client import library
from app.client.cards import (
    A2A_PLACEHOLDER,
    DID_PLACEHOLDER,
    IMAGE_PLACEHOLDER,
    MCP_PLACEHOLDER,
    find_placeholders,
    render_card,
    scaffold_card,
)

ENVIRONMENTS = ("testnet", "production")
DEFAULT_TESTNET_URL = "http://127.0.0.1:5000"
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTHENTICATION = 3


class AuthenticationError(click.ClickException):
    """A click error that exits with the authentication code (3)."""

    exit_code = EXIT_AUTHENTICATION


@dataclass
class Settings:
    """Global options shared by every command."""

    env: str
    api_key: str | None
    as_json: bool

    def network_url(self) -> str:
        """Return the URL of the chosen environment (``TESSERA_NETWORK_URL`` wins)."""
        override = os.environ.get("TESSERA_NETWORK_URL")
        if override:
            return override
        if self.env == "testnet":
            return os.environ.get("TESSERA_TESTNET_URL", DEFAULT_TESTNET_URL)
        url = os.environ.get("TESSERA_PRODUCTION_URL")
        if not url:
            raise click.UsageError("set TESSERA_PRODUCTION_URL or TESSERA_NETWORK_URL to use --env production")
        return url

    def chain_id(self) -> int:
        """Return the EIP-155 chain id of the chosen environment (``TESSERA_CHAIN_ID`` wins).

        A sign-in challenge naming another chain is refused before anything is signed.
        """
        name = "TESSERA_CHAIN_ID" if os.environ.get("TESSERA_CHAIN_ID") else f"TESSERA_{self.env.upper()}_CHAIN_ID"
        text = os.environ.get(name) or str(library.DEFAULT_CHAIN_ID)
        if not text.isdigit():
            raise click.UsageError(f"{name} must be a chain id (decimal digits), not {text!r}")
        return int(text)

    def client(self) -> library.TesseraClient:
        """Return a library client for the chosen network, its chain and the key."""
        try:
            return library.TesseraClient(self.network_url(), api_key=self.api_key, chain_id=self.chain_id())
        except ValueError as exc:
            raise AuthenticationError(f"the agent key is not usable: {exc}") from exc


def _error_document(exc: Exception) -> dict[str, Any]:
    document: dict[str, Any] = {"error": {"message": str(exc), "kind": type(exc).__name__}}
    for attribute in ("status", "code", "required", "available", "owner", "version", "pointers"):
        if hasattr(exc, attribute):
            document["error"][attribute] = getattr(exc, attribute)
    return document


@contextmanager
def _translate_errors(settings: Settings) -> Iterator[None]:
    """Turn library errors into click errors with the right exit code and message."""
    try:
        yield
    except library.TesseraError as exc:
        if settings.as_json:
            click.echo(library.dumps(_error_document(exc)))
        if isinstance(exc, library.AuthenticationFailed):
            raise AuthenticationError(f"authentication failed: {exc}") from exc
        raise click.ClickException(str(exc)) from exc


def _emit(settings: Settings, document: Any, human: Callable[[], None]) -> None:
    if settings.as_json:
        click.echo(library.dumps(document))
    else:
        human()


@contextmanager
def _job_progress(settings: Settings, label: str) -> Iterator[library.ProgressCallback]:
    """Yield a progress callback that shows a spinner with the job's state on stderr."""
    console = Console(stderr=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(f"{label}: submitting", total=None)

        def report(job: dict[str, Any]) -> None:
            progress.update(task, description=f"{label}: job {job.get('id')} {job.get('state')}")

        yield report


def _confirm(yes: bool, question: str) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError("this command needs confirmation; pass --yes to run it without a terminal")
    click.confirm(question, abort=True, err=True)


pass_settings = click.make_pass_decorator(Settings)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--env",
    type=click.Choice(ENVIRONMENTS),
    envvar="TESSERA_ENV",
    default="testnet",
    show_default=True,
    help="Network to use (env TESSERA_ENV; TESSERA_NETWORK_URL overrides its URL).",
)
@click.option("--api-key", envvar="TESSERA_API_KEY", help="Agent key, 0x-prefixed hex (env TESSERA_API_KEY).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.version_option(package_name="tessera")
@click.pass_context
def main(ctx: click.Context, env: str, api_key: str | None, as_json: bool) -> None:
    """Register an agent identity on the Tessera network and host its card."""
    ctx.obj = Settings(env=env, api_key=api_key or None, as_json=as_json)


@main.command()
@pass_settings
def whoami(settings: Settings) -> None:
    """Authenticate with the key and show the account's DID (bound at first authentication)."""
    with _translate_errors(settings), settings.client() as client:
        account = client.whoami()
    _emit(
        settings,
        account,
        lambda: click.echo(
            f"DID:     {account['did']}\nAddress: {account['address']}\n"
            f"Kind:    {account['kind']}\nCredits: {account['balance']}"
        ),
    )


@main.command()
@pass_settings
def credits(settings: Settings) -> None:
    """Show the account's credit balance and ledger."""
    with _translate_errors(settings), settings.client() as client:
        ledger = client.credits()

    def human() -> None:
        click.echo(f"Balance: {ledger['balance']} credits")
        for entry in ledger.get("entries", []):
            click.echo(f"  {entry['created_at']}  {entry['amount']:>+6}  {entry['reason']}")

    _emit(settings, ledger, human)


@main.group()
def agent() -> None:
    """Agent cards and registry records."""


def _prompt_optional_url(question: str, placeholder: str) -> str:
    answer = click.prompt(question, default="", show_default=False).strip()
    return answer or placeholder


@agent.command("create-card")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("agent-card.json"),
    show_default=True,
    help="File to write.",
)
@click.option("--name", help="Agent name.")
@click.option("--description", help="What the agent does.")
@click.option("--image", help="URL of the agent's image.")
@click.option("--did", help="The agent's DID (endpoint of the DID service).")
@click.option("--x402", is_flag=True, default=None, help="Declare x402 payment support.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@pass_settings
def create_card(
    settings: Settings,
    out: Path,
    name: str | None,
    description: str | None,
    image: str | None,
    did: str | None,
    x402: bool | None,
    force: bool,
) -> None:
    """Scaffold an ERC-8004 agent card; asks questions when run on a terminal without flags."""
    if out.exists() and not force:
        raise click.ClickException(f"{out} exists; pass --force to overwrite it")
    interactive = sys.stdin.isatty() and all(v is None for v in (name, description, image, did, x402))
    if interactive:
        name = click.prompt("Agent name")
        description = click.prompt("Description")
        image = _prompt_optional_url("Image URL (blank to fill in later)", IMAGE_PLACEHOLDER)
        services: list[str] = []
        a2a = mcp = None
        if click.confirm("Include an A2A service?", default=True):
            services.append("A2A")
            a2a = _prompt_optional_url("A2A agent card URL (blank to fill in later)", A2A_PLACEHOLDER)
        if click.confirm("Include an MCP service?", default=True):
            services.append("MCP")
            mcp = _prompt_optional_url("MCP endpoint URL (blank to fill in later)", MCP_PLACEHOLDER)
        if click.confirm("Include the DID service?", default=True):
            services.append("DID")
            did = _prompt_optional_url("Agent DID (blank to fill in later)", DID_PLACEHOLDER)
        x402 = click.confirm("Does the agent accept x402 payments?", default=False)
        card = scaffold_card(
            name=name,
            description=description,
            image=image,
            did=did,
            x402=x402,
            services=tuple(services),
            a2a_endpoint=a2a,
            mcp_endpoint=mcp,
        )
    else:
        card = scaffold_card(name=name, description=description, image=image, did=did, x402=bool(x402))
    out.write_bytes(render_card(card))
    pending = find_placeholders(card)

    def human() -> None:
        click.echo(f"Wrote {out}")
        if pending:
            click.echo("Replace these placeholders (or remove unwanted services) before hosting:", err=True)
            for pointer in pending:
                click.echo(f"  {pointer}", err=True)

    _emit(settings, {"path": str(out), "card": card, "placeholders": pending}, human)


@agent.command("registry")
@click.argument("did")
@click.option("--full", is_flag=True, help="Show the full record (cards, history, contract).")
@pass_settings
def agent_registry(settings: Settings, did: str, full: bool) -> None:
    """Read an agent's registry record (authenticated)."""
    with _translate_errors(settings), settings.client() as client:
        record = client.registry(did, full=full)

    def human() -> None:
        for key, value in record.items():
            click.echo(f"{key}: {library.dumps(value) if isinstance(value, dict | list) else value}")

    _emit(settings, record, human)


@agent.command("deregister")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_settings
def agent_deregister(settings: Settings, yes: bool) -> None:
    """Remove your registry record and both hosted cards (needs registry 1.7.0+)."""
    _confirm(yes, "Deregister this agent and delete its hosted cards?")
    with (
        _translate_errors(settings),
        settings.client() as client,
        _job_progress(settings, "deregister") as cb,
    ):
        job = client.deregister_agent(progress=cb)
    _emit(settings, job, lambda: click.echo(f"Deregistered {job['result'].get('did')}"))


@agent.command("revoke-owner")
@click.option("--owner", help="The owner organisation's DID (default: the one the registry record names).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_settings
def agent_revoke_owner(settings: Settings, owner: str | None, yes: bool) -> None:
    """Revoke the organisation that owns this agent, by a revocation signed with the agent key."""
    with _translate_errors(settings), settings.client() as client:
        owner = owner or client.owner_of()
        if not owner:
            raise library.TesseraError(f"the registry record of {client.did} names no owner")
        _confirm(yes, f"Revoke {owner} as the owner of this agent?")
        with _job_progress(settings, "revoke-owner") as cb:
            job = client.revoke_owner(owner, progress=cb)
    _emit(settings, job, lambda: click.echo(f"{job['result']['agent']} is no longer owned by {owner}"))


@main.command("host-card")
@click.option(
    "--file",
    "card_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The card JSON.",
)
@click.option("--owner", help="Organisation DID hosting for an agent it owns (with --agent).")
@click.option("--agent", "agent_did", help="The agent's DID (with --owner).")
@pass_settings
def host_card(settings: Settings, card_file: Path, owner: str | None, agent_did: str | None) -> None:
    """Store the card privately and publish its public copy, byte for byte."""
    if (owner is None) != (agent_did is None):
        raise click.UsageError("--owner and --agent go together")
    with _translate_errors(settings), settings.client() as client, _job_progress(settings, "host-card") as cb:
        job = client.host_card(card_file, owner=owner, agent=agent_did, progress=cb)
    result = job["result"]
    _emit(
        settings,
        job,
        lambda: click.echo(
            f"Hosted {result['size']} bytes for {result['did']}\nPublic card: {result['public_url']}\n"
            f"Charged {result['charged']} credits"
        ),
    )


@main.command("set-card")
@click.option("--uri", required=True, help="Absolute https (or http) URL of the card to register.")
@click.option("--agent", "agent_did", help="Agent DID (organisations acting for an owned agent).")
@pass_settings
def set_card(settings: Settings, uri: str, agent_did: str | None) -> None:
    """Register a card URI; it appears as the AgentService of the DID document."""
    with _translate_errors(settings), settings.client() as client, _job_progress(settings, "set-card") as cb:
        job = client.set_card(uri, agent=agent_did, progress=cb)
    _emit(settings, job, lambda: click.echo(f"Card URI of {job['result']['did']} set to {uri}"))


@main.command("card-unpublish")
@click.option("--agent", "agent_did", help="Agent DID (organisations acting for an owned agent).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_settings
def card_unpublish(settings: Settings, agent_did: str | None, yes: bool) -> None:
    """Stop serving the public card; the private copy stays."""
    _confirm(yes, "Stop serving the public card?")
    with _translate_errors(settings), settings.client() as client, _job_progress(settings, "unpublish") as cb:
        job = client.card_unpublish(agent=agent_did, progress=cb)
    _emit(settings, job, lambda: click.echo(f"Public card of {job['result']['did']} unpublished"))


@main.group("did")
def did_group() -> None:
    """DID documents."""


@did_group.command("get")
@click.argument("did")
@click.option("--full", is_flag=True, help="Show the full DID resolution result with metadata.")
@pass_settings
def did_get(settings: Settings, did: str, full: bool) -> None:
    """Resolve a DID and print its document (public)."""
    with _translate_errors(settings), settings.client() as client:
        document = client.get_did(did, full=full)
    click.echo(library.dumps(document))


@main.group()
def consent() -> None:
    """Organisation ownership of agents."""


@consent.command("request")
@click.option("--owner", required=True, help="Your organisation's DID.")
@click.option("--agent", "agent_did", required=True, help="The agent's DID.")
@pass_settings
def consent_request(settings: Settings, owner: str, agent_did: str) -> None:
    """Ask an agent to accept your organisation as owner; prints the consent link."""
    with _translate_errors(settings), settings.client() as client:
        request = client.consent_request(owner, agent_did)
    _emit(
        settings,
        request,
        lambda: click.echo(
            f"Consent link: {request['consent_url']}\n"
            f"The agent approves with: tessera consent approve {request['consent_url']}"
        ),
    )


@consent.command("approve")
@click.argument("link")
@click.option("--owner", help="The organisation DID you expect; a consent naming another is refused.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_settings
def consent_approve(settings: Settings, link: str, owner: str | None, yes: bool) -> None:
    """As the agent, accept the owner named by a consent link by signing it with the agent key."""
    with _translate_errors(settings), settings.client() as client:
        consent = client.review_consent(link, owner)
        click.echo(f"Owner:   {consent['owner']}\nAgent:   {consent['agent']}\nConsent: {consent['id']}", err=True)
        _confirm(yes, f"Accept {consent['owner']} as the owner of this agent?")
        with _job_progress(settings, "consent") as cb:
            job = client.consent_approve(link, consent["owner"], progress=cb)
    _emit(settings, job, lambda: click.echo(f"{job['result']['owner']} now owns {job['result']['agent']}"))
