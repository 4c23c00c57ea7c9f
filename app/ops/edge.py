"""The database side of the answers given before Flask dispatches (the hot routes, app/web/hot.py):
the engine their statements share, and their statements run by the driver itself.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from psycopg.rows import namedtuple_row
from sqlalchemy import Executable, Float
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.types import TypeEngine

from app.db import statement_engine
from app.dialect import driver_errors


def edge_engine(app: Flask) -> Engine:
    """The engine of statements run before dispatch: the database package's autocommit engine
    (`app.db.statement_engine`); each statement is a unit of work of its own (a read, or the one
    write of the code exchange)."""
    return statement_engine(app)


class DriverStatement:
    """A Core statement that psycopg runs itself on PostgreSQL, compiled once, as a prepared statement.

    On the hottest statements SQLAlchemy's execution context and result objects cost more CPU than
    the statement's round trip; psycopg alone needs none of them, given SQL and parameters that
    need no conversion. Construction refuses statements whose parameters or columns SQLAlchemy
    would convert for PostgreSQL (e.g. JSON parameters), so a row is the same either way, and
    expanding IN lists (use `= any_(array)`). Other dialects run the statement through
    SQLAlchemy as usual. Driver errors surface as SQLAlchemy's `DBAPIError`, and a connection
    the error broke is discarded from the pool.
    """

    def __init__(self, statement: Executable) -> None:
        from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect

        self.statement = statement
        compiled = statement.compile(dialect=psycopg_dialect())
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise TypeError("a DriverStatement takes no expanding or literal-execute parameters")
        dialect = compiled.dialect
        converted = [name for name, bind in compiled.binds.items()
                     if bind.type.dialect_impl(dialect).bind_processor(dialect)]  # fmt: skip
        converted += [column.key for column in statement.exported_columns if _converts_results(column.type, dialect)]
        if converted:
            raise TypeError(f"SQLAlchemy would convert {converted}: not a DriverStatement")
        self._sql = str(compiled)
        # Parameters the statement fixes itself (literals SQLAlchemy binds), beside the caller's.
        self._constants = {name: value for name, value in compiled.params.items() if value is not None}

    def first(self, connection: Connection, parameters: dict[str, Any]) -> Any:
        """The statement's first row, or None: a tuple whose members are named as in SQLAlchemy's row."""
        return self._fetch(connection, parameters, one=True)

    def all(self, connection: Connection, parameters: dict[str, Any]) -> list[Any]:
        """Every row of the statement, each as `first` returns one."""
        return self._fetch(connection, parameters, one=False)

    def _fetch(self, connection: Connection, parameters: dict[str, Any], *, one: bool) -> Any:
        if connection.dialect.name != "postgresql" or connection.dialect.driver != "psycopg":
            result = connection.execute(self.statement, parameters)
            return result.first() if one else result.all()
        with driver_errors(connection, self._sql, parameters) as driver_connection:
            cursor = driver_connection.cursor(row_factory=namedtuple_row)
            cursor.execute(self._sql, {**self._constants, **parameters}, prepare=True)
            return cursor.fetchone() if one else cursor.fetchall()


def _converts_results(column_type: TypeEngine, dialect: Dialect) -> bool:
    if isinstance(column_type, Float) and not column_type.asdecimal:
        return False  # double precision: psycopg reads a float, as SQLAlchemy would (which needs the column's OID)
    try:
        return column_type.dialect_impl(dialect).result_processor(dialect, None) is not None
    except TypeError:  # a processor chosen by the column's OID (numeric types): not known here
        return True
