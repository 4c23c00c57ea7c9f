"""children: one index range for a page of a node's enabled children and their count

Revision ID: children_0001
Revises: chainowner_0001
Create Date: 2026-11-28 04:40:00

"""

import contextlib

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "children_0001"
down_revision = "chainowner_0001"
branch_labels = None
depends_on = None


INDEX = "ix_clients_enabled_children"


def upgrade():
    postgresql = op.get_bind().dialect.name == "postgresql"
    # On PostgreSQL, built without holding off writes to clients (a plain CREATE INDEX would, for the
    # whole build). CONCURRENTLY runs outside a transaction; a build that failed half-way leaves an
    # invalid index of this name, dropped first so that running the upgrade again builds it whole.
    with op.get_context().autocommit_block() if postgresql else contextlib.nullcontext():
        if postgresql:
            op.drop_index(INDEX, table_name="clients", postgresql_concurrently=True, if_exists=True)
        op.create_index(
            INDEX,
            "clients",
            ["parent_id", "id"],
            postgresql_where=sa.text("disabled_at IS NULL"),
            sqlite_where=sa.text("disabled_at IS NULL"),
            postgresql_concurrently=True,
        )


def downgrade():
    op.drop_index(INDEX, table_name="clients")
