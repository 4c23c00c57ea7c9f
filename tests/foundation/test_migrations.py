"""The models and the latest migration agree: autogenerate finds nothing to do."""

from __future__ import annotations


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
