"""Jobs: enqueue with the write that needs them, publish after commit, run exactly once.

A job row is written in the same transaction as the change that asked for it (transactional
outbox) and handed to the broker only after that transaction commits. Running a job is
idempotent: the row is locked, a final job is left alone, and the handler's writes commit
together with the job's final state, so a redelivered or re-published task never repeats an
effect.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flask import current_app
from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from app.db import (
    Mode,
    after_commit_batch,
    as_utc,
    commit_on_its_own,
    commit_with,
    transaction,
    unit_of_work,
    utcnow,
    write_with_commit,
)
from app.dialect import try_transaction_lock
from app.errors import DomainError, NotFound
from app.extensions import celery, db
from app.jobs.models import FAILED, QUEUED, RUNNING, SUCCEEDED, CanaryRun, Job
from app.ops.broker import begin_refill, direct_publisher, end_refill, forget_deliveries, held_messages, lost_since
from app.ops.logging import current_request_id
from app.ops.metrics import JOB_DURATION

log = logging.getLogger(__name__)

# After a failed publish the broker is presumed down for a moment: writes keep answering at
# full speed and the outbox sweep publishes what accumulated once the broker is back.
_BROKER_BACKOFF_SECONDS = 5.0
_broker_down_until = 0.0


@dataclass(frozen=True)
class CallOutside:
    """A handler's answer when its job must call another host: no call to another host runs in a transaction.

    `run_job` commits the claim (and what the handler wrote), runs `call()` with no transaction
    open, then, with the job locked again in a new transaction, `record(job, outcome)` returns the
    job's result (or raises a `DomainError` to fail it). An exception of `call()` propagates as the
    handler's would: the job stays running for the task's retry. No row is locked meanwhile, so the
    call must end well within `JOB_LEASE_SECONDS` (a total deadline): past the lease the sweep hands
    the job to another worker.
    """

    call: Callable[[], Any]
    record: Callable[[Job, Any], dict | None]


JobHandler = Callable[[Job], dict | CallOutside | None]
FailureHandler = Callable[[Job], None]
_failure_handlers: dict[str, FailureHandler] = {}


def register_failure_handler(kind: str, handler: FailureHandler) -> None:
    """Have `handler(job)` run whenever a job of `kind` fails, in the transaction that records it.

    It flushes only; it lets a feature settle what the job was for (e.g. a record left pending).
    """
    _failure_handlers[kind] = handler


def enqueue_job(
    kind: str,
    payload: dict,
    *,
    client_id: int | None = None,
    agent_did: str | None = None,
) -> Job:
    """Add a queued job to the current transaction; it is published once that transaction commits."""
    job = Job(**_queued_job(kind, payload, client_id, agent_did))
    # No flush: the rows of a transaction that queues many jobs go to the database in one batch.
    db.session.add(job)
    after_commit_batch("jobs", (job.id, kind, job.request_id), _publish_committed)
    return job


def insert_job(
    connection: Connection,
    kind: str,
    payload: dict,
    *,
    client_id: int | None = None,
    agent_did: str | None = None,
) -> Job:
    """Write a queued job through `connection`, a `STATEMENT` unit's (an answer given before dispatch).

    One Core INSERT, no session. The edge publishes the job with `publish_committed_jobs` once its
    unit has committed, as the session's commit publishes what `enqueue_job` added. Returns the
    job as `enqueue_job` does (an object no session holds).
    """
    values = _queued_job(kind, payload, client_id, agent_did)
    connection.execute(_INSERT_JOB, values)
    return Job(**values)


def _queued_job(kind: str, payload: dict, client_id: int | None, agent_did: str | None) -> dict[str, Any]:
    """The columns of a new queued job (the others keep their defaults).

    Written as published once already (`published_at`, `publish_count`, `republish_at` as a
    successful first publish records them): the publish after the commit almost always succeeds,
    and this saves a statement per job. A refused publish puts the job back to never published
    (`_UNPUBLISH`), due at the sweep after `OUTBOX_GRACE_SECONDS`. Should the process die between
    the commit and the publish, the sweep publishes the job at its `republish_at`.
    """
    now = utcnow()
    return {
        "id": str(uuid.uuid4()),
        "kind": kind,
        "state": QUEUED,
        "payload": payload,
        "client_id": client_id,
        "agent_did": agent_did,
        "request_id": current_request_id(),
        "attempts": 0,
        "created_at": now,
        "published_at": now,
        "publish_count": 1,
        "republish_at": now + _republish_delay(1),
    }


def publish_committed_jobs(jobs: list[Job]) -> None:
    """Publish jobs that `insert_job` wrote, once their unit of work has committed."""
    _publish_committed([(job.id, job.kind, job.request_id) for job in jobs])


def _publish_committed(pending: list[tuple[str, str, str | None]]) -> None:
    """Publish the jobs a transaction has just committed (written as published, `_queued_job`);
    those the broker refused are put back to never published (one statement, a unit of its own)."""
    published = _publish_jobs(pending)
    if len(published) == len(pending):
        return
    accepted = set(published)
    refused = [job_id for job_id, _kind, _request_id in pending if job_id not in accepted]
    try:
        with unit_of_work(Mode.STATEMENT) as connection:
            connection.execute(_UNPUBLISH, {"job_ids": refused})
    except Exception as exc:  # the sweep publishes them at their `republish_at` instead
        log.warning("could not record %d refused publishes: %s", len(refused), exc.__class__.__name__)


def _republish_delay(publish_count: int) -> timedelta:
    """How long a job published `publish_count` times may wait in the broker before it is published again."""
    config = current_app.config
    seconds = config["JOB_REPUBLISH_SECONDS"] * 2 ** min(max(publish_count - 1, 0), 16)
    return timedelta(seconds=min(seconds, config["JOB_REPUBLISH_MAX_SECONDS"]))


def _record_publishes(job_ids: list[str]) -> None:
    """Note that the broker accepted `job_ids` again now (the sweep's publishes). Flushes; the caller commits."""
    now = utcnow()
    table = Job.__table__
    db.session.execute(
        update(table).where(table.c.id.in_(job_ids)).values(published_at=now, publish_count=table.c.publish_count + 1)
    )


def publish_job(job_id: str, kind: str, request_id: str | None = None) -> bool:
    """Hand a committed job to the broker; False (and the sweep retries later) if it is down."""
    global _broker_down_until
    if time.monotonic() < _broker_down_until:
        return False
    try:
        args, kwargs = [job_id], {"request_id": request_id}
        # Given, the representations Celery would otherwise build with its safe repr for every message.
        argsrepr, kwargsrepr = repr(args), repr(kwargs)
        producer = _batch_producer.get()
        publisher = None if producer is not None else direct_publisher(celery)
        if publisher is not None:  # one job, one LPUSH; a batch goes through kombu's producer
            publisher.publish(kind, args, kwargs, argsrepr=argsrepr, kwargsrepr=kwargsrepr)
            return True
        task = celery.tasks.get(kind)
        # No queue declared per message (kombu copies and binds the queue to look it up in its cache):
        # a job goes to its queue by name through the default exchange, and workers declare their queues.
        options: dict[str, Any] = {
            "args": args,
            "kwargs": kwargs,
            "argsrepr": argsrepr,
            "kwargsrepr": kwargsrepr,
            "producer": producer,
            "declare": (),
        }
        if task is not None:
            task.apply_async(**options)
        else:
            celery.send_task(kind, **options)
        return True
    except Exception as exc:
        _broker_down_until = time.monotonic() + _BROKER_BACKOFF_SECONDS
        log.warning("broker unavailable, job %s stays in the outbox: %s", job_id, exc.__class__.__name__)
        return False


# The producer whose publish batch `publish_job` adds to, inside `_publish_jobs`.
_batch_producer: ContextVar[Any] = ContextVar("tessera_batch_producer", default=None)
# Redis commands buffered before a batch is sent: the first jobs of a large batch reach the workers
# after this many, not after the whole batch.
_PUBLISH_BATCH = 100


def _publish_jobs(pending: list[tuple[str, str, str | None]]) -> list[str]:
    """Publish committed jobs; the ids the broker accepted.

    Several jobs go out in kombu's publish batches (on Redis, one pipelined round trip per
    `_PUBLISH_BATCH` messages instead of one each). A batch that fails to go out counts as refused
    as a whole: the sweep publishes those jobs again, and a job whose message did reach the broker
    is then delivered twice and run once (its claim turns the second delivery into a no-op).
    """
    global _broker_down_until
    if len(pending) < 2 or celery.conf.task_always_eager or time.monotonic() < _broker_down_until:
        return [job_id for job_id, kind, request_id in pending if publish_job(job_id, kind, request_id)]
    try:
        with celery.producer_or_acquire() as producer, producer.batch(max_size=_PUBLISH_BATCH):
            token = _batch_producer.set(producer)
            try:
                published = [job_id for job_id, kind, request_id in pending if publish_job(job_id, kind, request_id)]
            finally:
                _batch_producer.reset(token)
    except Exception as exc:
        _broker_down_until = time.monotonic() + _BROKER_BACKOFF_SECONDS
        log.warning("broker unavailable, %d jobs stay in the outbox: %s", len(pending), exc.__class__.__name__)
        return []
    # A publish refused inside the batch may have been the failed send of messages buffered before it.
    return published if len(published) == len(pending) else []


def get_job(job_id: str) -> Job | None:
    return db.session.get(Job, job_id)


def require_job_for_client(job_id: str, client_ids: Callable[[], Any]) -> Job:
    """The job if it belongs to one of the caller's clients; NotFound otherwise."""
    job = get_job(job_id)
    if job is None or job.client_id is None or job.client_id not in client_ids():
        raise NotFound("No such job.")
    return job


def require_job_for_agent(job_id: str, agent_did: str) -> Job:
    job = get_job(job_id)
    if job is None or job.agent_did != agent_did:
        raise NotFound("No such job.")
    return job


_JOBS = Job.__table__
_JOB_KEYS = tuple(column.name for column in _JOBS.columns)
_INSERT_JOB = insert(_JOBS)
# Jobs whose first publish the broker refused, back to never published (the sweep's first case).
# Only jobs still waiting: one that went out in a batch reported as failed may be running, its row locked.
_UNPUBLISH = (
    update(_JOBS)
    .where(_JOBS.c.id.in_(bindparam("job_ids", expanding=True)), _JOBS.c.state == QUEUED)
    .values(published_at=None, publish_count=0, republish_at=None)
)
_LOCK_JOB = select(_JOBS).where(_JOBS.c.id == bindparam("job_id")).with_for_update()
# A claim leases the job to this worker. Its commit may be acknowledged before it reaches disk
# (`commit_on_its_own`): losing it in a crash leaves the job queued or its lease expiring, and the
# sweep re-publishes it.
_CLAIM_JOB = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("job_id"), or_(_JOBS.c.state == QUEUED, _JOBS.c.state == RUNNING))
    .values(
        state=RUNNING,
        attempts=_JOBS.c.attempts + 1,
        started_at=func.coalesce(_JOBS.c.started_at, bindparam("now")),
        lease_expires_at=bindparam("lease"),
    )
)


