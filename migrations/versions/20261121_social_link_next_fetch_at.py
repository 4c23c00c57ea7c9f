"""social: links wait for next_fetch_at after a platform configuration fault

Revision ID: 7c2e5a91d4f3
Revises: 50aa1c4adf19
Create Date: 2026-11-21 12:40:00.000000

"""

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = "7c2e5a91d4f3"
down_revision = "50aa1c4adf19"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("social_links", schema=None) as batch_op:
        batch_op.add_column(sa.Column("next_fetch_at", sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table("social_links", schema=None) as batch_op:
        batch_op.drop_column("next_fetch_at")
