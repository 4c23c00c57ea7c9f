"""issuer: signing keys of clients for credentials they issue

Revision ID: issuer_0001
Revises: 7c2e5a91d4f3
Create Date: 2026-11-25 07:00:00.000000

"""

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = "issuer_0001"
down_revision = "7c2e5a91d4f3"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "client_issuer_keys",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("key_type", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("public_key_multibase", sa.String(length=255), nullable=False),
        sa.Column("private_key_encrypted", sa.Text(), nullable=False),
        sa.Column("replaced_by", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["client_id"], ["clients.id"], name=op.f("fk_client_issuer_keys_client_id_clients")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_client_issuer_keys")),
    )
    with op.batch_alter_table("client_issuer_keys", schema=None) as batch_op:
        batch_op.create_index("ix_client_issuer_keys_client_state", ["client_id", "state"], unique=False)
        batch_op.create_index(batch_op.f("ix_client_issuer_keys_client_id"), ["client_id"], unique=False)


def downgrade():
    with op.batch_alter_table("client_issuer_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_client_issuer_keys_client_id"))
        batch_op.drop_index("ix_client_issuer_keys_client_state")
    op.drop_table("client_issuer_keys")
