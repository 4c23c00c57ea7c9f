"""`app.dialect.DriverStatement`: the same rows as SQLAlchemy, refused where SQLAlchemy would convert,
SQLAlchemy's errors, and a connection a fault broke never reused."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select, text, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from app.db import statement_engine
from app.dialect import DriverStatement
from app.tenancy.models import Client
from app.users.models import User
from tests.support import environment


def test_rows_are_sqlalchemys_on_either_database(app, master):
    statement = select(Client.id, Client.name, Client.created_at, Client.path).where(Client.id == bindparam("id"))
    driver = DriverStatement(statement)
    with app.app_context(), statement_engine(app).connect() as connection:
        expected = tuple(connection.execute(statement, {"id": master.client_id}).first())
        assert driver.first(connection, {"id": master.client_id}) == expected
        assert driver.first(connection, {"id": 2**31 - 1}) is None


def test_statements_sqlalchemy_would_convert_are_refused():
    with pytest.raises(TypeError, match="profile"):
        DriverStatement(update(User).values(profile=bindparam("profile")).where(User.id == bindparam("id")))
    with pytest.raises(TypeError, match="expanding"):
        DriverStatement(select(User.id).where(User.id.in_(bindparam("ids", expanding=True))))


def test_a_missing_parameter_is_sqlalchemys_error(app):
    driver = DriverStatement(select(Client.id).where(Client.id == bindparam("id")))
    with app.app_context(), statement_engine(app).connect() as connection, pytest.raises(SQLAlchemyError):
        driver.first(connection, {})


@pytest.mark.realworker
def test_a_connection_the_server_dropped_is_discarded(app, master):
    from app.extensions import db

    driver = DriverStatement(select(Client.id).where(Client.id == bindparam("id")))
    engine = statement_engine(app)
    with app.app_context():
        with engine.connect() as connection:
            backend = connection.connection.driver_connection.info.backend_pid
            with db.engine.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
                other.commit()
            with pytest.raises(DBAPIError):
                driver.first(connection, {"id": master.client_id})
            assert connection.invalidated
        with engine.connect() as connection:  # a fresh connection from the pool answers
            assert connection.connection.driver_connection.info.backend_pid != backend
            assert driver.first(connection, {"id": master.client_id}) == (master.client_id,)
    assert environment.USING_POSTGRES
