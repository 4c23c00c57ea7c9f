"""chainowner: a consent keeps the organisation's EIP-712 signature naming itself owner on chain

With AGENT_REGISTRY_BACKEND=evm the organisation signs the registry's `SetOwner` (or `Register`)
when it requests the consent; the agent's approval relays it with the agent's own signature.

Revision ID: chainowner_0001
Revises: chainrelay_0001
Create Date: 2026-11-27 23:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "chainowner_0001"
down_revision = "chainrelay_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("agent_consents") as table:
        table.add_column(sa.Column("registry_signature", sa.String(length=132), nullable=True))
        table.add_column(sa.Column("registry_deadline", sa.BigInteger(), nullable=True))


def downgrade():
    with op.batch_alter_table("agent_consents") as table:
        table.drop_column("registry_deadline")
        table.drop_column("registry_signature")
