"""Jobs through HTTP: the canary runs end to end, results are tenant-scoped."""

from __future__ import annotations


def count_runs(app, job_id: str) -> int:
    from app.jobs.service import count_canary_runs

    with app.app_context():
        return count_canary_runs(job_id)


def test_canary_job_runs_end_to_end(app, client, master, wait_for_job):
    response = client.post("/v1/jobs/canary", json={"delay_ms": 0}, headers=master.headers)
    assert response.status_code == 202
    job = response.get_json()["data"]
    assert job["state"] == "queued" or job["state"] in {"running", "succeeded"}
    assert response.headers["Location"] == f"/v1/jobs/{job['id']}"
    finished = wait_for_job(job["id"])
    assert finished["state"] == "succeeded"
    assert finished["result"] == {"delay_ms": 0}
    assert finished["finished_at"].endswith("Z")
    polled = client.get(response.headers["Location"], headers=master.headers).get_json()["data"]
    assert polled["state"] == "succeeded"
    assert count_runs(app, job["id"]) == 1


def test_job_of_another_tenant_is_404(app, client, master):
    from tests.support.tenancy import make_master

    job_id = client.post("/v1/jobs/canary", json={}, headers=master.headers).get_json()["data"]["id"]
    stranger = make_master(app, "Stranger")
    response = client.get(f"/v1/jobs/{job_id}", headers=stranger.headers)
    assert response.status_code == 404
    assert client.get("/v1/jobs/does-not-exist", headers=master.headers).status_code == 404


def test_running_a_finished_job_again_changes_nothing(app, client, master, wait_for_job):
    from app.jobs.service import run_canary, run_job

    job_id = client.post("/v1/jobs/canary", json={}, headers=master.headers).get_json()["data"]["id"]
    wait_for_job(job_id)
    with app.app_context():
        run_job(job_id, run_canary)
    assert count_runs(app, job_id) == 1


def test_failed_handler_discards_its_writes(app, master):
    from app.db import commit
    from app.errors import Conflict
    from app.extensions import db
    from app.jobs.models import CanaryRun
    from app.jobs.service import enqueue_job, get_job, run_job

    with app.app_context():
        job_id = enqueue_job("jobs.canary", {}, client_id=master.client_id).id
        db.session.info.pop("after_commit", None)  # keep it unpublished: this test runs it by hand
        commit()

        def half_done(job):
            db.session.add(CanaryRun(job_id=job.id, worker="test"))
            db.session.flush()
            raise Conflict("refused on purpose")

        run_job(job_id, half_done)
        job = get_job(job_id)
        assert job.state == "failed"
        assert job.error == {"code": "conflict", "detail": "refused on purpose"}
    assert count_runs(app, job_id) == 0


def test_create_app_makes_no_connection(app):
    from app import create_app
    from app.extensions import celery

    try:
        other = create_app({"SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://nobody@127.0.0.1:1/none"})
        assert "jobs.get_job" in other.view_functions
    finally:  # the Celery app is process-wide: give it back to the session's application
        celery.flask_app = app
        celery.conf.update(app.config["CELERY"])


def test_a_handler_failing_transiently_is_retried_job_max_retries_times_then_the_job_fails(app, master, monkeypatch):
    from app.db import Mode, unit_of_work
    from app.jobs.runner import TransientError, job_task
    from app.jobs.service import get_job, insert_job

    runs: list[str] = []

    @job_task("tests.always_transient")
    def always_transient(job):
        runs.append(job.id)
        raise TransientError("the peer did not answer")

    monkeypatch.setitem(app.config, "JOB_MAX_RETRIES", 2)
    with app.app_context():
        with unit_of_work(Mode.STATEMENT) as connection:  # not published: run here, eagerly, retries included
            job_id = insert_job(connection, "tests.always_transient", {}, client_id=master.client_id).id
        always_transient.apply(args=[job_id])
        job = get_job(job_id)
        assert runs == [job_id] * 3  # the first run and JOB_MAX_RETRIES retries
        assert job.state == "failed"
        assert job.error == {"code": "retries_exhausted", "detail": "the peer did not answer"}
