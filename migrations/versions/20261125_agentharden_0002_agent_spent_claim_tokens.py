"""agents: spent claim form tokens, so a replayed claim form post is refused

Revision ID: agentharden_0002
Revises: agentharden_0001
Create Date: 2026-11-25 07:15:00.000000

"""

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = "agentharden_0002"
down_revision = "agentharden_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "agent_spent_claim_tokens",
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("spent_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_agent_spent_claim_tokens")),
    )
    with op.batch_alter_table("agent_spent_claim_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agent_spent_claim_tokens_spent_at"), ["spent_at"], unique=False)


def downgrade():
    with op.batch_alter_table("agent_spent_claim_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agent_spent_claim_tokens_spent_at"))

    op.drop_table("agent_spent_claim_tokens")
