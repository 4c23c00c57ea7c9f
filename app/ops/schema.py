"""Operator commands refuse, in one line naming the fix, a database that is unreachable or not migrated
to the code's head."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from flask.cli import with_appcontext
from sqlalchemy.exc import SQLAlchemyError

UPGRADE_HINT = "run `flask --app app db upgrade`"
# What the drivers put before the reason a connection failed ("Connection refused", "database "x" does not exist").
_REASON_PREFIX = re.compile(r"^(connection failed: )?(connection to server at .*?, port \d+ failed: )?(FATAL: +)?")


def unreachable_database(error: SQLAlchemyError) -> click.ClickException:
    """The one line an operator command ends with when the database cannot be used: the setting
    that names it (the URL shown without its password) and the driver's reason."""
    from app.extensions import db

    shown = db.engine.url.render_as_string(hide_password=True)
    text = str(getattr(error, "orig", None) or error).strip()
    reason = _REASON_PREFIX.sub("", text.splitlines()[0] if text else error.__class__.__name__)
    return click.ClickException(
        f"Cannot use the database of DATABASE_URL={shown}: {reason}. "
        "Fix DATABASE_URL, or start (or create) the database it names."
    )


def schema_is_current(migrations_dir: Path) -> bool:
    """True when the database's Alembic revisions are the migration scripts' heads."""
    from alembic.config import Config as AlembicConfig
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from app.extensions import db

    config = AlembicConfig()
    config.set_main_option("script_location", str(migrations_dir))
    heads = set(ScriptDirectory.from_config(config).get_heads())
    with db.engine.connect() as connection, _alembic_quiet():
        current = set(MigrationContext.configure(connection).get_current_heads())
    return current == heads


@contextmanager
def _alembic_quiet() -> Iterator[None]:
    # Reading the revision makes Alembic log "Context impl ..." at INFO: noise on every operator
    # command. `flask db ...` does not come here and keeps its "Running upgrade" lines.
    logger = logging.getLogger("alembic.runtime.migration")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def require_current_schema(command: click.Command, migrations_dir: Path) -> None:
    """Make `command` (and every sub-command of a group) check the schema before it runs.

    An unmigrated or outdated database then ends the command with a one-line error naming the
    fix, instead of a traceback from the first query.
    """
    if isinstance(command, click.Group):
        for sub_command in command.commands.values():
            require_current_schema(sub_command, migrations_dir)
        return
    if command.callback is None:
        return
    command.callback = _checked(command.callback, migrations_dir)


def _checked(callback: Callable[..., Any], migrations_dir: Path) -> Callable[..., Any]:
    @functools.wraps(callback)
    @with_appcontext
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            current = schema_is_current(migrations_dir)
        except SQLAlchemyError as error:
            raise unreachable_database(error) from None
        if not current:
            raise click.ClickException(f"The database is not migrated to this version: {UPGRADE_HINT}.")
        return callback(*args, **kwargs)

    return run
