"""registration: initial access tokens and registered clients (RFC 7591/7592); clients.require_signed_request_object
and whether a pushed request came in a signed request object (RFC 9101); the claims a `claims` parameter asked for
on requests, codes and refresh tokens

Every existing client accepts plain authorization requests as before (the flag is false).

Revision ID: dcr_0001
Revises: signin_0001
Create Date: 2026-12-05 10:00:00

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql


# revision identifiers, used by Alembic.
revision = "dcr_0001"
down_revision = "signin_0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql")


def upgrade():
    op.create_table(
        "registration_initial_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["clients.id"],
            name=op.f("fk_registration_initial_tokens_client_id_clients"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_registration_initial_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_registration_initial_tokens_token_hash")),
    )
    with op.batch_alter_table("registration_initial_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_registration_initial_tokens_client_id"), ["client_id"], unique=False)
    op.create_table(
        "registered_clients",
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("initial_token_id", sa.Integer(), nullable=True),
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("extra_metadata", JSON, nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["client_id"], ["clients.id"], name=op.f("fk_registered_clients_client_id_clients"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["initial_token_id"],
            ["registration_initial_tokens.id"],
            name=op.f("fk_registered_clients_initial_token_id_registration_initial_tokens"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("client_id", name=op.f("pk_registered_clients")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_registered_clients_token_hash")),
    )
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("require_signed_request_object", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("oidc_pushed_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("signed_request_object", sa.Boolean(), nullable=False, server_default=sa.false()))
    for table in ("oidc_authorization_requests", "oidc_authorization_codes", "oidc_refresh_tokens"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("claims", sa.Text(), nullable=True))


def downgrade():
    for table in ("oidc_refresh_tokens", "oidc_authorization_codes", "oidc_authorization_requests"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("claims")
    with op.batch_alter_table("oidc_pushed_requests", schema=None) as batch_op:
        batch_op.drop_column("signed_request_object")
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("require_signed_request_object")
    op.drop_table("registered_clients")
    with op.batch_alter_table("registration_initial_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_registration_initial_tokens_client_id"))
    op.drop_table("registration_initial_tokens")
