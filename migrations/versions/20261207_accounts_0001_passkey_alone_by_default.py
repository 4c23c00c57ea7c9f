"""accounts: a tree's sign-in policy is `passkey_alone` by default (a passkey signs in as the e-mail
code does); trees on the former default, `email_code`, move to it

Revision ID: accounts_0001
Revises: exact_0001
Create Date: 2026-12-07 23:20:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "accounts_0001"
down_revision = "exact_0001"
branch_labels = None
depends_on = None

clients = sa.table("clients", sa.column("sign_in_policy", sa.String(24)))


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.alter_column(
            "sign_in_policy",
            existing_type=sa.String(length=24),
            existing_nullable=False,
            server_default="passkey_alone",
        )
    # `email_code` was the default until now, so a tree holding it most likely never chose it; an
    # operator who wants the e-mail code only sets it again (`tessera-admin clients set-sign-in-policy`).
    op.execute(clients.update().where(clients.c.sign_in_policy == "email_code").values(sign_in_policy="passkey_alone"))


def downgrade():
    # Trees keep `passkey_alone`, which the earlier code knows too: which of them had chosen it cannot be told.
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.alter_column(
            "sign_in_policy", existing_type=sa.String(length=24), existing_nullable=False, server_default="email_code"
        )
