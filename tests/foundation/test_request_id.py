"""A request's id follows the job it started into the worker's JSON logs."""

from __future__ import annotations

import json
import time

import pytest

from tests.support import environment

pytestmark = pytest.mark.realworker


def test_request_id_reaches_the_worker_log(app, client, master, real_worker, wait_for_job):
    log_path = environment.TMP_DIR / "worker-request-id.log"
    real_worker.stop()
    # Per-job lines are DEBUG since the hot-path work (three INFO lines per job cost 7 % of a job).
    worker = environment.start_worker(concurrency=1, extra_env={"LOG_LEVEL": "DEBUG"}, log_path=log_path)
    try:
        response = client.post(
            "/v1/jobs/canary", json={}, headers={**master.headers, "X-Request-Id": "trace-into-worker-42"}
        )
        job_id = response.get_json()["data"]["id"]
        assert wait_for_job(job_id)["state"] == "succeeded"
        deadline = time.monotonic() + 10
        entries: list[dict] = []
        while time.monotonic() < deadline:
            entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
            if any(entry.get("job_id") == job_id for entry in entries):
                break
            time.sleep(0.1)
    finally:
        environment.stop_process(worker)
        real_worker.start()
    done = [entry for entry in entries if entry.get("job_id") == job_id]
    assert done, "the worker logged nothing about the job"
    assert all(entry["request_id"] == "trace-into-worker-42" for entry in done)