def _lock_job(job_id: str) -> Job | None:
    """Lock the job's row until the transaction ends; the job as it is now, or None if unknown.

    One Core statement: the row becomes a persistent `Job` without the ORM's load machinery,
    which cost more than the round trip itself on the worker's hot path.
    """
    row = db.session.execute(_LOCK_JOB, {"job_id": job_id}).first()
    return None if row is None else _as_session_job(row._mapping)


def _as_session_job(values: Mapping[str, Any]) -> Job:
    """The job of a locked row, as a persistent object of the session (refreshed if already there)."""
    loaded = db.session.identity_map.get(identity_key(Job, values["id"]))
    if loaded is not None:  # already in this session: refresh it from the locked row
        for key, value in values.items():
            set_committed_value(loaded, key, value)
        return loaded
    job = Job(**values)
    make_transient_to_detached(job)
    db.session.add(job)
    return job


def claim_job(job_id: str) -> bool:
    """Mark a job running and lease it to this worker; False when it is unknown or already final.

    Committed on its own so the job shows as running while the work happens; the effect itself
    is guarded again by the row lock in `run_job`.
    """
    with unit_of_work(Mode.JOB):
        claimed, _ = commit_on_its_own(_CLAIM_JOB, _claim_values(job_id))
        return claimed == 1


