"""registration: what the clients registered under a client's initial access tokens may ask for (the scopes of
their client_credentials grant); none until the client allows some

Revision ID: exact_0001
Revises: children_0001
Create Date: 2026-12-07 23:30:00

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql


# revision identifiers, used by Alembic.
revision = "exact_0001"
down_revision = "children_0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql")


def upgrade():
    op.create_table(
        "registration_policies",
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("client_credentials_scopes", JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["client_id"], ["clients.id"], name=op.f("fk_registration_policies_client_id_clients"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("client_id", name=op.f("pk_registration_policies")),
    )


def downgrade():
    op.drop_table("registration_policies")
