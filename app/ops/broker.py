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

Its acknowledgements are batched (`RedisQoS`): an acknowledged message leaves kombu's unacked
index in the pipeline that records the next delivery, or within `ACK_FLUSH_SECONDS` when no
delivery comes, instead of in a round trip of its own. A job is final in the database before its
message is acknowledged, so an acknowledgement lost with a killed worker only means the broker
delivers that message again after its visibility timeout, and the job's claim turns it into a
no-op; a job is never run twice for it.

A single job's message skips Celery's `send_task` and kombu's producer (`RedisQueuePublisher`):
Celery's own `amqp.as_task_v2` builds the task message, which is wrapped in kombu's Redis envelope
and pushed to its queue in one LPUSH, what the producer sends for it. That machinery was about half
of the CPU of a web request that starts a job. Batches (the outbox sweep, a transaction queueing
many jobs) keep kombu's producer and its pipelined publish.

A message a worker took and never started (the worker was killed as it took it) is in no queue, or
stays in kombu's unacknowledged set until the broker's visibility timeout (an hour): the outbox
sweep reads what the broker holds (`held_messages`) and publishes again the jobs it does not hold.

A Redis broker restarted without persistence (or flushed) forgets every queued message without a
word. A marker key tells (`lost_since`, `begin_refill`, `end_refill`): it holds `whole` while the
broker has kept what it was given, and goes with the rest when the broker loses its data; the
outbox sweep then publishes every queued job again. A fresh broker has no marker either: the sweep
tells it from a lost one by the jobs it had published (`BrokerLoss.found_now`).
"""

from __future__ import annotations

import contextlib
import logging
from base64 import b64decode, b64encode
from dataclasses import dataclass
from datetime import UTC, datetime
from time import time
from typing import Any
from uuid import uuid4

from kombu.transport import TRANSPORT_ALIASES, virtual
from kombu.transport import redis as kombu_redis
from kombu.transport import sqlalchemy as kombu_sqlalchemy
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

TRANSPORT_NAME = "tessera-sqla"
REDIS_TRANSPORT_NAME = "tessera-redis"
# Acknowledgements waiting for the next delivery's pipeline are written at the latest after this
# long, or once this many have gathered.
ACK_FLUSH_SECONDS = 0.5
ACK_BATCH = 64
# The longest one wait of the embedded broker's consumer for a message (see `Transport.drain_events`).
DRAIN_SLICE_SECONDS = 0.25


class RedisQoS(kombu_redis.QoS):
    """kombu's ack emulation with acknowledgements written alongside the next delivery's record."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._acked: list[str] = []

    def append(self, message, delivery_tag: str) -> None:
        delivery = message.delivery_info
        with self.pipe_or_acquire() as pipe:
            self._forget_acked(pipe)
            pipe.zadd(self.unacked_index_key, {delivery_tag: time()})
            pipe.hset(
                self.unacked_key,
                delivery_tag,
                dumps([message._raw, delivery["exchange"], delivery["routing_key"]]),
            )
            pipe.execute()
            virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        self._acked.append(delivery_tag)
        virtual.QoS.ack(self, delivery_tag)
        if len(self._acked) >= ACK_BATCH:
            self.flush_acks()

    def flush_acks(self) -> None:
        """Write the acknowledgements still waiting, in one round trip."""
        if self._acked:
            with self.pipe_or_acquire() as pipe:
                self._forget_acked(pipe)
                pipe.execute()

    def _forget_acked(self, pipe) -> None:
        tags, self._acked = self._acked, []
        if tags:
            pipe.zrem(self.unacked_index_key, *tags)
            pipe.hdel(self.unacked_key, *tags)