def _claim_values(job_id: str) -> dict[str, Any]:
    now = utcnow()
    return {"job_id": job_id, "now": now, "lease": now + timedelta(seconds=current_app.config["JOB_LEASE_SECONDS"])}


def _claim_and_lock(job_id: str) -> Job | None:
    """Commit the claim of `job_id`, then lock its row in the unit's (new) transaction.

    The job as locked, or None when this worker did not claim it (unknown, or already final).
    Must be the first thing a `JOB` unit of work does: on PostgreSQL the claim and the lock that
    begins the effect's transaction travel in one round trip (`commit_on_its_own`).
    """
    claimed, row = commit_on_its_own(_CLAIM_JOB, _claim_values(job_id), then=_LOCK_JOB)
    if claimed != 1 or row is None:
        return None
    return _as_session_job(dict(zip(_JOB_KEYS, row, strict=True)))


def run_job(job_id: str, handler: JobHandler, *, max_attempts: int | None = None) -> None:
    """Run `handler` for a job exactly once; its writes commit with the job's final state.

    A handler that calls another host returns a `CallOutside`: the call runs between two
    transactions, with the job claimed (running, leased) but no row locked.

    A `DomainError` from the handler discards its writes and records the job as failed.
    Other exceptions propagate (the task decides whether to retry) and leave the job running.
    With `max_attempts`, a job started more often than that (its runs kept outliving the lease,
    or kept failing) is failed with `attempts_exhausted` instead of being run again.
    """
    try:
        with unit_of_work(Mode.JOB):
            job = _claim_and_lock(job_id)
            if job is None or job.is_final:
                return
            if max_attempts is not None and job.attempts > max_attempts:
                detail = f"started {job.attempts - 1} times without finishing; not run again"
                _finish(job, FAILED, error={"code": "attempts_exhausted", "detail": detail})
                return
            result = handler(job)
            if not isinstance(result, CallOutside):
                _succeed_and_commit(job, result or {})
                return
        outcome = result.call()
        with unit_of_work(Mode.JOB):
            job = _lock_job(job_id)
            if job is not None and not job.is_final:
                _succeed_and_commit(job, result.record(job, outcome) or {})
    except DomainError as error:
        fail_job(job_id, {"code": error.code, "detail": error.detail, **error.extra})


