"""dpop_jkt (RFC 9449 §10): the DPoP key an authorization request and its code are bound to

Null for every existing request and code: they stay unbound.

Revision ID: dpop_0003
Revises: dpop_0002
Create Date: 2026-11-28 19:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "dpop_0003"
down_revision = "dpop_0002"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dpop_jkt", sa.String(length=64), nullable=True))
    with op.batch_alter_table("oidc_authorization_codes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dpop_jkt", sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table("oidc_authorization_codes", schema=None) as batch_op:
        batch_op.drop_column("dpop_jkt")
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_column("dpop_jkt")
