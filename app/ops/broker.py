"""Broker transports: kombu's Redis and SQLAlchemy transports with what Tessera needs changed.

The embedded broker is kombu's SQLAlchemy transport on SQLite, polled often enough for snappy
jobs. kombu hands every transport option of this transport to `create_engine`, so the polling
interval cannot be passed as an option; it is a class attribute of this subclass instead (set by
`create_app` from `BROKER_POLLING_INTERVAL`, see `OpsSettings`), registered as the `tessera-sqla`
transport.

On Redis (`redis://`), `RedisTransport` (the `tessera-redis` transport) is kombu's transport
whose channel reuses one client for its synchronous commands. kombu builds a new `redis.Redis` for
every one of them (a publish, the record of a delivered message, its acknowledgement), and redis-py
rebuilds its table of ~170 response callbacks in each constructor (redis/redis-py#3624): that was
a quarter of a worker's consumer CPU per job. The client holds no connection of its own (each
command and pipeline takes one from the channel's pool), so one per channel is what kombu's
per-call clients were already.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis
from kombu.transport import sqlalchemy as kombu_sqlalchemy

TRANSPORT_NAME = "tessera-sqla"
REDIS_TRANSPORT_NAME = "tessera-redis"


class RedisChannel(kombu_redis.Channel):
    _sync_client = None

    def _create_client(self, asynchronous: bool = False):
        if asynchronous:  # the event loop's client (BRPOP): kombu keeps one already, `Channel.client`
            return super()._create_client(asynchronous=True)
        if self._sync_client is None:
            self._sync_client = super()._create_client()
        return self._sync_client


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel


class Transport(kombu_sqlalchemy.Transport):
    polling_interval = 0.05


def set_polling_interval(seconds: float) -> None:
    """How often a process polls the embedded broker (`BROKER_POLLING_INTERVAL`)."""
    Transport.polling_interval = seconds


TRANSPORT_ALIASES[TRANSPORT_NAME] = f"{__name__}:Transport"
TRANSPORT_ALIASES[REDIS_TRANSPORT_NAME] = f"{__name__}:RedisTransport"
