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

from app.agents import ethereum
from app.client import library, profiles
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
DEFAULT_TESTNET_URL = "http://localhost:5000"
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTHENTICATION = 3
DEFAULT_JOB_TIMEOUT = 120.0


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

    def chain_id(self) -> int | None:
        """Return the EIP-155 chain id set for the chosen environment (``TESSERA_CHAIN_ID`` wins), or
        None: the chain the network announces with its sign-in challenge.

        A sign-in challenge naming another chain is refused before anything is signed.
        """
        name = "TESSERA_CHAIN_ID" if os.environ.get("TESSERA_CHAIN_ID") else f"TESSERA_{self.env.upper()}_CHAIN_ID"
        text = os.environ.get(name)
        if not text:
            return None
        if not text.isdigit():
            raise click.UsageError(f"{name} must be a chain id (decimal digits), not {text!r}")
        return int(text)

    def job_timeout(self) -> float:
        """Return how many seconds a command waits for its job (``TESSERA_JOB_TIMEOUT``, default 120)."""
        text = os.environ.get("TESSERA_JOB_TIMEOUT") or str(DEFAULT_JOB_TIMEOUT)
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not 0 <= seconds < float("inf"):
            raise click.UsageError(f"TESSERA_JOB_TIMEOUT must be a number of seconds (0 or more), not {text!r}")
        return seconds

    def key(self) -> str | None:
        """Return the agent key: ``--api-key`` or TESSERA_API_KEY, else the one `tessera login` stored for the env."""
        return self.api_key or profiles.stored_key(self.env)

    def client(self) -> library.TesseraClient:
        """Return a library client for the chosen network, its chain, the key and the job timeout."""
        job_timeout = self.job_timeout()
        try:
            return library.TesseraClient(
                self.network_url(), api_key=self.key(), chain_id=self.chain_id(), job_timeout=job_timeout
            )
        except ValueError as exc:
            message = f"the agent key is not usable: {exc}"
            document = {"error": {"message": message, "kind": "AuthenticationFailed"}}
            raise CommandFailed(message, document, EXIT_AUTHENTICATION) from exc


class CommandFailed(click.ClickException):
    """A library error as a click error: one line for people, ``document`` for ``--json``."""

    def __init__(self, message: str, document: dict[str, Any], exit_code: int = EXIT_ERROR):
        super().__init__(message)
        self.document = document
        self.exit_code = exit_code


def _field_errors(exc: Exception) -> dict[str, list[str]]:
    problem = getattr(exc, "problem", None) or {}
    errors = problem.get("errors") if isinstance(problem, dict) else None
    if not isinstance(errors, dict):
        return {}
    return {
        str(field): [str(m) for m in (msgs if isinstance(msgs, list) else [msgs])] for field, msgs in errors.items()
    }


def _error_document(exc: Exception) -> dict[str, Any]:
    document: dict[str, Any] = {"error": {"message": str(exc), "kind": type(exc).__name__}}
    for attribute in ("status", "code", "did", "required", "available", "owner", "version", "pointers", "job", "queue"):
        if hasattr(exc, attribute):
            document["error"][attribute] = getattr(exc, attribute)
    fields = _field_errors(exc)
    if fields:
        document["error"]["errors"] = fields
    return document


def _human_message(exc: library.TesseraError, settings: Settings) -> str:
    fields = _field_errors(exc)
    if fields:
        lines = [str(exc)] + [f"  {field}: {' '.join(messages)}" for field, messages in fields.items()]
        return "\n".join(lines)
    if isinstance(exc, library.InsufficientCredits):
        return f"{exc}; {_credits_hint(settings)}"
    if isinstance(exc, library.JobTimeout):
        return _job_timeout_message(exc)
    return str(exc)


def _job_timeout_message(exc: library.JobTimeout) -> str:
    job_id = exc.job.get("id")
    message = f"job {job_id} is still {exc.job.get('state')}; follow it with `tessera job show {job_id} --wait`"
    queue = getattr(exc, "queue", None) or {}
    if queue.get("consuming") is False:
        message += (
            f"\nno worker is taking jobs on the network: the oldest queued job has waited "
            f"{queue.get('oldest_queued_job_age_seconds')} s"
        )
    return message


def _credits_hint(settings: Settings) -> str:
    try:
        url = settings.network_url().rstrip("/")
    except click.UsageError:
        url = "{network_url}"
    return (
        f"get a key with test credits from the claim page {url}/claim, or ask the network operator to run "
        "`tessera-admin agents grant-credits ADDRESS AMOUNT`"
    )


def _queue_status(settings: Settings) -> dict[str, Any] | None:
    with settings.client() as client:
        return client.queue_status()


@contextmanager
def _translate_errors(settings: Settings) -> Iterator[None]:
    """Turn library errors into click errors with the right exit code and message."""
    try:
        yield
    except library.TesseraError as exc:
        if isinstance(exc, library.JobTimeout) and exc.job.get("state") == "queued":
            exc.queue = _queue_status(settings)
        document = _error_document(exc)
        if isinstance(exc, library.InsufficientCredits):
            document["error"]["hint"] = _credits_hint(settings)
        if isinstance(exc, library.AuthenticationFailed):
            raise CommandFailed(f"authentication failed: {exc}", document, EXIT_AUTHENTICATION) from exc
        raise CommandFailed(_human_message(exc, settings), document) from exc


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

