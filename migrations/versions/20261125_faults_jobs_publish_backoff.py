"""jobs: record successful publishes and back off re-publishing per job

Revision ID: faults_0001
Revises: faces_0001
Create Date: 2026-11-25 06:50:00.000000

"""

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = "faults_0001"
down_revision = "faces_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("publish_count", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("republish_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_jobs_state_republish_at", ["state", "republish_at"], unique=False)
    # Jobs the old sweep had published stay due for the new one at once.
    op.execute(
        "UPDATE jobs SET republish_at = published_at, publish_count = 1 "
        "WHERE state = 'queued' AND published_at IS NOT NULL"
    )


def downgrade():
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_state_republish_at")
        batch_op.drop_column("republish_at")
        batch_op.drop_column("publish_count")
