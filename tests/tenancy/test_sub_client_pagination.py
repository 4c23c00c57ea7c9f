"""Pagination envelope of GET /v1/sub_client with 0, 1, 99 and 250 children."""

from __future__ import annotations

import math

import pytest


def _add_children(app, parent_id: int, count: int) -> list[int]:
    """Create `count` children of `parent_id` directly through the service (fast set-up)."""
    from app.db import transaction
    from app.tenancy import service
    from app.tenancy.caller import Caller
    from app.tenancy.models import Client

    with app.app_context(), transaction():
        from app.extensions import db

        parent = db.session.get(Client, parent_id)
        caller = Caller(parent.id, 0, parent.parent_id is None, parent.root_id, parent.path, parent.id, parent.path)
        return [service.create_sub_client(caller, {"name": f"child {i:03d}"}).id for i in range(count)]


def _walk(client, headers, per_page: int) -> tuple[list[int], set[int]]:
    ids: list[int] = []
    totals: set[int] = set()
    page = 1
    while True:
        body = client.get(f"/v1/sub_client?page={page}&per_page={per_page}", headers=headers).get_json()
        assert body["current_page"] == page and body["per_page"] == per_page
        totals.add(body["total_pages"])
        if not body["data"]:
            break
        assert len(body["data"]) <= per_page
        ids.extend(item["client_id"] for item in body["data"])
        page += 1
    return ids, totals


@pytest.mark.parametrize("count", [0, 1, 99, 250])
@pytest.mark.parametrize("per_page", [1, 20, 99])
def test_totals_and_pages_cover_every_child_once(client, app, master, count, per_page):
    if count == 250 and per_page == 1:
        per_page = 7  # same arithmetic, a tenth of the requests
    created = _add_children(app, master.client_id, count)
    ids, totals = _walk(client, master.headers, per_page)
    assert ids == created
    assert totals == {math.ceil(count / per_page)}


def test_empty_list_has_zero_pages(client, master):
    body = client.get("/v1/sub_client", headers=master.headers).get_json()
    assert body == {"data": [], "per_page": 20, "current_page": 1, "total_pages": 0}


def test_a_page_past_the_end_is_empty_not_an_error(client, app, master):
    _add_children(app, master.client_id, 3)
    body = client.get("/v1/sub_client?page=5&per_page=2", headers=master.headers).get_json()
    assert body["data"] == [] and body["total_pages"] == 2 and body["current_page"] == 5
    huge = client.get("/v1/sub_client?page=2147483647&per_page=99", headers=master.headers)
    assert huge.status_code == 200 and huge.get_json()["data"] == []


def test_grandchildren_are_not_listed(client, app, master):
    (child,) = _add_children(app, master.client_id, 1)
    _add_children(app, child, 4)
    body = client.get("/v1/sub_client", headers=master.headers).get_json()
    assert [item["client_id"] for item in body["data"]] == [child]
    assert body["total_pages"] == 1