class RedisChannel(kombu_redis.Channel):
    QoS = RedisQoS
    _sync_client = None

    def _create_client(self, asynchronous: bool = False):
        if asynchronous:  # the event loop's client (BRPOP): kombu keeps one already, `Channel.client`
            return super()._create_client(asynchronous=True)
        if self._sync_client is None:
            self._sync_client = super()._create_client()
        return self._sync_client

    def flush_acks(self) -> None:
        """Write the acknowledgements still waiting.

        With the broker unreachable they are dropped: it delivers those messages again after the
        visibility timeout, and their jobs, already final, are not run again.
        """
        if self._qos is not None:
            with contextlib.suppress(*self.connection_errors):
                self._qos.flush_acks()

    def close(self) -> None:
        if not self.closed:
            self.flush_acks()
        super().close()


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel

    def register_with_event_loop(self, connection, loop) -> None:
        super().register_with_event_loop(connection, loop)
        previous = getattr(self.cycle, "_ack_flush_tref", None)
        if previous is not None:  # a reconnect registers again
            previous.cancel()
        self.cycle._ack_flush_tref = loop.call_repeatedly(ACK_FLUSH_SECONDS, self._flush_acks)

    def _flush_acks(self) -> None:
        for channel in list(self.channels):
            channel.flush_acks()


class Transport(kombu_sqlalchemy.Transport):
    polling_interval = 0.05

    def drain_events(self, connection, timeout=None, **kwargs):
        """Wait at most `DRAIN_SLICE_SECONDS` per call (a timeout, as kombu's own), however long asked.

        Celery's blocking loop checks for a stop between calls and asks for 2 s each time, twice
        after a SIGTERM: short slices let a worker on the embedded broker stop within honcho's grace.
        """
        limit = DRAIN_SLICE_SECONDS if timeout is None else min(timeout, DRAIN_SLICE_SECONDS)
        return super().drain_events(connection, timeout=limit, **kwargs)


class RedisQueuePublisher:
    """Celery task messages written straight to the queues of a `redis://` broker, one LPUSH each.

    The message is Celery's (`amqp.as_task_v2`, protocol 2, routed by the app's router); the
    envelope is what kombu's Redis transport stores for a message published through the default
    exchange with the queue's name as routing key (its body JSON in base64 and a delivery tag), so
    a worker consuming with kombu sees no difference. A refused push raises, as a publish does.
    """

    def __init__(self, celery) -> None:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.celery = celery
        self.broker_url = celery.conf.broker_url
        # No retry here: a refused publish is the outbox sweep's to repeat, and a retried push that
        # did land would be a second message (harmless, as the claim makes it a no-op, but slower).
        self._client = _broker_client(celery, retry=Retry(NoBackoff(), 0))

    def publish(self, name: str, args: list, kwargs: dict, *, argsrepr: str, kwargsrepr: str) -> None:
        """Queue the task `name` with `args` and `kwargs` on the queue the app routes it to."""
        celery = self.celery
        task_id = str(uuid4())
        message = celery.amqp.as_task_v2(
            task_id,
            name,
            args,
            kwargs,
            argsrepr=argsrepr,
            kwargsrepr=kwargsrepr,
            ignore_result=celery.conf.task_ignore_result,
            reply_to=celery.thread_oid,
        )
        queue = celery.amqp.router.route({}, name, args, kwargs)["queue"].name
        envelope = {
            "body": b64encode(dumps(message.body).encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": message.headers,
            "properties": {
                **message.properties,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid4()),
            },
        }
        self._client.lpush(queue, dumps(envelope))


def direct_publisher(celery) -> RedisQueuePublisher | None:
    """The process's `RedisQueuePublisher` for `celery`, or None when its broker is not this
    module's Redis transport or its tasks run eagerly (then `apply_async` is the way)."""
    conf = celery.conf
    if conf.task_always_eager or conf.broker_transport != REDIS_TRANSPORT_NAME:
        return None
    publisher = getattr(celery, "_tessera_direct_publisher", None)
    if publisher is None or publisher.broker_url != conf.broker_url:
        publisher = celery._tessera_direct_publisher = RedisQueuePublisher(celery)
    return publisher


def set_polling_interval(seconds: float) -> None:
    """How often a process polls the embedded broker (`BROKER_POLLING_INTERVAL`)."""
    Transport.polling_interval = seconds


