"""Join the parallel feature migrations of 2026-11-25 into one head.

Revision ID: merge_0001
Revises: issuer_0001, agentharden_0001, faults_0001, oidcharden_0001, oidcparity_0001
"""

revision = "merge_0001"
down_revision = ("issuer_0001", "agentharden_0001", "faults_0001", "oidcharden_0001", "oidcparity_0001")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
