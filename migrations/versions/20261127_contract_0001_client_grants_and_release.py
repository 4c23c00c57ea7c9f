"""clients: grant_types (grants beyond authorization_code and refresh_token), require_pkce, reads_credentials

Clients that were given client_credentials scopes keep the client_credentials grant; every other
client now needs it enabled.

Revision ID: contract_0001
Revises: users_0001
Create Date: 2026-11-27 11:30:00

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql


# revision identifiers, used by Alembic.
revision = "contract_0001"
down_revision = "users_0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql")


def upgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("grant_types", JSON, nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("require_pkce", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("reads_credentials", sa.Boolean(), nullable=False, server_default=sa.true()))
    clients = sa.table(
        "clients",
        sa.column("id", sa.Integer()),
        sa.column("client_credentials_scopes", JSON),
        sa.column("grant_types", JSON),
    )
    connection = op.get_bind()
    machine_clients = [
        row.id
        for row in connection.execute(sa.select(clients.c.id, clients.c.client_credentials_scopes))
        if row.client_credentials_scopes
    ]
    for client_id in machine_clients:
        connection.execute(clients.update().where(clients.c.id == client_id).values(grant_types=["client_credentials"]))


def downgrade():
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_column("reads_credentials")
        batch_op.drop_column("require_pkce")
        batch_op.drop_column("grant_types")