_WHOLE = b"whole"


def _marker(celery) -> tuple[Any, str] | None:
    """A Redis client of the broker and the key of its marker; None for a broker that is not Redis."""
    client = _redis_broker_client(celery)
    if client is None:
        return None
    return client, f"tessera.broker-marker.{celery.conf.task_default_queue}"


def _redis_broker_client(celery) -> Any:
    """A client of the broker if it is Redis, else None (the embedded broker keeps its messages in SQLite)."""
    if not celery.conf.broker_url.startswith(("redis://", "rediss://")):
        return None
    return _broker_client(celery)


def _broker_client(celery, **options: Any):
    """A client of the Redis broker, with the broker's socket timeouts."""
    import redis

    transport = celery.conf.broker_transport_options
    timeouts = {name: transport.get(name, 2) for name in ("socket_connect_timeout", "socket_timeout")}
    return redis.Redis.from_url(celery.conf.broker_url, **timeouts, **options)


@dataclass(frozen=True)
class BrokerLoss:
    """A broker without its marker: since when it may have lost what it held, and whether that was
    found now (no marker: a broker restarted empty, or a fresh one) or a refill is under way."""

    since: datetime
    found_now: bool


def lost_since(celery) -> BrokerLoss | None:
    """Since when the broker may have lost what it held and is being refilled; None while it is whole.

    A missing marker means the loss is found now: the caller tells a fresh broker from one that lost
    messages by what it had published. A broker that does not answer, or one that is not Redis,
    counts as whole: nothing is lost that a publish could restore.
    """
    found = _marker(celery)
    if found is None:
        return None
    client, key = found
    try:
        value = client.get(key)
    except Exception as exc:
        log.debug("broker marker unreadable: %s", exc.__class__.__name__)
        return None
    finally:
        client.close()
    if value == _WHOLE:
        return None
    if value is None:
        return BrokerLoss(datetime.now(UTC), found_now=True)
    return BrokerLoss(datetime.fromisoformat(value.decode()), found_now=False)


def begin_refill(celery, since: datetime) -> None:
    """Before publishing again what the broker lost: its queues declared again, the refill noted.

    kombu's Redis transport routes a message through bindings, which the broker lost too; a
    publisher that declared them before the loss may not declare them again on that connection,
    and its messages would have no route.
    """
    found = _marker(celery)
    if found is None:
        return
    client, key = found
    try:
        with celery.connection_for_write() as connection:
            channel = connection.default_channel
            for queue in celery.amqp.queues.values():
                queue(channel).declare()
        client.set(key, since.isoformat())
    except Exception as exc:  # the publishes that follow meet the same fault, and the sweep retries them
        log.warning("could not prepare the broker's refill: %s", exc.__class__.__name__)
    finally:
        client.close()


def end_refill(celery) -> None:
    """The broker holds again every queued job: its marker says whole, unless it was lost meanwhile."""
    found = _marker(celery)
    if found is None:
        return
    client, key = found
    try:
        client.set(key, _WHOLE, xx=True)  # a marker lost since the refill began stays lost
    except Exception as exc:  # the next sweep refills again, at worst publishing a job twice (run once)
        log.warning("could not mark the broker's refill done: %s", exc.__class__.__name__)
    finally:
        client.close()


# A queue longer than this is not read whole (`held_messages`): a backlog that long cannot be told apart.
QUEUE_READ_LIMIT = 1000


@dataclass(frozen=True)
class HeldMessages:
    """The task messages of the app's queues a Redis broker held at one instant, by their first argument (a
    job's id)."""

    arguments: frozenset[str]
    """Of messages waiting in a queue, delivered to a worker lately, or held there until their ETA."""
    stale_deliveries: dict[str, list[str]]
    """Delivery tags, by argument, of messages delivered longer ago and still unacknowledged: their worker
    died before it started them (a live one starts what it is given at once)."""


