"""oidc: device authorizations (RFC 8628) and the sign-in requests that approve them

Revision ID: device_0001
Revises: dcr_0001
Create Date: 2026-12-02 10:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "device_0001"
down_revision = "dcr_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "oidc_device_authorizations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_code_hash", sa.String(length=64), nullable=False),
        sa.Column("user_code_hash", sa.String(length=64), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=512), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("poll_interval", sa.Integer(), nullable=False),
        sa.Column("next_poll_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("auth_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sid", sa.String(length=64), nullable=True),
        sa.Column("amr", sa.String(length=64), nullable=True),
        sa.Column("acr", sa.String(length=64), nullable=True),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["clients.id"],
            name=op.f("fk_oidc_device_authorizations_client_id_clients"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_oidc_device_authorizations_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oidc_device_authorizations")),
        sa.UniqueConstraint("device_code_hash", name=op.f("uq_oidc_device_authorizations_device_code_hash")),
        sa.UniqueConstraint("user_code_hash", name=op.f("uq_oidc_device_authorizations_user_code_hash")),
    )
    with op.batch_alter_table("oidc_device_authorizations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oidc_device_authorizations_client_id"), ["client_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_oidc_device_authorizations_expires_at"), ["expires_at"], unique=False)
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("device_authorization_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_oidc_authorization_requests_device",
            "oidc_device_authorizations",
            ["device_authorization_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade():
    with op.batch_alter_table("oidc_authorization_requests", schema=None) as batch_op:
        batch_op.drop_constraint(
            "fk_oidc_authorization_requests_device",
            type_="foreignkey",
        )
        batch_op.drop_column("device_authorization_id")
    with op.batch_alter_table("oidc_device_authorizations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oidc_device_authorizations_expires_at"))
        batch_op.drop_index(batch_op.f("ix_oidc_device_authorizations_client_id"))
    op.drop_table("oidc_device_authorizations")
