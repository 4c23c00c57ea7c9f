"""Alembic environment: runs migrations with the Flask app's engine and metadata."""

import logging

from alembic import context
from flask import current_app
from sqlalchemy.exc import SQLAlchemyError

from app.ops.schema import unreachable_database

log = logging.getLogger("alembic.env")
config = context.config
target_db = current_app.extensions["migrate"].db


def _configure(**kwargs) -> None:
    context.configure(
        target_metadata=target_db.metadata,
        **current_app.extensions["migrate"].configure_args | kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=str(target_db.engine.url), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    def skip_empty(context_, revision, directives) -> None:
        if getattr(config.cmd_opts, "autogenerate", False) and directives[0].upgrade_ops.is_empty():
            directives[:] = []
            log.info("No changes in schema detected.")

    try:
        connection = target_db.engine.connect()
    except SQLAlchemyError as error:  # an operator's mistake (address, name, credentials): one line, no traceback
        raise unreachable_database(error) from None
    with connection:
        _configure(connection=connection, process_revision_directives=skip_empty)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
