"""accounts: sign-ins to the account page begun without an application (oidc_account_sign_ins), and
the authorization requests that go on from them (oidc_authorization_requests.for_account)

Revision ID: accounts_0002
Revises: accounts_0001
Create Date: 2026-12-08 00:10:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "accounts_0002"
down_revision = "accounts_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "oidc_account_sign_ins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("handle_hash", sa.String(length=64), nullable=False),
        sa.Column("browser_hash", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("login_code_hash", sa.String(length=64), nullable=True),
        sa.Column("login_code_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("code_passed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("login_code_attempts", sa.Integer(), nullable=False),
        sa.Column("login_code_sends", sa.Integer(), nullable=False),
        sa.Column("passkey_challenge", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oidc_account_sign_ins")),
        sa.UniqueConstraint("handle_hash", name=op.f("uq_oidc_account_sign_ins_handle_hash")),
    )
    with op.batch_alter_table("oidc_account_sign_ins", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oidc_account_sign_ins_expires_at"), ["expires_at"], unique=False)
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("for_account", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade():
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_column("for_account")
    with op.batch_alter_table("oidc_account_sign_ins", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oidc_account_sign_ins_expires_at"))
    op.drop_table("oidc_account_sign_ins")
