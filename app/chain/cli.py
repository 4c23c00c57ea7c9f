"""Operator commands of the registry's chain: ``flask chain ...``."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.chain.settings import TESTNET, ChainSettings
from app.errors import DomainError
from app.settings import current

chain_cli = AppGroup("chain", help="The chain of the agent registry (AGENT_REGISTRY_BACKEND=evm).")


@chain_cli.command("deploy")
@click.option(
    "--env",
    "network",
    type=click.Choice([TESTNET, "production"]),
    envvar="AGENT_NETWORK",
    required=True,
    help="The network whose chain (CHAIN_<ENV>_RPC_URL, CHAIN_<ENV>_CHAIN_ID) receives the contracts.",
)
def deploy(network: str) -> None:
    """Deploy TesseraRegistry and the ERC-8004 IdentityRegistry; print the settings naming them.

    The relayer (CHAIN_RELAYER_KEY) sends both transactions and pays their gas.
    """
    # web3 costs every process seconds of imports; only this command and a network on a chain pay them.
    from app.chain.deploy import deploy_contracts
    from app.chain.rpc import connect

    settings = current(ChainSettings)
    chain = settings.chain(network)
    if settings.relayer_key is None:
        raise click.ClickException("Set CHAIN_RELAYER_KEY: the account that sends and pays for the deployment.")
    if chain.rpc_url is None or chain.chain_id is None:
        prefix = f"CHAIN_{chain.network.upper()}_"
        raise click.ClickException(f"Set {prefix}RPC_URL and {prefix}CHAIN_ID.")
    try:
        w3 = connect(chain.rpc_url)
        if w3.eth.chain_id != chain.chain_id:
            raise click.ClickException(
                f"The node at {chain.rpc_url} is chain {w3.eth.chain_id}, not {chain.chain_id}: nothing was sent."
            )
        deployment = deploy_contracts(w3, settings.relayer_key.secret)
    except DomainError as error:
        raise click.ClickException(error.detail) from error
    prefix = f"CHAIN_{chain.network.upper()}_"
    click.echo(f"# TesseraRegistry {deployment.version} and IdentityRegistry on chain {deployment.chain_id}")
    click.echo(f"{prefix}REGISTRY_ADDRESS={deployment.registry_address}")
    click.echo(f"{prefix}IDENTITY_REGISTRY_ADDRESS={deployment.identity_registry_address}")
