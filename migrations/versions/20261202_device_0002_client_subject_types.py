"""clients: subject_type, sector_identifier_uri and sector_identifier (pairwise subjects, OpenID Core §8)

Every existing client is `public`: its users keep their `sub`.

Revision ID: device_0002
Revises: device_0001
Create Date: 2026-12-02 11:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "device_0002"
down_revision = "device_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subject_type", sa.String(length=8), server_default="public", nullable=False))
        batch_op.add_column(sa.Column("sector_identifier_uri", sa.String(length=2048), nullable=True))
        batch_op.add_column(sa.Column("sector_identifier", sa.String(length=253), nullable=True))


def downgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("sector_identifier")
        batch_op.drop_column("sector_identifier_uri")
        batch_op.drop_column("subject_type")
