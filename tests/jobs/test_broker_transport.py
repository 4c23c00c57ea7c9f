"""The Redis broker transport: one Redis client per channel, however many messages pass through it."""

from __future__ import annotations

import uuid

import pytest
import redis

pytestmark = pytest.mark.realworker


@pytest.fixture
def redis_clients_built(monkeypatch) -> list[int]:
    """Counts `redis.Redis` objects built in this process while the test runs."""
    built: list[int] = []
    original = redis.Redis.__init__

    def counting_init(self, *args, **kwargs) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)
    return built


def test_publishing_delivering_and_acknowledging_reuse_one_client(app, redis_clients_built):
    celery = app.extensions["celery"]
    with celery.connection_for_write() as connection:
        queue = connection.SimpleQueue(f"tessera-test-transport-{uuid.uuid4().hex[:8]}")
        try:
            for number in range(30):
                queue.put({"n": number})
            received = []
            for _ in range(30):
                message = queue.get(timeout=5)
                received.append(message.payload["n"])
                message.ack()
            assert received == list(range(30))
            with pytest.raises(queue.Empty):
                queue.get(block=False)
        finally:
            queue.queue.delete()
            queue.close()
    # kombu's own transport builds a client for every put, delivery record and acknowledgement (124 here).
    assert len(redis_clients_built) <= 3