_ARGV_KEY = "tessera.argv"


def _wants_json(ctx: click.Context) -> bool:
    settings = ctx.find_object(Settings)
    if settings is not None and settings.as_json:
        return True
    argv = ctx.meta.get(_ARGV_KEY, [])
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def _echo_failure(ctx: click.Context, exc: click.ClickException) -> None:
    if not _wants_json(ctx):
        return
    document = getattr(exc, "document", None) or {
        "error": {"message": exc.format_message(), "kind": type(exc).__name__, "exit_code": exc.exit_code}
    }
    click.echo(library.dumps(document))


class TesseraGroup(click.Group):
    """The root group: every failure is one line (one JSON document on stdout with ``--json``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV_KEY] = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as exc:
            _echo_failure(ctx, exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            _echo_failure(ctx, exc)
            raise
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            failure = click.ClickException(f"{where}{exc.strerror or exc}")
            _echo_failure(ctx, failure)
            raise failure from exc
        except (click.Abort, KeyboardInterrupt, EOFError):
            # A declined confirmation or Ctrl-C: click prints "Aborted!" and exits 1.
            if _wants_json(ctx):
                click.echo(library.dumps({"error": {"message": "aborted", "kind": "Aborted", "exit_code": EXIT_ERROR}}))
            raise


def _set_global_option(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Apply a global option given after a command name; it wins over the same option given before."""
    if value is None or value is False:
        return
    settings = ctx.find_object(Settings)
    if settings is not None and param.name is not None:
        setattr(settings, param.name, value or None)


def _global_options() -> list[click.Parameter]:
    return [
        click.Option(
            ["--env"],
            type=click.Choice(ENVIRONMENTS),
            expose_value=False,
            callback=_set_global_option,
            help="Network to use (also accepted before the command name).",
        ),
        click.Option(
            ["--api-key"], expose_value=False, callback=_set_global_option, help="Agent key, 0x-prefixed hex."
        ),
        click.Option(
            ["--json", "as_json"],
            is_flag=True,
            expose_value=False,
            callback=_set_global_option,
            help="Print one JSON document on stdout.",
        ),
    ]


def _accept_global_options_everywhere(group: click.Group) -> None:
    """Give every command and subgroup the root's global options, so they may follow the command name."""
    for command in group.commands.values():
        command.params.extend(_global_options())
        if isinstance(command, click.Group):
            _accept_global_options_everywhere(command)


EPILOG = f"""\b
The agent key: --api-key, else TESSERA_API_KEY, else the key `tessera login` stored for the network
({profiles.FILE_NAME} in the user's config directory, readable by the owner only).

\b
Exit codes:
  0  success
  {EXIT_ERROR}  error (the network refused, a job failed or timed out)
  {EXIT_USAGE}  usage (a wrong option or setting)
  {EXIT_AUTHENTICATION}  authentication (no key, a malformed key, or the network refused it)
"""