def held_messages(celery, stale_after: float) -> HeldMessages | None:
    """What a Redis broker holds of the app's queues, in one transaction; None when it cannot tell (another
    broker, Redis unreachable, a queue longer than `QUEUE_READ_LIMIT`).

    A message leaves its queue when a worker takes it, and is then recorded as delivered (kombu's
    unacknowledged set, with the time) until the worker acknowledges it: a worker killed between the
    two loses it from both, and one killed after the record leaves it there until the visibility
    timeout. A delivery older than `stale_after` seconds (past its ETA, for a retry's) is stale.
    """
    client = _redis_broker_client(celery)
    if client is None:
        return None
    queues = list(celery.amqp.queues)
    options = celery.conf.broker_transport_options
    unacked_key = options.get("unacked_key", kombu_redis.Channel.unacked_key)
    index_key = options.get("unacked_index_key", kombu_redis.Channel.unacked_index_key)
    try:
        with client.pipeline(transaction=True) as pipe:
            for queue in queues:
                pipe.llen(queue)
                pipe.lrange(queue, 0, QUEUE_READ_LIMIT - 1)
            pipe.hgetall(unacked_key)
            pipe.zrange(index_key, 0, -1, withscores=True)
            replies = pipe.execute()
        read_at = time()
    except Exception as exc:
        log.debug("the broker's messages are unreadable: %s", exc.__class__.__name__)
        return None
    finally:
        client.close()
    *queued, unacked, index = replies
    if any(length > QUEUE_READ_LIMIT for length in queued[::2]):
        return None
    arguments = {argument for messages in queued[1::2] for raw in messages if (argument := _first_argument(raw))}
    delivered_at = {tag.decode(): score for tag, score in index}
    stale: dict[str, list[str]] = {}
    for raw_tag, value in unacked.items():
        try:
            envelope, _exchange, routing_key = loads(value)
        except (TypeError, ValueError):  # not kombu's record: another application's
            continue
        argument = _first_argument(envelope)
        if routing_key not in queues or argument is None:
            continue
        tag = raw_tag.decode()
        if read_at - max(delivered_at.get(tag, 0.0), _eta(envelope)) < stale_after:
            arguments.add(argument)
        else:
            stale.setdefault(argument, []).append(tag)
    return HeldMessages(frozenset(arguments), stale)


def forget_deliveries(celery, tags: list[str]) -> None:
    """Drop stale deliveries (`HeldMessages.stale_deliveries`) from the broker's unacknowledged set, so
    its visibility timeout does not deliver them again; a broker that does not answer keeps them."""
    client = _redis_broker_client(celery) if tags else None
    if client is None:
        return
    options = celery.conf.broker_transport_options
    try:
        with client.pipeline(transaction=True) as pipe:
            pipe.zrem(options.get("unacked_index_key", kombu_redis.Channel.unacked_index_key), *tags)
            pipe.hdel(options.get("unacked_key", kombu_redis.Channel.unacked_key), *tags)
            pipe.execute()
    except Exception as exc:  # delivered again at the visibility timeout, and a no-op then
        log.debug("stale deliveries kept: %s", exc.__class__.__name__)
    finally:
        client.close()


def _first_argument(message: bytes | str | dict) -> str | None:
    """The first positional argument of a Celery task message (protocol 2) if it is a string, else None."""
    try:
        envelope = loads(message) if isinstance(message, bytes | str) else message
        body = envelope["body"]
        if envelope["properties"].get("body_encoding") == "base64":
            body = b64decode(body)
        first = loads(body)[0][0]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return first if isinstance(first, str) else None


def _eta(envelope: dict) -> float:
    """The message's ETA as a timestamp (a retry's countdown), or 0."""
    eta = envelope.get("headers", {}).get("eta")
    try:
        return datetime.fromisoformat(eta).timestamp() if eta else 0.0
    except (TypeError, ValueError):
        return 0.0


TRANSPORT_ALIASES[TRANSPORT_NAME] = f"{__name__}:Transport"
TRANSPORT_ALIASES[REDIS_TRANSPORT_NAME] = f"{__name__}:RedisTransport"
