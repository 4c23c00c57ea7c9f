"""The outbox on PostgreSQL + Redis with a real worker: a backlog is delivered once, accepted jobs outlive a cut.

Deliveries are counted where they wait: the session queue's list in Redis holds one message per
delivery to come.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from datetime import datetime, timedelta

import pytest
import redis
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from app.db import utcnow
from tests.support import environment
from tests.support.netproxy import TcpProxy

pytestmark = pytest.mark.realworker


def waiting_deliveries(job_ids: list[str] | None = None) -> int:
    """Messages waiting in the session's queue (only those of `job_ids` when given)."""
    client = redis.Redis.from_url(os.environ["DIRECT_REDIS_URL"])
    try:
        if job_ids is None:
            return client.llen(os.environ["CELERY_QUEUE"])
        messages = client.lrange(os.environ["CELERY_QUEUE"], 0, -1)
        return sum(message.count(job_id.encode()) > 0 for message in messages for job_id in job_ids)
    finally:
        client.close()


def sweep(app, **config) -> int:
    from app.jobs.service import sweep_outbox

    saved = {key: app.config[key] for key in config}
    app.config.update(config)
    try:
        with app.app_context():
            return sweep_outbox()
    finally:
        app.config.update(saved)


def job_rows(app, job_ids: list[str]) -> dict:
    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        rows = db.session.query(Job).filter(Job.id.in_(job_ids)).all()
        found = {
            row.id: {
                "attempts": row.attempts,
                "publish_count": row.publish_count,
                "published_at": row.published_at,
                "republish_at": row.republish_at,
            }
            for row in rows
        }
        db.session.rollback()
        return found


def count_runs(app, job_id: str) -> int:
    from app.jobs.service import count_canary_runs

    with app.app_context():
        return count_canary_runs(job_id)


def start_backlog(client, master, count: int) -> list[str]:
    return [
        client.post("/v1/jobs/canary", json={}, headers=master.headers).get_json()["data"]["id"] for _ in range(count)
    ]


def test_a_backlog_swept_while_it_waits_is_delivered_once_per_job(app, client, master, real_worker, wait_for_job):
    real_worker.stop()
    try:
        job_ids = start_backlog(client, master, 40)
        assert waiting_deliveries(job_ids) == 40
        rows = job_rows(app, job_ids)
        assert all(row["publish_count"] == 1 and row["published_at"] is not None for row in rows.values())

        # The jobs have waited past the grace period, which used to make the sweep publish them again.
        sweep(app, OUTBOX_GRACE_SECONDS=0)
        assert waiting_deliveries(job_ids) == 40
        assert {row["publish_count"] for row in job_rows(app, job_ids).values()} == {1}
    finally:
        real_worker.start()
    for job_id in job_ids:
        assert wait_for_job(job_id)["state"] == "succeeded"
    assert {row["attempts"] for row in job_rows(app, job_ids).values()} == {1}
    assert all(count_runs(app, job_id) == 1 for job_id in job_ids)


def test_a_job_presumed_lost_is_published_again_with_a_growing_delay(app, client, master, real_worker, wait_for_job):
    from app.db import transaction
    from app.extensions import db
    from app.jobs.models import Job

    real_worker.stop()
    try:
        job_id = start_backlog(client, master, 1)[0]
        with app.app_context(), transaction():
            job = db.session.get(Job, job_id)
            job.republish_at = job.published_at  # its re-publish delay has run out
        sweep(app, JOB_REPUBLISH_SECONDS=100)
        assert waiting_deliveries([job_id]) == 2
        row = job_rows(app, [job_id])[job_id]
        assert row["publish_count"] == 2
        assert timedelta(seconds=150) < row["republish_at"] - row["published_at"] <= timedelta(seconds=200)
        sweep(app, JOB_REPUBLISH_SECONDS=100)
        assert waiting_deliveries([job_id]) == 2
    finally:
        real_worker.start()
    assert wait_for_job(job_id)["state"] == "succeeded"
    assert count_runs(app, job_id) == 1


