"""Concurrent creations racing for the same unique value: one wins, the others get 409, none 5xx."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.support.tenancy import count_clients

RACERS = 8


def _race(app, path: str, body: dict, headers: dict) -> list[int]:
    def one(_index: int) -> int:
        with app.test_client() as own_client:
            return own_client.post(path, json=body, headers=headers).status_code

    with ThreadPoolExecutor(RACERS) as pool:
        return sorted(pool.map(one, range(RACERS)))


def test_racing_for_one_subdomain(app, master):
    before = count_clients(app, master.client_id)
    body = {"name": "racer", "domain": "race.example", "subdomain": f"r{master.client_id}"}
    statuses = _race(app, "/v1/sub_client", body, master.headers)
    assert statuses == [201] + [409] * (RACERS - 1), statuses
    assert count_clients(app, master.client_id) == before + 1


def test_racing_for_one_email_address(app, master):
    body = {"profile": {"email_address": "race@example.org"}}
    statuses = _race(app, "/v1/user/create", body, master.headers)
    assert statuses == [201] + [409] * (RACERS - 1), statuses
