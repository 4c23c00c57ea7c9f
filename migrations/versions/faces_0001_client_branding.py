"""tenancy: client branding (logo URL and accent colour of the hosted pages)

Revision ID: faces_0001
Revises: issuer_0001
Create Date: 2026-11-25 07:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "faces_0001"
down_revision = "issuer_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("logo_url", sa.String(length=2048), nullable=True))
        batch_op.add_column(sa.Column("accent_color", sa.String(length=7), nullable=True))


def downgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("accent_color")
        batch_op.drop_column("logo_url")
