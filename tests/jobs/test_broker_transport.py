"""The Redis broker transport: one Redis client per channel, acknowledgements written with the next delivery."""

from __future__ import annotations

import base64
import json
import os
import time
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


@pytest.fixture
def pipelines_sent(monkeypatch) -> list[int]:
    """Counts Redis pipelines (one round trip each) sent from this process while the test runs."""
    sent: list[int] = []
    original = redis.client.Pipeline.execute

    def counting_execute(self, *args, **kwargs):
        sent.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", counting_execute)
    return sent


def unacked_deliveries_on(app, queue_name: str) -> int:
    """Deliveries from `queue_name` the broker still holds as unacknowledged (the broker's other
    queues, such as the session's worker's, are left out)."""
    client = redis.Redis.from_url(app.config["CELERY"]["broker_url"])
    try:
        return sum(queue_name.encode() in raw for raw in client.hvals("unacked"))
    finally:
        client.close()


def pass_messages(app, count: int, queue_name: str | None = None) -> list[int]:
    """Put `count` messages on a fresh queue, then take and acknowledge each; their payloads in order."""
    celery = app.extensions["celery"]
    received = []
    with celery.connection_for_write() as connection:
        queue = connection.SimpleQueue(queue_name or f"tessera-test-transport-{uuid.uuid4().hex[:8]}")
        try:
            for number in range(count):
                queue.put({"n": number})
            for _ in range(count):
                message = queue.get(timeout=5)
                received.append(message.payload["n"])
                message.ack()
            with pytest.raises(queue.Empty):
                queue.get(block=False)
        finally:
            queue.queue.delete()
            queue.close()
    return received


def test_publishing_delivering_and_acknowledging_reuse_one_client(app, redis_clients_built):
    assert pass_messages(app, 30) == list(range(30))
    # kombu's own transport builds a client for every put, delivery record and acknowledgement (124 here).
    assert len(redis_clients_built) <= 3


def test_acknowledgements_ride_with_the_next_delivery_and_all_land_by_close(app, pipelines_sent):
    queue_name = f"tessera-test-transport-{uuid.uuid4().hex[:8]}"
    assert pass_messages(app, 30, queue_name) == list(range(30))
    # One pipeline per delivery record and a few for the queue itself (34 here); kombu's own QoS
    # sends one more per acknowledgement (63).
    assert len(pipelines_sent) <= 40
    assert unacked_deliveries_on(app, queue_name) == 0


def unacked_deliveries_of(job_ids: list[str]) -> int:
    """Deliveries of `job_ids` that the broker still holds as unacknowledged (to be delivered again)."""
    client = redis.Redis.from_url(os.environ["DIRECT_REDIS_URL"])
    try:
        return sum(any(job_id.encode() in raw for job_id in job_ids) for raw in client.hvals("unacked"))
    finally:
        client.close()


def test_a_worker_acknowledges_its_last_deliveries_without_waiting_for_another(
    client, master, real_worker, wait_for_job
):
    # No sweep requests either: nothing is delivered to this worker after the jobs.
    real_worker.stop()
    real_worker.start(extra_env={"OUTBOX_SWEEP_INTERVAL": "0"})
    try:
        job_ids = [
            client.post("/v1/jobs/canary", json={}, headers=master.headers).get_json()["data"]["id"] for _ in range(5)
        ]
        for job_id in job_ids:
            assert wait_for_job(job_id)["state"] == "succeeded"
        deadline = time.monotonic() + 10
        while unacked_deliveries_of(job_ids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert unacked_deliveries_of(job_ids) == 0
    finally:
        real_worker.stop()
        real_worker.start()


def _pushed_messages(monkeypatch) -> list[tuple[str, dict]]:
    """LPUSHes from this process while the test runs (queue, decoded message), kept from the broker."""
    pushed: list[tuple[str, dict]] = []

    def recording_lpush(self, name, *values):
        pushed.extend((name if isinstance(name, str) else name.decode(), json.loads(value)) for value in values)
        return len(values)

    monkeypatch.setattr(redis.Redis, "lpush", recording_lpush)
    return pushed


def _as_compared(queue: str, message: dict) -> dict:
    """A message without what differs from one publish to the next (ids, delivery tag) and the
    representations kombu also copies into the properties (nobody reads them there)."""
    headers = {key: value for key, value in message["headers"].items() if key not in {"id", "root_id"}}
    unread = {"correlation_id", "delivery_tag", "argsrepr", "kwargsrepr"}
    properties = {key: value for key, value in message["properties"].items() if key not in unread}
    body = json.loads(base64.b64decode(message["body"]))
    rest = {key: value for key, value in message.items() if key not in {"headers", "properties", "body"}}
    return {"queue": queue, "headers": headers, "properties": properties, "body": body, **rest}


def test_a_single_job_is_published_as_the_one_lpush_kombu_would_send(app, monkeypatch):
    from app.jobs import service
    from app.ops import broker

    pushed = _pushed_messages(monkeypatch)
    job_id = str(uuid.uuid4())
    with app.app_context():
        assert broker.direct_publisher(app.extensions["celery"]) is not None  # `redis://`: ours
        assert service.publish_job(job_id, "jobs.canary", "request-1")
        monkeypatch.setattr(service, "direct_publisher", lambda celery: None)  # Celery's and kombu's
        assert service.publish_job(job_id, "jobs.canary", "request-1")
    (ours_queue, ours), (theirs_queue, theirs) = pushed
    assert ours["headers"]["id"] == ours["headers"]["root_id"] == ours["properties"]["correlation_id"]
    assert _as_compared(ours_queue, ours) == _as_compared(theirs_queue, theirs)
    assert _as_compared(ours_queue, ours)["body"][:2] == [[job_id], {"request_id": "request-1"}]
    assert ours_queue == app.config["CELERY"]["task_default_queue"]
