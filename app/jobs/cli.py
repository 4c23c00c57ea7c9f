"""Operator commands for the job pipeline."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.jobs import service

outbox_cli = AppGroup("outbox", help="The job outbox.")


@outbox_cli.command("sweep")
def sweep() -> None:
    """Re-publish jobs stuck in the outbox or abandoned by a dead worker."""
    click.echo(f"re-published {service.sweep_outbox()} job(s)")