@click.group(cls=TesseraGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
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


def _read_key() -> str:
    if sys.stdin.isatty():
        return click.prompt("Agent key (0x..., not shown)", hide_input=True, err=True).strip()
    return sys.stdin.readline().strip()


@main.command()
@pass_settings
def login(settings: Settings) -> None:
    """Store an agent key for the network (--env): asked without echo on a terminal, else read from stdin.

    Later commands on that network use it when neither --api-key nor TESSERA_API_KEY is given.
    """
    key = settings.api_key or _read_key()
    try:
        address = ethereum.address_from_private_key(key)
    except ValueError as exc:
        message = f"the agent key is not usable: {exc}"
        raise CommandFailed(message, {"error": {"message": message, "kind": "AuthenticationFailed"}},
                            EXIT_AUTHENTICATION) from exc  # fmt: skip
    path = profiles.store_key(settings.env, key)
    _emit(settings, {"env": settings.env, "address": address, "path": str(path)},
          lambda: click.echo(f"Stored the key of {address} for {settings.env} in {path}"))  # fmt: skip


@main.command()
@pass_settings
def logout(settings: Settings) -> None:
    """Forget the agent key stored for the network (--env)."""
    removed = profiles.remove_key(settings.env)
    message = (f"Removed the {settings.env} key from {profiles.credentials_path()}" if removed
               else f"No key was stored for {settings.env}")  # fmt: skip
    _emit(settings, {"env": settings.env, "removed": removed}, lambda: click.echo(message))


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
            f"DID:     {account.get('did') or '(unknown)'}\nAddress: {account['address']}\n"
            + (f"Kind:    {account['kind']}\nCredits: {account['balance']}\n" if "kind" in account else "")
            + f"Status:  {'deactivated (deregistered)' if account.get('deactivated') else 'active'}"
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
@click.option("--a2a-url", help="URL of the agent's A2A agent card (the A2A service endpoint).")
@click.option("--mcp-url", help="URL of the agent's MCP endpoint.")
@click.option("--no-a2a", is_flag=True, default=None, help="Leave the A2A service out.")
@click.option("--no-mcp", is_flag=True, default=None, help="Leave the MCP service out.")
@click.option("--no-did", is_flag=True, default=None, help="Leave the DID service out.")
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
    a2a_url: str | None,
    mcp_url: str | None,
    no_a2a: bool | None,
    no_mcp: bool | None,
    no_did: bool | None,
    force: bool,
) -> None:
    """Scaffold an ERC-8004 agent card; asks questions when run on a terminal without flags.

    With an agent key (--api-key, TESSERA_API_KEY or `tessera login`) and no --did, the DID service is
    filled in with the DID the network bound to the key.
    """
    if out.exists() and not force:
        raise click.ClickException(f"{out} exists; pass --force to overwrite it")
    if (no_a2a and a2a_url) or (no_mcp and mcp_url):
        raise click.UsageError("--no-a2a/--no-mcp and the matching --a2a-url/--mcp-url exclude each other")
    flags = (name, description, image, did, x402, a2a_url, mcp_url, no_a2a, no_mcp, no_did)
    interactive = sys.stdin.isatty() and all(v is None for v in flags)
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
        services = tuple(
            service for service, dropped in (("A2A", no_a2a), ("MCP", no_mcp), ("DID", no_did)) if not dropped
        )
        if did is None and "DID" in services and settings.key():
            with _translate_errors(settings), settings.client() as client:
                did = client.authenticate()["did"]
        card = scaffold_card(
            name=name,
            description=description,
            image=image,
            did=did,
            x402=bool(x402),
            services=services,
            a2a_endpoint=a2a_url,
            mcp_endpoint=mcp_url,
        )
    try:
        out.write_bytes(render_card(card))
    except OSError as exc:
        raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from exc
    pending = find_placeholders(card)

    def human() -> None:
        click.echo(f"Wrote {out}")
        if pending:
            click.echo("Replace these placeholders (or remove unwanted services) before hosting:", err=True)
            for pointer in pending:
                click.echo(f"  {pointer}", err=True)

    _emit(settings, {"path": str(out), "card": card, "placeholders": pending}, human)


def _human_value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_human_value(item) for item in value) or "(none)"
    if isinstance(value, dict):
        return " ".join(f"{key}={_human_value(item)}" for key, item in value.items())
    return str(value)


def _human_lines(document: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """``key: value`` lines of a document, nested objects as ``outer.inner``, a list of objects one
    indented line each; never a bare None."""
    for key, value in document.items():
        if isinstance(value, dict):
            yield from _human_lines(value, f"{prefix}{key}.")
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            yield f"{prefix}{key}:"
            for item in value:
                yield "  " + ", ".join(f"{name}: {_human_value(member)}" for name, member in item.items())
        else:
            yield f"{prefix}{key}: {_human_value(value)}"


@agent.command("registry")
@click.argument("did", required=False)
@click.option(
    "--full", is_flag=True, help="Show the full record (cards, contract, ERC-8004 identity, the record's history)."
)
@pass_settings
def agent_registry(settings: Settings, did: str | None, full: bool) -> None:
    """Read an agent's registry record (authenticated); DID defaults to your own."""
    with _translate_errors(settings), settings.client() as client:
        record = client.registry(did, full=full)

    def human() -> None:
        for line in _human_lines(record):
            click.echo(line)

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


@main.group("job")
def job_group() -> None:
    """Jobs the network runs for your writes."""


@job_group.command("show")
@click.argument("job_id")
@click.option("--wait", is_flag=True, help="Wait until the job is final.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    help=f"Seconds to wait with --wait (default: TESSERA_JOB_TIMEOUT, else {DEFAULT_JOB_TIMEOUT:g}).",
)
@pass_settings
def job_show(settings: Settings, job_id: str, wait: bool, timeout: float | None) -> None:
    """Show a job you started (e.g. one a command left queued); --wait follows it to the end."""
    with _translate_errors(settings), settings.client() as client:
        if wait:
            with _job_progress(settings, "job") as cb:
                job = client.wait_for_job(job_id, progress=cb, timeout=timeout)
        else:
            job = client.get_job(job_id)
        queue = client.queue_status() if job.get("state") == "queued" else None
    if queue and queue.get("consuming") is False:
        click.echo(
            f"warning: no worker is taking jobs on the network: the oldest queued job has waited "
            f"{queue.get('oldest_queued_job_age_seconds')} s",
            err=True,
        )

    def human() -> None:
        click.echo(f"Job:      {job.get('id')}\nKind:     {job.get('kind')}\nState:    {job.get('state')}")
        click.echo(f"Created:  {job.get('created_at')}")
        if job.get("finished_at"):
            click.echo(f"Finished: {job['finished_at']}")
        if job.get("result"):
            click.echo(f"Result:   {library.dumps(job['result'])}")
        if job.get("error"):
            click.echo(f"Error:    {library.dumps(job['error'])}")

    _emit(settings, job, human)


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


_accept_global_options_everywhere(main)