def fail_job(job_id: str, error: dict) -> None:
    """Record a job as failed with `error` unless it is already final. Commits."""
    with transaction():
        job = _lock_job(job_id)
        if job is not None and not job.is_final:
            _finish(job, FAILED, error=error)


_FINISH_JOB = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("job_id"))
    .values({name: bindparam(name) for name in ("state", "result", "error", "finished_at", "lease_expires_at")})
)


def _finish(job: Job, state: str, *, result: dict | None = None, error: dict | None = None) -> None:
    """Record the locked job's final state: one Core UPDATE, the object kept in step without a flush."""
    final = {"state": state, "result": result, "error": error, "finished_at": utcnow(), "lease_expires_at": None}
    db.session.execute(_FINISH_JOB, {"job_id": job.id, **final})
    _finished(job, final)


def _finished(job: Job, final: dict[str, Any]) -> None:
    """After the final row is written: the object in step with it, a failure's handler, the duration."""
    for key, value in final.items():
        set_committed_value(job, key, value)
    if final["state"] == FAILED and job.kind in _failure_handlers:
        _failure_handlers[job.kind](job)
    duration = final["finished_at"] - as_utc(job.created_at)
    JOB_DURATION.labels(job.kind, final["state"]).observe(duration.total_seconds())


def _succeed_and_commit(job: Job, result: dict) -> None:
    """Record the locked job as succeeded with `result`, committed with the handler's writes.

    The final state is the unit's last write (`commit_with`): on PostgreSQL it travels with the
    COMMIT, one round trip.
    """
    final = {"state": SUCCEEDED, "result": result, "error": None, "finished_at": utcnow(), "lease_expires_at": None}
    commit_with(_FINISH_JOB, {"job_id": job.id, **final})
    _finished(job, final)


