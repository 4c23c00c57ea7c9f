"""The first social_data read waits for the fetch without ever blocking the worker (issue 14)."""

from __future__ import annotations

import threading
import time

from tests.support.config import change_settings
from tests.support.social import link_holding_first_fetch, social_data
from tests.support.social_fakes import Platforms


def test_first_read_answers_the_data_a_concurrent_worker_saves(
    app, client, master, platforms: Platforms, monkeypatch, wait_for_job, caplog
) -> None:
    user_id, steamid, held, publish = link_holding_first_fetch(client, master, platforms, monkeypatch)
    change_settings(monkeypatch, app, SOCIAL_DATA_WAIT=8)
    outcome: list = []

    def worker() -> None:
        # The job reaches the worker while the request is inside its wait.
        while not held:
            time.sleep(0.05)
        time.sleep(0.5)
        for args in held:
            outcome.append(publish(*args))

    thread = threading.Thread(target=worker)
    thread.start()
    answer = social_data(client, master, user_id)
    thread.join()
    assert answer.status_code == 200, answer.json
    assert answer.json["platform_a"]["platform_a_id"] == steamid
    job = wait_for_job(held[0][0])
    assert job["state"] == "succeeded"
    assert "database is locked" not in caplog.text, "the worker saved at its first attempt"
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1, "the platform was called once"
