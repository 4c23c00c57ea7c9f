"""JARM: clients.authorization_signed_response_alg; the response mode of authorization requests

Null for every existing client (RS256 when it asks for JARM) and request (`query`).

Revision ID: dpop_0002
Revises: dpop_0001
Create Date: 2026-11-28 18:40:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "dpop_0002"
down_revision = "dpop_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("authorization_signed_response_alg", sa.String(length=8), nullable=True))
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("response_mode", sa.String(length=16), nullable=True))


def downgrade():
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_column("response_mode")
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("authorization_signed_response_alg")