# Any constant shared by every process of a deployment: the key of the sweep's advisory lock.
_SWEEP_LOCK_KEY = 0x7E55E4A0
_SWEEP_BATCH = 1000


def sweep_outbox() -> int:
    """Re-publish jobs the broker never took, lost, or abandoned by a dead worker.

    Runs on the beat's schedule and on every worker's timer, so one sweeper at a time: on
    PostgreSQL a transaction-scoped advisory lock (another sweep returns 0 at once), on SQLite
    the database's write lock taken first. A queued job the broker accepted more than
    `OUTBOX_GRACE_SECONDS` ago is published again when a Redis broker holds no message of it
    (`app.ops.broker.held_messages`: a worker killed as it took it, a publish refused and not
    recorded) or holds only a delivery that long unstarted (its worker died). Otherwise (a broker
    that cannot tell) it is published again only after `JOB_REPUBLISH_SECONDS`, doubling with each
    publish, so a backlog is not re-queued. A broker that lost its data
    (`app.ops.broker.lost_since`) is refilled at once: every queued job published before the loss
    was found is published again, a batch per sweep. Commits; returns how many jobs were published.
    """
    now = utcnow()
    grace_seconds = current_app.config["OUTBOX_GRACE_SECONDS"]
    grace = timedelta(seconds=grace_seconds)
    due = [
        # Never published and never claimed by a sweep (a claimed one is due at `republish_at`).
        (Job.state == QUEUED)
        & Job.published_at.is_(None)
        & Job.republish_at.is_(None)
        & (Job.created_at < now - grace),
        (Job.state == QUEUED) & (Job.republish_at < now),
        (Job.state == RUNNING) & (Job.lease_expires_at < now),
    ]
    loss = lost_since(celery)
    lost = None if loss is None else loss.since
    if lost is not None:  # the broker may have lost its messages: every job queued before that is due
        published_before_loss = (Job.state == QUEUED) & Job.published_at.is_not(None) & (Job.published_at < lost)
        due.append(or_((Job.state == QUEUED) & Job.published_at.is_(None), published_before_loss))
    unstarted = (Job.state == QUEUED) & (Job.published_at < now - grace)
    held = held_messages(celery, grace_seconds) if _any_job(unstarted) else None
    if held is not None:  # accepted, unstarted, and not in the broker's hands: lost on the way
        due.append(unstarted & Job.id.not_in(held.arguments) if held.arguments else unstarted)
    stuck = (
        select(Job)
        .where(or_(*due))
        .order_by(Job.created_at)
        .limit(_SWEEP_BATCH)
        # A row locked by a worker belongs to a handler still at work: not abandoned.
        .with_for_update(skip_locked=True)
    )
    with transaction():
        if not try_transaction_lock(db.session.connection(), _SWEEP_LOCK_KEY, _JOBS):
            return 0
        jobs = db.session.execute(stuck).scalars().all()
        if loss is not None and loss.found_now:
            _report_broker_loss(db.session.scalar(select(func.count()).where(published_before_loss)))
        for job in jobs:
            # Claimed for this round: a sweep that starts while this one publishes (the lock is
            # released at the commit below) leaves these jobs alone until `republish_at`.
            job.republish_at = now + _republish_delay(job.publish_count + 1)
            if job.state == RUNNING:
                job.lease_expires_at = now + timedelta(seconds=current_app.config["JOB_LEASE_SECONDS"])
        pending = [(job.id, job.kind, job.request_id) for job in jobs]
    if lost is not None:
        begin_refill(celery, lost)
    published = _publish_jobs(pending)
    if held is not None:
        forget_deliveries(celery, [tag for job_id in published for tag in held.stale_deliveries.get(job_id, ())])
    accepted = set(published)
    refused = [job_id for job_id, _kind, _request_id in pending if job_id not in accepted]
    if lost is not None and not refused and len(pending) < _SWEEP_BATCH:
        end_refill(celery)
    if pending:
        with transaction():
            if published:
                _record_publishes(published)
            if refused:  # the broker is down: due again at the next sweep
                db.session.execute(update(Job.__table__).where(Job.id.in_(refused)).values(republish_at=now))
        log.info("outbox sweep published %d of %d jobs", len(published), len(pending))
    return len(published)


