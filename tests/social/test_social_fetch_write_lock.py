"""A fetch job and a concurrent request both write at their first attempt (SQLite write lock).

On SQLite a job whose transaction began deferred read its snapshot before the platform call; a
request committing meanwhile made the job's first write fail (SQLITE_BUSY_SNAPSHOT, "database is
locked"), the task was retried and the platform called again.
"""

from __future__ import annotations

import threading
import time

from tests.support.social import create_user, link_holding_first_fetch
from tests.support.social_fakes import Platforms


def test_a_request_writing_during_a_fetch_leaves_the_fetch_its_first_attempt(
    app, client, master, platforms: Platforms, monkeypatch, wait_for_job, caplog
) -> None:
    _, _, held, publish = link_holding_first_fetch(client, master, platforms, monkeypatch)
    assert len(held) == 1
    platforms.game_store.response_delay = 0.5
    worker = threading.Thread(target=publish, args=held[0])
    worker.start()
    deadline = time.monotonic() + 20
    while not platforms.game_store.api_calls:
        assert time.monotonic() < deadline, "the fetch never called the platform"
        time.sleep(0.01)
    # The fetch is inside its platform call: another unit of work writes and commits now.
    create_user(client, master)
    worker.join()
    job = wait_for_job(held[0][0])
    assert job["state"] == "succeeded", job
    assert "database is locked" not in caplog.text, "the fetch saved at its first attempt"
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1, "the platform was called once"
