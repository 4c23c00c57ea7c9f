"""agents: credits held for accepted jobs until they finish

Revision ID: agentharden_0001
Revises: oidcparity_0001
Create Date: 2026-11-25 07:00:00.000000

"""

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = "agentharden_0001"
down_revision = "oidcparity_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "agent_credit_holds",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["agent_accounts.id"], name=op.f("fk_agent_credit_holds_account_id_agent_accounts")
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_agent_credit_holds")),
    )
    with op.batch_alter_table("agent_credit_holds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agent_credit_holds_account_id"), ["account_id"], unique=False)


def downgrade():
    with op.batch_alter_table("agent_credit_holds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agent_credit_holds_account_id"))

    op.drop_table("agent_credit_holds")
