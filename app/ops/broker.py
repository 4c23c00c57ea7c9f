"""The embedded broker: kombu's SQLAlchemy transport on SQLite, polled often enough for snappy jobs.

kombu hands every transport option of this transport to `create_engine`, so the polling interval
cannot be passed as an option; it is a class attribute of this subclass instead (set by
`create_app` from `BROKER_POLLING_INTERVAL`, see `OpsSettings`), registered as the `tessera-sqla`
transport.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import sqlalchemy as kombu_sqlalchemy

TRANSPORT_NAME = "tessera-sqla"


class Transport(kombu_sqlalchemy.Transport):
    polling_interval = 0.05


def set_polling_interval(seconds: float) -> None:
    """How often a process polls the embedded broker (`BROKER_POLLING_INTERVAL`)."""
    Transport.polling_interval = seconds


TRANSPORT_ALIASES[TRANSPORT_NAME] = f"{__name__}:Transport"
