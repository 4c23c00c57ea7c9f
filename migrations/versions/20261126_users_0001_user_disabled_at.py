"""users: disabled_at, tokens_valid_after (an operator may disable a user: sign-in and their tokens stop
working, and tokens issued before a disable never work again)

Revision ID: users_0001
Revises: agentharden_0002
Create Date: 2026-11-26 10:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "users_0001"
down_revision = "agentharden_0002"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("tokens_valid_after", sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("tokens_valid_after")
        batch_op.drop_column("disabled_at")
