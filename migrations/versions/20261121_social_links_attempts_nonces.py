"""social: links, link attempts, openid nonces

Revision ID: 3b4d19ff53d7
Revises: e19ca4c46f9e
Create Date: 2026-11-21 11:34:54.449283

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision = "3b4d19ff53d7"
down_revision = "e19ca4c46f9e"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "social_openid_nonces",
        sa.Column("nonce", sa.String(length=255), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("nonce", name=op.f("pk_social_openid_nonces")),
    )
    with op.batch_alter_table("social_openid_nonces", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_social_openid_nonces_seen_at"), ["seen_at"], unique=False)

    op.create_table(
        "social_link_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("state_hash", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("return_to", sa.String(length=2048), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["client_id"], ["clients.id"], name=op.f("fk_social_link_attempts_client_id_clients")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_social_link_attempts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_social_link_attempts")),
        sa.UniqueConstraint("state_hash", name=op.f("uq_social_link_attempts_state_hash")),
    )
    with op.batch_alter_table("social_link_attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_social_link_attempts_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_social_link_attempts_user_id"), ["user_id"], unique=False)

    op.create_table(
        "social_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("account_name", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("access_token_encrypted", sa.Text(), nullable=True),
        sa.Column("refresh_token_encrypted", sa.Text(), nullable=True),
        sa.Column("token_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("data", sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"), nullable=True),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_fetched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_attempted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "last_error", sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"), nullable=True
        ),
        sa.Column("fetch_job_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["client_id"], ["clients.id"], name=op.f("fk_social_links_client_id_clients")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_social_links_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_social_links")),
        sa.UniqueConstraint("user_id", "platform", name="uq_social_links_user_id_platform"),
    )
    with op.batch_alter_table("social_links", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_social_links_client_id"), ["client_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_social_links_last_attempted_at"), ["last_attempted_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_social_links_user_id"), ["user_id"], unique=False)


def downgrade():
    with op.batch_alter_table("social_links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_social_links_user_id"))
        batch_op.drop_index(batch_op.f("ix_social_links_last_attempted_at"))
        batch_op.drop_index(batch_op.f("ix_social_links_client_id"))

    op.drop_table("social_links")
    with op.batch_alter_table("social_link_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_social_link_attempts_user_id"))
        batch_op.drop_index(batch_op.f("ix_social_link_attempts_expires_at"))

    op.drop_table("social_link_attempts")
    with op.batch_alter_table("social_openid_nonces", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_social_openid_nonces_seen_at"))

    op.drop_table("social_openid_nonces")