def test_the_oldest_queued_job_age_is_a_metric(app, client, master, real_worker):
    real_worker.stop()
    try:
        start_backlog(client, master, 1)
        time.sleep(0.05)
        body = client.get("/metrics", headers=metrics_headers(app)).get_data(as_text=True)
    finally:
        real_worker.start()
    line = next(line for line in body.splitlines() if line.startswith("tessera_jobs_oldest_queued_age_seconds "))
    assert float(line.split()[1]) > 0


def lose_the_brokers_data(app) -> None:
    """What a Redis restarted without persistence does to this run: its queues, their bindings and the marker
    are gone (only this run's keys, so other runs on the same Redis are left alone)."""
    queue = os.environ["CELERY_QUEUE"]
    client = redis.Redis.from_url(os.environ["DIRECT_REDIS_URL"])
    try:
        keys = [*client.scan_iter(match=f"{queue}*"), f"_kombu.binding.{queue}", f"tessera.broker-marker.{queue}"]
        client.delete(*keys)
    finally:
        client.close()


def test_jobs_a_broker_lost_run_within_seconds_of_the_next_sweep(app, client, master, real_worker, wait_for_job):
    assert app.config["JOB_REPUBLISH_SECONDS"] >= 300  # what the jobs would otherwise wait
    real_worker.stop()
    try:
        job_ids = start_backlog(client, master, 20)
        assert waiting_deliveries(job_ids) == 20
        lose_the_brokers_data(app)
        assert waiting_deliveries(job_ids) == 0
    finally:
        real_worker.start()  # its timer requests a sweep every OUTBOX_SWEEP_INTERVAL, as the beat does
    started = time.monotonic()
    for job_id in job_ids:
        assert wait_for_job(job_id, timeout=40)["state"] == "succeeded"
    assert time.monotonic() - started < 30
    assert all(count_runs(app, job_id) == 1 for job_id in job_ids)


def test_one_sweep_refills_a_broker_that_lost_its_data_and_the_next_finds_it_whole(
    app, client, master, real_worker, wait_for_job, caplog
):
    real_worker.stop()
    try:
        job_ids = start_backlog(client, master, 5)  # this process's publisher has declared the run's queues
        lose_the_brokers_data(app)
        with caplog.at_level(logging.INFO, logger="app.jobs.service"):
            assert sweep(app) >= 5
        [warning] = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
        assert warning.startswith("the broker lost ") and "queued message(s)" in warning
        assert waiting_deliveries(job_ids) == 5
        assert sweep(app) == 0
        assert waiting_deliveries(job_ids) == 5
    finally:
        real_worker.start()
    for job_id in job_ids:
        assert wait_for_job(job_id)["state"] == "succeeded"
    assert all(count_runs(app, job_id) == 1 for job_id in job_ids)


def published_and_queued(app) -> list[tuple]:
    """The jobs the broker holds a message of (published, not yet taken): kind, id, when published."""
    from sqlalchemy import select

    from app.extensions import db
    from app.jobs.models import QUEUED, Job

    with app.app_context():
        rows = db.session.execute(
            select(Job.kind, Job.id, Job.published_at, Job.created_at).where(
                Job.state == QUEUED, Job.published_at.is_not(None)
            )
        ).all()
        db.session.rollback()
    return [tuple(row) for row in rows]


def end_jobs_no_worker_runs(app) -> None:
    from sqlalchemy import update

    from app.db import transaction
    from app.extensions import celery, db
    from app.jobs.models import FAILED, QUEUED, Job

    with app.app_context(), transaction():
        db.session.execute(
            update(Job).where(Job.state == QUEUED, Job.kind.not_in(list(celery.tasks))).values(state=FAILED)
        )


