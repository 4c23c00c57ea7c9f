"""clients: dpop_bound_access_tokens (RFC 9449 §5.2) and userinfo_signed_response_alg

False and null for every existing client: its tokens stay Bearer unless it sends DPoP proofs, and
its userinfo stays JSON.

Revision ID: dpop_0001
Revises: device_0002
Create Date: 2026-11-28 18:30:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "dpop_0001"
down_revision = "device_0002"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("dpop_bound_access_tokens", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("userinfo_signed_response_alg", sa.String(length=8), nullable=True))


def downgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("userinfo_signed_response_alg")
        batch_op.drop_column("dpop_bound_access_tokens")
