"""chain2: the relayer's nonces, each job's one transaction, and agents' ERC-8004 agentIds

Empty until a network runs with AGENT_REGISTRY_BACKEND=evm.

Revision ID: chain2_0001
Revises: chain_0001
Create Date: 2026-11-27 19:40:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "chain2_0001"
down_revision = "chain_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "chain_relayer_nonces",
        sa.Column("account", sa.String(length=80), nullable=False),
        sa.Column("next_nonce", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("account"),
    )
    op.create_table(
        "chain_job_transactions",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("account", sa.String(length=80), nullable=False),
        sa.Column("nonce", sa.BigInteger(), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=True),
        sa.Column("raw_transaction", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_table(
        "chain_agent_identities",
        sa.Column("agent_registry", sa.String(length=120), nullable=False),
        sa.Column("did", sa.String(length=128), nullable=False),
        sa.Column("agent_id", sa.String(length=78), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_registry", "did"),
    )


def downgrade():
    op.drop_table("chain_agent_identities")
    op.drop_table("chain_job_transactions")
    op.drop_table("chain_relayer_nonces")
