"""chain: the index of the registry contract's events (records and the follower's cursor)

Empty until a network runs with AGENT_REGISTRY_BACKEND=evm.

Revision ID: chain_0001
Revises: dpop_0003
Create Date: 2026-11-27 18:30:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "chain_0001"
down_revision = "dpop_0003"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "chain_registry_records",
        sa.Column("contract", sa.String(length=80), nullable=False),
        sa.Column("did", sa.String(length=128), nullable=False),
        sa.Column("agent_address", sa.String(length=42), nullable=False),
        sa.Column("owner_address", sa.String(length=42), nullable=True),
        sa.Column("card_uri", sa.Text(), nullable=False),
        sa.Column("block_number", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("contract", "did"),
    )
    op.create_table(
        "chain_registry_cursors",
        sa.Column("contract", sa.String(length=80), nullable=False),
        sa.Column("next_block", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("contract"),
    )


def downgrade():
    op.drop_table("chain_registry_cursors")
    op.drop_table("chain_registry_records")
