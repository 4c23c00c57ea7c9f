"""accounts: users found by e-mail address across trees, as the account page's sign-in finds them

Revision ID: accounts_0003
Revises: accounts_0002
Create Date: 2026-12-08 00:20:00

"""

import contextlib

from alembic import op


# revision identifiers, used by Alembic.
revision = "accounts_0003"
down_revision = "accounts_0002"
branch_labels = None
depends_on = None


INDEX = "ix_users_email_address"


def upgrade():
    postgresql = op.get_bind().dialect.name == "postgresql"
    # On PostgreSQL, built without holding off writes to users (as children_0001 builds its index):
    # outside a transaction, and again from the start after a build that failed half-way.
    with op.get_context().autocommit_block() if postgresql else contextlib.nullcontext():
        if postgresql:
            op.drop_index(INDEX, table_name="users", postgresql_concurrently=True, if_exists=True)
        op.create_index(INDEX, "users", ["email_address"], postgresql_concurrently=True)


def downgrade():
    op.drop_index(INDEX, table_name="users")
