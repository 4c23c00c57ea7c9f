"""The models and the latest migration agree: autogenerate finds nothing to do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Engine, event

from tests.support import environment
from tests.support.tenancy import make_master


def test_no_pending_autogenerate_diff(app):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from app.extensions import db

    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        diff = compare_metadata(context, db.metadata)
    assert diff == []


def test_single_migration_head(app):
    from alembic.script import ScriptDirectory
    from flask import current_app

    with app.app_context():
        config = current_app.extensions["migrate"].migrate.get_config()
        assert len(ScriptDirectory.from_config(config).get_heads()) == 1


@pytest.mark.skipif(not environment.USING_POSTGRES, reason="CREATE INDEX CONCURRENTLY is PostgreSQL's")
def test_the_children_index_is_built_concurrently_and_again_after_a_failed_build(app, capsys):
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from app.extensions import db

    make_master(app, "Migration: first parent")
    make_master(app, "Migration: second parent")
    with app.app_context():
        upgrade(revision="chainowner_0001:children_0001", sql=True)
        assert "CREATE INDEX CONCURRENTLY ix_clients_enabled_children" in capsys.readouterr().out

        db.session.remove()
        with _lock_timeout(db.engine):
            downgrade(revision="chainowner_0001")
            try:
                # A concurrent build that fails half-way leaves an invalid index of that name behind.
                autocommit = db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                with autocommit as connection, pytest.raises(DBAPIError):
                    connection.execute(text(f"CREATE UNIQUE INDEX CONCURRENTLY {INDEX} ON clients ((1))"))
                assert _index_validity() == [False]
            finally:
                upgrade()
        assert _index_validity() == [True]
        with db.engine.connect() as connection:
            definition = connection.scalar(text("SELECT pg_get_indexdef(CAST(:name AS regclass))"), {"name": INDEX})
        assert definition.endswith("(parent_id, id) WHERE (disabled_at IS NULL)")


INDEX = "ix_clients_enabled_children"


def _index_validity() -> list[bool]:
    from sqlalchemy import text

    from app.extensions import db

    with db.engine.connect() as connection:
        return list(
            connection.execute(
                text("SELECT indisvalid FROM pg_index JOIN pg_class ON oid = indexrelid WHERE relname = :name"),
                {"name": INDEX},
            ).scalars()
        )


@contextmanager
def _lock_timeout(engine: Engine) -> Iterator[None]:
    """Connections checked out meanwhile give up a lock wait after a minute: a transaction another
    test left open would otherwise hold the concurrent build (which waits for it) for ever."""

    def limit(dbapi_connection, _record, _proxy) -> None:
        dbapi_connection.execute("SET lock_timeout = '60s'")
        dbapi_connection.commit()  # for the session, and no transaction left open

    event.listen(engine, "checkout", limit)
    try:
        yield
    finally:
        event.remove(engine, "checkout", limit)
        engine.dispose()  # no connection keeps the setting
