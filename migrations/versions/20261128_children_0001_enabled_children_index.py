"""children: one index range for a page of a node's enabled children and their count

Revision ID: children_0001
Revises: chainowner_0001
Create Date: 2026-11-28 04:40:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "children_0001"
down_revision = "chainowner_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        "ix_clients_enabled_children",
        "clients",
        ["parent_id", "id"],
        postgresql_where=sa.text("disabled_at IS NULL"),
        sqlite_where=sa.text("disabled_at IS NULL"),
    )


def downgrade():
    op.drop_index("ix_clients_enabled_children", table_name="clients")
