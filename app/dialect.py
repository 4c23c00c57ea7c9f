"""What differs between SQLite and PostgreSQL, in one place: every other module writes one statement,
in SQLAlchemy Core from the table definitions, and runs it on either database.

- SQLite's transactions: pysqlite's own transaction handling is turned off and the unit of work's
  BEGIN is emitted here (`configure_sqlite`).
- A transaction-scoped lock only one process holds at a time (`try_transaction_lock`): an advisory
  lock on PostgreSQL, the database's write lock on SQLite.
- A commit that may be acknowledged before it reaches the disk (`relaxed_durability`): PostgreSQL's
  `synchronous_commit` for the transaction; SQLite has no such setting.
- Several statements in one round trip (`driver_pipeline`): psycopg's pipeline mode, each
  statement prepared; elsewhere the unit of work runs them one after another through SQLAlchemy.
- A statement run by the driver itself (`DriverStatement`), prepared, without SQLAlchemy's
  execution context: psycopg on PostgreSQL; elsewhere SQLAlchemy as usual.
- JSON columns as psycopg hands them over (bytes, `postgres_json_loads`); SQLite's are text.
- What says a row changed without reading it (`row_version`): PostgreSQL's row version (its
  `xmin` and `ctid`); SQLite has none, so there it is every column as one JSON array.

`FOR UPDATE` (with `SKIP LOCKED`) is written in the statements themselves: SQLite's compiler leaves
it out, its write lock already serialising the writers. Transaction boundaries are the unit of
work's (`app.db`), the one user of `BEGIN` and `COMMIT`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from psycopg.rows import namedtuple_row
from sqlalchemy import Executable, Float, String, Table, Update, event, false, func, select, true, update
from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeEngine

from app.cache import Cache


def configure_sqlite(engine: Engine, writes: Callable[[], bool]) -> None:
    """Give SQLite real transactions: BEGIN at the first statement, WAL, foreign keys.

    pysqlite only opens a transaction before data-changing statements, so a read followed by a
    write would not be atomic; emitting BEGIN ourselves makes every unit of work serialisable.
    When `writes()` says the unit of work will write, BEGIN IMMEDIATE takes the write lock up
    front: concurrent writers then queue on the busy timeout instead of failing when a read
    transaction cannot be upgraded (SQLITE_BUSY_SNAPSHOT), which would retry a job and repeat its
    effects (a platform called twice). A writer waits for the lock at most `DB_CALL_TIMEOUT`
    (sqlite3's busy timeout, set when connecting), then fails with 503.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes() else "BEGIN")


_JSON = json.JSONDecoder()


def postgres_json_loads(data: bytes | memoryview) -> Any:
    """psycopg's JSON loader (the engine's `json_deserializer`): the text decoded as UTF-8 (RFC 8259
    §8.1) straight to the decoder, without `json.loads`'s guess of the bytes' encoding, a third of
    the cost of a row's JSON members (four per client row)."""
    return _JSON.decode(str(data, "utf-8"))


def is_postgresql(connection: Connection) -> bool:
    return connection.dialect.name == "postgresql"


def relaxed_durability(connection: Connection, statement: Update) -> Update:
    """`statement`, made to let its transaction's commit be acknowledged before it reaches the disk.

    PostgreSQL: `synchronous_commit` is turned off for the transaction (`set_config(..., true)`,
    SET LOCAL) in a CTE the UPDATE reads from, so it costs no statement of its own. Elsewhere
    `statement` itself: there is no such setting. For transactions whose loss in a crash is
    recovered otherwise (a job's claim: the sweep).
    """
    if not is_postgresql(connection):
        return statement
    # By identity (a statement is never changed once built); the entry keeps it, so its id is not reused.
    known = _RELAXED.peek(id(statement))
    if known is None or known[0] is not statement:
        known = (statement, _relaxed(statement))
        _RELAXED.put(id(statement), known)
    return known[1]


def _relaxed(statement: Update) -> Update:
    setting = select(func.set_config("synchronous_commit", "off", true()).label("setting")).cte("relaxed")
    # Read from, so the CTE is evaluated: the setting's new value is never null.
    return statement.where(setting.c.setting.is_not(None))


_RELAXED: Cache[tuple[Update, Update]] = Cache("relaxed_statements", maxsize=64)


def try_transaction_lock(connection: Connection, key: int, table: Table) -> bool:
    """Take the lock named `key` until the transaction ends; False if another transaction holds it.

    PostgreSQL: a transaction-scoped advisory lock, refused at once when taken. SQLite: a write to
    `table` that changes nothing, as the transaction's first statement, takes the database's write
    lock (waiting for it, as any writer).
    """
    if is_postgresql(connection):
        return bool(connection.execute(select(func.pg_try_advisory_xact_lock(key))).scalar())
    first_column = next(iter(table.columns))
    connection.execute(update(table).where(false()).values({first_column.name: first_column}))
    return True


class Begin:
    """In a `driver_pipeline`: a transaction begins here."""


class Commit:
    """In a `driver_pipeline`: the transaction commits here."""


BEGIN, COMMIT = Begin(), Commit()
Step = Begin | Commit | tuple[Executable, dict[str, Any]]


def pipelines(connection: Connection) -> bool:
    """True when the driver sends several statements in one round trip (`driver_pipeline`)."""
    return connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg"


def driver_pipeline(connection: Connection, steps: Sequence[Step]) -> list[tuple[int, tuple | None] | None]:
    """Run `steps` on a psycopg connection in autocommit, in one round trip; a result per step.

    A statement's result is its `(rowcount, first row or None)`, the row a tuple in the statement's
    column order; `BEGIN` and `COMMIT` (which say where transactions begin and end) have None.
    Each statement runs prepared, compiled once, its parameters converted as SQLAlchemy would.
    For the unit of work (`app.db`) only, which runs the same steps through SQLAlchemy elsewhere.
    """
    # Per step: its SQL, its parameters, whether rows come back (None: BEGIN or COMMIT). Rows are
    # known from the statement: asking the cursor (its description) builds every column's description.
    commands: list[tuple[str, dict[str, Any] | None, bool | None]] = []
    for step in steps:
        if isinstance(step, Begin):
            commands.append(("BEGIN", None, None))
        elif isinstance(step, Commit):
            commands.append(("COMMIT", None, None))
        else:
            form = _driver_form(step[0], connection)
            commands.append((form.sql, form.parameters(step[1]), form.rows))
    with driver_errors(connection, "; ".join(sql for sql, _, _ in commands)) as driver, driver.pipeline():
        cursors = [driver.execute(sql, parameters, prepare=True) for sql, parameters, _ in commands]
    return [
        None if rows is None else (cursor.rowcount, cursor.fetchone() if rows else None)
        for (_, _, rows), cursor in zip(commands, cursors, strict=True)
    ]


class _DriverForm:
    """A Core statement compiled once for psycopg: its SQL and how SQLAlchemy converts its parameters."""

    def __init__(self, statement: Executable, connection: Connection) -> None:
        dialect = connection.dialect
        self.compiled = statement.compile(dialect=dialect)
        if self.compiled.literal_execute_params or self.compiled.post_compile_params:
            raise TypeError("a pipelined statement takes no expanding or literal-execute parameters")
        self.sql = str(self.compiled)
        self.rows = bool(statement.exported_columns)  # a SELECT, or DML with RETURNING
        # Parameters the statement fixes itself (literals SQLAlchemy binds), beside the caller's.
        self.constants = {name: value for name, value in self.compiled.params.items() if value is not None}
        self.processors = {
            name: processor
            for name, bind in self.compiled.binds.items()
            if (processor := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        }

    def parameters(self, values: dict[str, Any]) -> dict[str, Any]:
        parameters = {**self.constants, **values}
        for name, processor in self.processors.items():
            if parameters.get(name) is not None:
                parameters[name] = processor(parameters[name])
        return parameters


_DRIVER_FORMS: Cache[tuple[Executable, _DriverForm]] = Cache("driver_forms", maxsize=256)


def _driver_form(statement: Executable, connection: Connection) -> _DriverForm:
    # By identity, as `relaxed_durability`; only psycopg connections ask, so the dialect is always the same.
    known = _DRIVER_FORMS.peek(id(statement))
    if known is None or known[0] is not statement:
        known = (statement, _DriverForm(statement, connection))
        _DRIVER_FORMS.put(id(statement), known)
    return known[1]


@contextmanager
def driver_errors(connection: Connection, statement: str, parameters: Any = None) -> Iterator[Any]:
    """The driver's (psycopg's) connection under `connection`; its errors raised as SQLAlchemy's
    `DBAPIError`, as statements run through SQLAlchemy raise them, and a connection an error broke
    discarded from the pool."""
    driver_connection = connection.connection.driver_connection
    dbapi_error = connection.dialect.loaded_dbapi.Error
    try:
        yield driver_connection
    except dbapi_error as error:
        if driver_connection.closed or driver_connection.broken:
            connection.invalidate(error)
        raise DBAPIError.instance(statement, parameters, error, dbapi_error, dialect=connection.dialect) from error


_PSYCOPG = psycopg_dialect()


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
        self.statement = statement
        compiled = statement.compile(dialect=_PSYCOPG)
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


class _RowVersion(ColumnElement[str]):
    """`row_version(table)`: text that changes whenever a row of `table` is written."""

    inherit_cache = True
    _traverse_internals = [("table", InternalTraversal.dp_clauseelement)]
    type = String()

    def __init__(self, table: Table) -> None:
        self.table = table

    @property
    def _from_objects(self) -> list[Table]:
        return [self.table]


# How long a value kept by the row versions it was built from is served: on PostgreSQL a row version
# is unique within one database's history, and a logical replica promoted in its place numbers its own.
ROW_VERSION_TTL = 600.0


def row_version(table: Table) -> ColumnElement[str]:
    """Text that changes whenever a row of `table` is written, to read instead of the row where a
    value built from the row is kept (`app.cache`) and only its change matters.

    PostgreSQL: the row version's creating transaction and place (`xmin`, `ctid`), which every
    UPDATE changes, whoever writes it, and which cost no column read. Elsewhere: every column of the
    row as one JSON array, the row itself. Read from `table` as named in the FROM clause (no alias).
    A cache of values versioned by it keeps them at most `ROW_VERSION_TTL` seconds.
    """
    return _RowVersion(table)


@compiles(_RowVersion)
def _every_column(element: _RowVersion, compiler: Any, **kw: Any) -> str:
    return compiler.process(func.json_array(*element.table.columns), **kw)


@compiles(_RowVersion, "postgresql")
def _xmin_and_ctid(element: _RowVersion, compiler: Any, **kw: Any) -> str:
    name = compiler.preparer.format_table(element.table)
    return f"({name}.xmin::text || ':' || {name}.ctid::text)"
