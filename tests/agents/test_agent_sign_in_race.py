"""Concurrent first sign-ins of one key: every answer succeeds and names one and the same DID."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from app.agents import ethereum
from tests.support.agents import claim_key_over_http

SIGN_INS = 4


def _run_together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` in threads released at the same moment; return their results in order."""
    barrier = threading.Barrier(len(calls))

    def released(call: Callable[[], Any]) -> Any:
        barrier.wait(timeout=20)
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(released, calls))


def _signed_challenges(live_server, key: str, count: int) -> list[dict[str, str]]:
    with live_server.http() as http:
        bodies = []
        for _ in range(count):
            answer = http.post("/api/auth/challenge", json={"address": ethereum.address_from_private_key(key)})
            assert answer.status_code == 200, answer.text
            message = answer.json()["data"]["message"]
            bodies.append({"message": message, "signature": ethereum.sign_personal_message(message, key)})
    return bodies


def _verify(live_server, body: dict[str, str]) -> httpx.Response:
    with live_server.http() as http:
        return http.post("/api/auth/verify", json=body)


def _assert_one_did(live_server, key: str) -> str:
    bodies = _signed_challenges(live_server, key, SIGN_INS)
    answers = _run_together([lambda body=body: _verify(live_server, body) for body in bodies])
    assert [answer.status_code for answer in answers] == [200] * SIGN_INS, [answer.text for answer in answers]
    dids = {answer.json()["data"]["did"] for answer in answers}
    assert len(dids) == 1, dids
    did = dids.pop()
    assert did is not None
    for answer in answers:
        with live_server.http() as http:
            account = http.get("/api/account", headers={"Authorization": f"Bearer {answer.json()['data']['token']}"})
        assert account.status_code == 200, account.text
        assert account.json()["data"]["did"] == did
    return did


def test_concurrent_first_sign_ins_of_a_new_key_agree_on_one_did(live_server):
    _assert_one_did(live_server, ethereum.generate_private_key())


def test_concurrent_first_sign_ins_of_a_claimed_key_agree_on_one_did(live_server):
    key = claim_key_over_http(live_server)
    _assert_one_did(live_server, key)
    with live_server.http() as http:
        body = _signed_challenges(live_server, key, 1)[0]
        token = http.post("/api/auth/verify", json=body).json()["data"]["token"]
        balance = http.get("/api/account", headers={"Authorization": f"Bearer {token}"}).json()["data"]["balance"]
    assert balance == 1000


def test_grants_racing_first_sign_ins_create_one_account(app, live_server):
    from app.agents import accounts, credits
    from app.db import transaction

    key = ethereum.generate_private_key()
    address = ethereum.address_from_private_key(key)
    bodies = _signed_challenges(live_server, key, 2)

    def grant() -> int:
        with app.app_context(), transaction():
            return credits.grant_credits(address, 7, "race").id

    def kind() -> int:
        with app.app_context(), transaction():
            return accounts.set_account_kind(address, "agent").id

    results = _run_together([grant, grant, kind, *[lambda body=body: _verify(live_server, body) for body in bodies]])
    assert len(set(results[:3])) == 1
    assert [answer.status_code for answer in results[3:]] == [200, 200], [answer.text for answer in results[3:]]
    assert results[3].json()["data"]["did"] == results[4].json()["data"]["did"]
    with live_server.http() as http:
        token = results[3].json()["data"]["token"]
        ledger = http.get("/api/credits", headers={"Authorization": f"Bearer {token}"}).json()["data"]
    assert ledger["balance"] == 14
    assert [entry["reason"] for entry in ledger["entries"]] == ["race", "race"]
