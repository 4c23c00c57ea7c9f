"""passkeys: the passkeys table; clients.sign_in_policy; how a user signed in (`amr`) on requests,
codes, sessions and refresh tokens, and the acr claimed; the acr a request asks for; passkey ceremony challenges

Revision ID: passkeys_0001
Revises: contract_0001
Create Date: 2026-12-01 10:00:00

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql


# revision identifiers, used by Alembic.
revision = "passkeys_0001"
down_revision = "contract_0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql")


def upgrade():
    op.create_table(
        "passkeys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("credential_id", sa.String(length=1366), nullable=False),
        sa.Column("public_key", sa.LargeBinary(), nullable=False),
        sa.Column("sign_count", sa.Integer(), nullable=False),
        sa.Column("aaguid", sa.String(length=36), nullable=False),
        sa.Column("backup_eligible", sa.Boolean(), nullable=False),
        sa.Column("transports", JSON, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_passkeys_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_passkeys")),
        sa.UniqueConstraint("credential_id", name=op.f("uq_passkeys_credential_id")),
    )
    with op.batch_alter_table("passkeys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_passkeys_user_id"), ["user_id"], unique=False)
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("sign_in_policy", sa.String(length=24), nullable=False, server_default="email_code")
        )
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("amr", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("acr_values", sa.String(length=512), nullable=True))
        batch_op.add_column(sa.Column("acr_essential", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("passkey_challenge", sa.String(length=128), nullable=True))
    with op.batch_alter_table("oidc_authorization_codes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("amr", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("acr", sa.String(length=64), nullable=True))
    with op.batch_alter_table("oidc_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("amr", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("passkey_challenge", sa.String(length=128), nullable=True))
    with op.batch_alter_table("oidc_refresh_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("amr", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("acr", sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table("oidc_refresh_tokens", schema=None) as batch_op:
        batch_op.drop_column("acr")
        batch_op.drop_column("amr")
    with op.batch_alter_table("oidc_sessions", schema=None) as batch_op:
        batch_op.drop_column("passkey_challenge")
        batch_op.drop_column("amr")
    with op.batch_alter_table("oidc_authorization_codes", schema=None) as batch_op:
        batch_op.drop_column("acr")
        batch_op.drop_column("amr")
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_column("passkey_challenge")
        batch_op.drop_column("acr_essential")
        batch_op.drop_column("acr_values")
        batch_op.drop_column("amr")
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("sign_in_policy")
    op.drop_index(op.f("ix_passkeys_user_id"), table_name="passkeys")
    op.drop_table("passkeys")
