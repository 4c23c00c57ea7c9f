"""chainrelay: every signed version of a job step's transaction, and what the relay saw of it on chain

A stuck transaction is replaced by a version with the same nonce and higher fees; each version is
kept so that whichever one is mined is found. Existing signed transactions become their step's
first version, sent when they were created.

Revision ID: chainrelay_0001
Revises: chain3_0001
Create Date: 2026-11-27 22:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "chainrelay_0001"
down_revision = "chain3_0001"
branch_labels = None
depends_on = None

STATE = ("sent_at", "mined_tx_hash", "mined_block_number", "mined_block_hash", "confirmed_at")


def upgrade():
    op.create_table(
        "chain_transaction_versions",
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("step", sa.String(length=40), nullable=False),
        sa.Column("raw_transaction", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tx_hash"),
    )
    op.create_index("ix_chain_transaction_versions_step", "chain_transaction_versions", ["job_id", "step"])
    with op.batch_alter_table("chain_job_transactions") as table:
        table.add_column(sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("mined_tx_hash", sa.String(length=66), nullable=True))
        table.add_column(sa.Column("mined_block_number", sa.BigInteger(), nullable=True))
        table.add_column(sa.Column("mined_block_hash", sa.String(length=66), nullable=True))
        table.add_column(sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE chain_job_transactions SET sent_at = created_at WHERE raw_transaction IS NOT NULL")
    op.execute(
        "INSERT INTO chain_transaction_versions (tx_hash, job_id, step, raw_transaction, created_at) "
        "SELECT tx_hash, job_id, step, raw_transaction, created_at FROM chain_job_transactions "
        "WHERE raw_transaction IS NOT NULL"
    )


def downgrade():
    with op.batch_alter_table("chain_job_transactions") as table:
        for column in STATE:
            table.drop_column(column)
    op.drop_index("ix_chain_transaction_versions_step", table_name="chain_transaction_versions")
    op.drop_table("chain_transaction_versions")
