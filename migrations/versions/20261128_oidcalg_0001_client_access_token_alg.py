"""clients: access_token_signed_response_alg (the JWS algorithm of access tokens when not signing_alg)

Null for every existing client: its access tokens stay signed as its id_tokens are.

Revision ID: oidcalg_0001
Revises: passkeys_0001
Create Date: 2026-11-28 10:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "oidcalg_0001"
down_revision = "passkeys_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("access_token_signed_response_alg", sa.String(length=8), nullable=True))


def downgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("access_token_signed_response_alg")