def _any_job(condition: Any) -> bool:
    """Whether a job meets `condition`: a read of its own, before the sweep asks the broker anything."""
    with unit_of_work(Mode.READ):
        return db.session.execute(select(Job.id).where(condition).limit(1)).first() is not None


def _report_broker_loss(lost_messages: int) -> None:
    """A broker found without its marker lost messages only when it held jobs' messages: a fresh
    broker (a first start, a new Redis) held none."""
    if lost_messages:
        log.warning(
            "the broker lost %d queued message(s) (restarted without persistence?); publishing them again",
            lost_messages,
        )
    else:
        log.info("the broker holds no marker and no job waited in it (a fresh broker): nothing was lost")


def count_jobs_by_state() -> dict[str, int]:
    rows = db.session.execute(select(Job.state, func.count()).group_by(Job.state)).all()
    db.session.rollback()
    counts = {QUEUED: 0, RUNNING: 0, SUCCEEDED: 0, FAILED: 0}
    counts.update({state: count for state, count in rows})
    return counts


def oldest_queued_job_age_seconds() -> float | None:
    """Seconds the oldest queued job has waited, or None when nothing is queued. Read only."""
    oldest = db.session.scalar(select(func.min(Job.created_at)).where(Job.state == QUEUED))
    if oldest is None:
        return None
    return max((utcnow() - as_utc(oldest)).total_seconds(), 0.0)


def start_canary(client_id: int, delay_ms: int, connection: Connection | None = None) -> Job:
    """Queue a canary job that proves the pipeline end to end (outbox, broker, worker, database).

    In the session's transaction (`enqueue_job`), or through `connection` (`insert_job`: the
    caller publishes it once its unit has committed).
    """
    if connection is not None:
        return insert_job(connection, "jobs.canary", {"delay_ms": delay_ms}, client_id=client_id)
    return enqueue_job("jobs.canary", {"delay_ms": delay_ms}, client_id=client_id)


# One Core INSERT without RETURNING (the run's id is not needed), every value given: on PostgreSQL
# it travels with the job's final state and the COMMIT (`write_with_commit`).
_CANARY_RUNS = CanaryRun.__table__
_RECORD_CANARY_RUN = insert(_CANARY_RUNS).values({name: bindparam(name) for name in ("job_id", "worker", "created_at")})
_HOSTNAME = socket.gethostname()


def run_canary(job: Job) -> dict:
    """The canary's effect: one row per execution; the delay lets tests interrupt a running job."""
    delay_ms = int(job.payload.get("delay_ms", 0))
    if delay_ms:
        time.sleep(delay_ms / 1000)
    write_with_commit(_RECORD_CANARY_RUN, {"job_id": job.id, "worker": _HOSTNAME, "created_at": utcnow()})
    return {"delay_ms": delay_ms}


def count_canary_runs(job_id: str) -> int:
    return db.session.scalar(select(func.count()).select_from(CanaryRun).where(CanaryRun.job_id == job_id))
