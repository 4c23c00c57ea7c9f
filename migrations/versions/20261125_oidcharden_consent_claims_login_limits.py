"""oidc: consented claim-mapping fingerprint, login-code send counters

Revision ID: oidcharden_0001
Revises: faults_0001
Create Date: 2026-11-25 07:00:00

"""

from alembic import op
import sqlalchemy as sa


revision = "oidcharden_0001"
down_revision = "faults_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("oidc_consents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claims_fingerprint", sa.String(length=64), nullable=True))
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("login_code_sends", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "oidc_login_code_counters",
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key_hash", name=op.f("pk_oidc_login_code_counters")),
    )
    with op.batch_alter_table("oidc_login_code_counters", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oidc_login_code_counters_expires_at"), ["expires_at"], unique=False)


def downgrade():
    with op.batch_alter_table("oidc_login_code_counters", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oidc_login_code_counters_expires_at"))
    op.drop_table("oidc_login_code_counters")
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_column("login_code_sends")
    with op.batch_alter_table("oidc_consents", schema=None) as batch_op:
        batch_op.drop_column("claims_fingerprint")