def test_a_fresh_broker_is_not_reported_lost(app, client, master, real_worker, wait_for_job, caplog):
    """A Redis without the marker that held no job's message (a first start, a new Redis): nothing
    was lost, and the sweep says so at INFO, not as a loss; the marker is whole after."""
    finished = client.post("/v1/jobs/canary", json={}, headers=master.headers).get_json()["data"]["id"]
    assert wait_for_job(finished)["state"] == "succeeded"  # this run's queues are declared
    # No job of earlier tests may wait in the broker when it is emptied below: rows written directly
    # by other tests, of kinds no worker runs (the dialect tests' `jobs.contract`), are ended, and
    # those whose message the broker no longer holds are published again and run.
    end_jobs_no_worker_runs(app)
    lose_the_brokers_data(app)
    sweep(app)
    deadline = time.monotonic() + 60
    while (waiting := published_and_queued(app)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert waiting == [], f"jobs of earlier tests still wait in the broker: {waiting}"
    caplog.clear()
    real_worker.stop()
    try:
        lose_the_brokers_data(app)
        with caplog.at_level(logging.INFO, logger="app.jobs.service"):
            sweep(app)
    finally:
        real_worker.start()
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert warnings == []
    assert any("a fresh broker" in record.getMessage() for record in caplog.records)
    client_of_redis = redis.Redis.from_url(os.environ["DIRECT_REDIS_URL"])
    try:
        assert client_of_redis.get(f"tessera.broker-marker.{os.environ['CELERY_QUEUE']}") == b"whole"
    finally:
        client_of_redis.close()


def test_jobs_a_broker_lost_under_a_busy_worker_run_within_seconds(app, client, master, real_worker, wait_for_job):
    # The worker stays connected, so nothing declares the run's queues again but the sweep's refill.
    busy = [client.post("/v1/jobs/canary", json={"delay_ms": 3000}, headers=master.headers).get_json()["data"]["id"]
            for _ in range(2)]  # fmt: skip
    for job_id in busy:
        wait_for_job(job_id, states=("running",))
    job_ids = start_backlog(client, master, 10)
    assert waiting_deliveries(job_ids) == 10
    lose_the_brokers_data(app)
    started = time.monotonic()
    for job_id in [*busy, *job_ids]:
        assert wait_for_job(job_id, timeout=40)["state"] == "succeeded"
    assert time.monotonic() - started < 30
    assert all(count_runs(app, job_id) == 1 for job_id in [*busy, *job_ids])


# The bound: an accepted job starts within this long of a worker being back, whatever the fault.
STARTED_WITHIN_SECONDS = 30


def take_as_a_dying_worker(job_ids: list[str]) -> None:
    """What a worker killed just as it took each job's message leaves: the message out of its queue (the BRPOP
    done), recorded nowhere (killed before kombu's delivery record)."""
    client = redis.Redis.from_url(os.environ["DIRECT_REDIS_URL"])
    try:
        queue = os.environ["CELERY_QUEUE"]
        for message in client.lrange(queue, 0, -1):
            if any(job_id.encode() in message for job_id in job_ids):
                client.lrem(queue, 1, message)
    finally:
        client.close()


def assert_started_within_the_bound_and_run_once(app, wait_for_job, job_ids: list[str], back: datetime) -> None:
    """Each job succeeded, ran once, and started within the issue's bound of `back` (a worker's return)."""
    for job_id in job_ids:
        assert wait_for_job(job_id, timeout=STARTED_WITHIN_SECONDS + 30)["state"] == "succeeded"
    for job_id in job_ids:
        started = datetime.fromisoformat(environment.fetch_job(app, job_id)["started_at"].replace("Z", "+00:00"))
        assert (started - back).total_seconds() < STARTED_WITHIN_SECONDS, (job_id, started, back)
        assert count_runs(app, job_id) == 1


def test_jobs_whose_messages_a_worker_killed_as_it_took_them_start_once_a_worker_is_back(
    app, client, master, real_worker, wait_for_job
):
    assert app.config["JOB_REPUBLISH_SECONDS"] >= 300  # what the jobs would otherwise wait
    real_worker.stop()
    try:
        job_ids = start_backlog(client, master, 3)
        take_as_a_dying_worker(job_ids)
        assert waiting_deliveries(job_ids) == 0
    finally:
        back = utcnow()
        real_worker.start()
    assert_started_within_the_bound_and_run_once(app, wait_for_job, job_ids, back)


def test_a_refused_publish_that_could_not_be_recorded_starts_once_the_broker_is_back(
    app, client, master, real_worker, wait_for_job
):
    warm = start_backlog(client, master, 1)[0]  # the plain start: the pre-dispatch engine pools a connection
    assert wait_for_job(warm)["state"] == "succeeded"
    environment.DB_PROXY.cut()  # an earlier database fault: every pooled connection dies (no pre-ping)
    environment.DB_PROXY.restore()
    job_path = f"/v1/jobs/{warm}"
    deadline = time.monotonic() + 30
    while client.get(job_path, headers=master.headers).status_code != 200:  # the session's pool renewed
        assert time.monotonic() < deadline, "the API did not recover from the cut"
        time.sleep(0.2)
    environment.REDIS_PROXY.cut()
    try:
        # With an Idempotency-Key the view answers: its session commits the job, the publish is refused, and
        # the refusal's record meets the pre-dispatch engine's dead connection.
        answer = client.post(
            "/v1/jobs/canary", json={}, headers={**master.headers, "Idempotency-Key": uuid.uuid4().hex}
        )
        assert answer.status_code == 202, answer.get_data(as_text=True)
        job_id = answer.get_json()["data"]["id"]
        assert job_rows(app, [job_id])[job_id]["published_at"] is not None  # the refusal went unrecorded
    finally:
        back = utcnow()
        environment.REDIS_PROXY.restore()
    assert_started_within_the_bound_and_run_once(app, wait_for_job, [job_id], back)


class CanaryStream:
    """Canary jobs started over HTTP one after another in a thread, every `interval` seconds, until stopped."""

    def __init__(self, app, master, interval: float = 0.25) -> None:
        self.client, self.headers, self.interval = app.test_client(), master.headers, interval
        self.answers: list[tuple[int, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            answer = self.client.post("/v1/jobs/canary", json={}, headers=self.headers)
            body = answer.get_json(silent=True) or {}
            self.answers.append((answer.status_code, body.get("data", {}).get("id")))

    def stop(self) -> list[tuple[int, str | None]]:
        self._stop.set()
        self._thread.join(30)
        return self.answers


WAITING_ON_LOCKS_END = sa.text(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
)


def kill_as_it_takes(app, client, master, worker) -> str:
    """Have `worker` take a job whose claim waits on a row this test locks, and kill -9 it then: the job stays
    queued, its message delivered to a dead worker. Returns the job's id."""
    busy = client.post("/v1/jobs/canary", json={"delay_ms": 1500}, headers=master.headers)
    trap = client.post("/v1/jobs/canary", json={}, headers=master.headers)
    assert busy.status_code == trap.status_code == 202
    job_id = trap.get_json()["data"]["id"]
    holder = sa.create_engine(os.environ["DIRECT_DATABASE_URL"], poolclass=sa.pool.NullPool).connect()
    try:
        holder.execute(sa.text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"), {"id": job_id})
        deadline = time.monotonic() + 60
        while waiting_deliveries([job_id]):  # still in the queue: the worker has not taken it yet
            assert time.monotonic() < deadline and worker.poll() is None, "the worker never took the job"
            time.sleep(0.05)
        time.sleep(0.3)  # its claim waits on the row lock
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        # The dead worker's claim, still waiting on the lock, ends as the server's client check would end it
        # (`client_connection_check_interval`); else it would commit once the lock is released.
        holder.execute(WAITING_ON_LOCKS_END)
    finally:
        holder.rollback()
        holder.close()
    assert environment.fetch_job(app, job_id)["state"] == "queued"  # its claim died with the worker
    return job_id


def test_kill_9_every_few_seconds_as_workers_take_jobs_loses_none_and_runs_none_twice(
    app, client, master, real_worker, wait_for_job
):
    real_worker.stop()
    stream = CanaryStream(app, master)
    trapped = []
    try:
        for cycle in range(4):
            log_path = environment.TMP_DIR / f"worker-kill-9-{cycle}-{uuid.uuid4().hex[:6]}.log"
            worker = environment.start_worker(concurrency=1, log_path=log_path)
            trapped.append(kill_as_it_takes(app, client, master, worker))
    finally:
        answers = stream.stop()
        back = utcnow()
        real_worker.start()
    assert answers and all(status == 202 for status, _job_id in answers), answers
    job_ids = [*trapped, *(job_id for _status, job_id in answers)]
    assert_started_within_the_bound_and_run_once(app, wait_for_job, job_ids, back)


def metrics_headers(app) -> dict:
    token = app.config.get("METRICS_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def wait_for_log(path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not logged by the worker: {path.read_text(errors='replace')[-2000:]}")


# A cut database refuses connections; a frozen one (the proxy's blackhole) accepts them and never answers.
@pytest.mark.parametrize("fault", ["cut", "blackhole"])
def test_accepted_jobs_run_once_after_a_database_outage_longer_than_their_retries(
    app, client, master, real_worker, wait_for_job, fault
):
    direct = make_url(os.environ["DIRECT_DATABASE_URL"])
    proxy = TcpProxy(direct.host or "127.0.0.1", direct.port or 5432)
    worker_url = direct.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    log_path = environment.TMP_DIR / f"worker-db-{fault}-{uuid.uuid4().hex[:6]}.log"
    real_worker.stop()
    # Five retries of a handler's failure would take about a second; the outage lasts longer.
    worker = environment.start_worker(
        concurrency=1, extra_env={"DATABASE_URL": worker_url, "JOB_RETRY_BACKOFF_MAX": "0.2",
                                  "JOB_OUTAGE_RETRY_MAX": "0.5", "DB_CALL_TIMEOUT": "2", "DB_CONNECT_TIMEOUT": "2",
                                  "DB_STATEMENT_TIMEOUT_MS": "1500"}, log_path=log_path,
    )  # fmt: skip
    try:
        warm = start_backlog(client, master, 1)[0]
        assert wait_for_job(warm, timeout=60)["state"] == "succeeded"  # its connection is pooled when the fault hits
        getattr(proxy, fault)()
        job_ids = start_backlog(client, master, 5)
        for job_id in job_ids:
            wait_for_log(log_path, f"job {job_id}")  # the worker met the outage with each job
        time.sleep(3)
        assert {environment.fetch_job(app, job_id)["state"] for job_id in job_ids} == {"queued"}
        proxy.restore()
        restored = time.monotonic()
        finished = [wait_for_job(job_id, timeout=30) for job_id in job_ids]
        recovery = time.monotonic() - restored
    finally:
        proxy.restore()
        environment.stop_process(worker)
        real_worker.start()
    assert [job["state"] for job in finished] == ["succeeded"] * 5, finished
    assert recovery < 15, recovery
    assert all(count_runs(app, job_id) == 1 for job_id in job_ids)


def test_workers_sweep_the_outbox_without_a_beat(app, client, master, real_worker, wait_for_job):
    real_worker.stop()
    worker = environment.start_worker(
        concurrency=1, extra_env={"OUTBOX_GRACE_SECONDS": "0", "OUTBOX_SWEEP_INTERVAL": "0.3"}
    )
    try:
        environment.REDIS_PROXY.cut()
        try:
            job_id = client.post("/v1/jobs/canary", json={}, headers=master.headers).get_json()["data"]["id"]
        finally:
            environment.REDIS_PROXY.restore()
        assert job_rows(app, [job_id])[job_id]["published_at"] is None
        finished = wait_for_job(job_id, timeout=30)
    finally:
        environment.stop_process(worker)
        real_worker.start()
    assert finished["state"] == "succeeded"
    assert count_runs(app, job_id) == 1


def test_a_sweep_request_waits_on_the_sweep_queue_not_behind_the_jobs(app, real_worker):
    from app.jobs.tasks import request_sweep

    client = redis.Redis.from_url(os.environ["DIRECT_REDIS_URL"])
    sweep_queue = app.config["CELERY"]["task_routes"]["jobs.sweep_outbox"]["queue"]
    assert sweep_queue != os.environ["CELERY_QUEUE"]
    real_worker.stop()
    try:
        jobs_before, sweeps_before = waiting_deliveries(), client.llen(sweep_queue)
        with app.app_context():
            request_sweep(5.0)
        assert waiting_deliveries() == jobs_before
        assert client.llen(sweep_queue) == sweeps_before + 1
    finally:
        client.close()
        real_worker.start()


def add_unpublished_jobs(app, master, count: int) -> list[str]:
    """Canaries whose publish never happened (the broker was down when they committed), past the grace."""
    from app.db import transaction
    from app.extensions import db
    from app.jobs.models import Job

    created = utcnow() - timedelta(minutes=5)
    job_ids = [str(uuid.uuid4()) for _ in range(count)]
    with app.app_context(), transaction():
        db.session.add_all(
            Job(
                id=job_id,
                kind="jobs.canary",
                state="queued",
                payload={},
                client_id=master.client_id,
                attempts=0,
                created_at=created,
            )
            for job_id in job_ids
        )
    return job_ids


def sweep_in_thread(app) -> int:
    from app.jobs.service import sweep_outbox

    with app.app_context():
        return sweep_outbox()


def test_overlapping_sweeps_publish_each_job_of_a_backlog_once(app, master, real_worker, wait_for_job):
    from concurrent.futures import ThreadPoolExecutor

    real_worker.stop()
    try:
        job_ids = add_unpublished_jobs(app, master, 400)
        deadline = time.monotonic() + 60
        with ThreadPoolExecutor(max_workers=2) as pool:
            # Rounds until the backlog is out (a round whose first sweep finds the lock taken, by any
            # other sweeper of this database, publishes nothing and is simply followed by another).
            while not all(row["published_at"] for row in job_rows(app, job_ids).values()):
                assert time.monotonic() < deadline, "the backlog was never published"
                first = pool.submit(sweep_in_thread, app)
                # A worker's timer sweeping again and again while the first sweep publishes its batch.
                while not first.done():
                    pool.submit(sweep_in_thread, app).result(timeout=60)
                first.result()
        assert waiting_deliveries(job_ids) == 400
        assert {row["publish_count"] for row in job_rows(app, job_ids).values()} == {1}
    finally:
        real_worker.start()
    for job_id in job_ids:
        assert wait_for_job(job_id, timeout=60)["state"] == "succeeded"
    assert all(count_runs(app, job_id) == 1 for job_id in job_ids)


def test_a_sweep_does_nothing_while_another_holds_the_sweep_lock(app, master, real_worker, wait_for_job):
    from sqlalchemy import text

    from app.extensions import db
    from app.jobs.service import _SWEEP_LOCK_KEY

    real_worker.stop()
    try:
        job_ids = add_unpublished_jobs(app, master, 3)
        with app.app_context(), db.engine.connect() as holder:
            taken = holder.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": _SWEEP_LOCK_KEY})
            assert taken.scalar() is True
            assert sweep(app) == 0
            assert waiting_deliveries(job_ids) == 0
            holder.rollback()  # the other sweep ends: its lock goes with its transaction
        assert all(row["published_at"] is None for row in job_rows(app, job_ids).values())
        assert sweep(app) >= 3
        assert waiting_deliveries(job_ids) == 3
    finally:
        real_worker.start()
    for job_id in job_ids:
        assert wait_for_job(job_id)["state"] == "succeeded"
