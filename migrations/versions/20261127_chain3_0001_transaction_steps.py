"""chain3: a job may relay one transaction per step (host-card's identity, set-card's record and URI)

The table is rebuilt with the step in its key, its rows kept (step '' for the ones before).

Revision ID: chain3_0001
Revises: chain2_0001
Create Date: 2026-11-27 21:30:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "chain3_0001"
down_revision = "chain2_0001"
branch_labels = None
depends_on = None

COLUMNS = "job_id, account, nonce, tx_hash, raw_transaction, created_at"


def _table(name, key):
    op.create_table(
        name,
        sa.Column("job_id", sa.String(length=36), nullable=False),
        *([sa.Column("step", sa.String(length=40), nullable=False)] if "step" in key else []),
        sa.Column("account", sa.String(length=80), nullable=False),
        sa.Column("nonce", sa.BigInteger(), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=True),
        sa.Column("raw_transaction", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(*key),
    )


def upgrade():
    _table("chain_job_transactions_stepped", ("job_id", "step"))
    op.execute(
        f"INSERT INTO chain_job_transactions_stepped (step, {COLUMNS}) SELECT '', {COLUMNS} FROM chain_job_transactions"
    )
    op.drop_table("chain_job_transactions")
    op.rename_table("chain_job_transactions_stepped", "chain_job_transactions")


def downgrade():
    _table("chain_job_transactions_single", ("job_id",))
    op.execute(
        f"INSERT INTO chain_job_transactions_single ({COLUMNS}) SELECT {COLUMNS} FROM chain_job_transactions WHERE step = ''"
    )
    op.drop_table("chain_job_transactions")
    op.rename_table("chain_job_transactions_single", "chain_job_transactions")
