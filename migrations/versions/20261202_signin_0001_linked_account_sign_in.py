"""signin: sign in with a linked account: the platforms a client tree accepts and whether they may
sign up (clients.linked_sign_in, clients.linked_sign_up); the platform state and the pending link of
an authorization request

Revision ID: signin_0001
Revises: oidcalg_0001
Create Date: 2026-12-02 10:00:00

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql


# revision identifiers, used by Alembic.
revision = "signin_0001"
down_revision = "oidcalg_0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql")


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("linked_sign_in", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("linked_sign_up", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("linked_state_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("linked_platform", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("linked_pending", JSON, nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f("uq_oidc_authorization_requests_linked_state_hash"), ["linked_state_hash"]
        )


def downgrade():
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_oidc_authorization_requests_linked_state_hash"), type_="unique")
        batch_op.drop_column("linked_pending")
        batch_op.drop_column("linked_platform")
        batch_op.drop_column("linked_state_hash")
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("linked_sign_up")
        batch_op.drop_column("linked_sign_in")
