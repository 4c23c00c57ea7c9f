"""Bitstring Status Lists: entries, revocation and suspension, the served list, foreign lists."""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from app.credentials.engine import encode_bitstring
from tests.support import environment
from tests.support.config import change_settings
from tests.support.credentials import wait_for_verification
from tests.support.issuing import Issuer, allocate_status, create_user
from tests.support.tenancy import make_master


def _path(url: str) -> str:
    return urlsplit(url).path


def _bits(list_credential: dict) -> bytes:
    encoded = list_credential["credentialSubject"]["encodedList"]
    assert encoded.startswith("u")
    return gzip.decompress(base64.urlsafe_b64decode(encoded[1:] + "=" * (-len(encoded[1:]) % 4)))


def _bit(bits: bytes, index: int) -> bool:
    return bool(bits[index // 8] & (0x80 >> (index % 8)))


def _list_of(client, entry: dict) -> dict:
    response = client.get(_path(entry["credentialStatus"]["statusListCredential"]))
    assert response.status_code == 200
    return response.json


def _patch(client, headers, entry: dict, status: str):
    return client.patch(f"/v1/vc/issuer/status_entries/{entry['id']}", json={"status": status}, headers=headers)


def _verify(client, headers, vc):
    response = client.post("/v1/vc/verify", json={"verifiableCredential": vc}, headers=headers)
    assert response.status_code in (200, 400), response.get_data(as_text=True)
    return response.json


def test_allocated_entry_is_a_bitstring_status_list_entry(app, client, master):
    entry = allocate_status(client, master.headers, "revocation")
    status = entry["credentialStatus"]
    assert entry["status"] == "active"
    assert status["type"] == "BitstringStatusListEntry"
    assert status["statusPurpose"] == "revocation"
    assert status["statusListIndex"].isdigit() and 0 <= int(status["statusListIndex"]) < 131072
    assert status["statusListCredential"].startswith(app.config["BASE_URL"] + "/status/lists/")
    assert status["id"] == f"{status['statusListCredential']}#{status['statusListIndex']}"
    read = client.get(f"/v1/vc/issuer/status_entries/{entry['id']}", headers=master.headers)
    assert read.status_code == 200 and read.json["data"] == entry


def test_indexes_are_random_and_distinct(client, master):
    indexes = [int(allocate_status(client, master.headers)["credentialStatus"]["statusListIndex"]) for _ in range(12)]
    assert len(set(indexes)) == 12
    assert sorted(indexes) != list(range(min(indexes), min(indexes) + 12))


def test_unknown_purpose_is_refused(client, master):
    response = client.post("/v1/vc/issuer/status_entries", json={"statusPurpose": "message"}, headers=master.headers)
    assert response.status_code == 422
    assert "statusPurpose" in response.json["errors"]


def test_served_list_is_signed_cached_and_large_enough(client, master):
    entry = allocate_status(client, master.headers)
    url = entry["credentialStatus"]["statusListCredential"]
    response = client.get(_path(url))
    assert response.status_code == 200
    assert response.mimetype == "application/vc+ld+json"
    assert response.headers["Cache-Control"] == "public, max-age=300"
    credential = response.json
    assert credential["id"] == url
    assert credential["type"] == ["VerifiableCredential", "BitstringStatusListCredential"]
    assert credential["issuer"].startswith("did:key:z6Mk")
    subject = credential["credentialSubject"]
    assert subject["type"] == "BitstringStatusList"
    assert subject["statusPurpose"] == "revocation"
    assert subject["ttl"] == 300_000
    assert len(_bits(credential)) * 8 >= 131072
    assert credential["proof"]["cryptosuite"] == "eddsa-jcs-2022"
    verified = _verify(client, master.headers, credential)
    assert verified["verified"], verified["errors"]

    again = client.get(_path(url), headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304
    assert client.get("/status/lists/no-such-list").status_code == 404


def test_revocation_sets_the_bit_and_is_final(client, master):
    entry = allocate_status(client, master.headers, "revocation")
    index = int(entry["credentialStatus"]["statusListIndex"])
    assert not _bit(_bits(_list_of(client, entry)), index)

    revoked = _patch(client, master.headers, entry, "revoked")
    assert revoked.status_code == 200
    assert revoked.json["data"]["status"] == "revoked"
    assert _bit(_bits(_list_of(client, entry)), index)
    assert _patch(client, master.headers, entry, "revoked").status_code == 200

    reinstated = _patch(client, master.headers, entry, "active")
    assert reinstated.status_code == 409
    assert reinstated.json["code"] == "status_transition_refused"
    assert _patch(client, master.headers, entry, "suspended").status_code == 409
    assert _bit(_bits(_list_of(client, entry)), index)


def test_suspension_can_be_lifted(client, master):
    entry = allocate_status(client, master.headers, "suspension")
    index = int(entry["credentialStatus"]["statusListIndex"])
    assert _patch(client, master.headers, entry, "suspended").status_code == 200
    listed = _list_of(client, entry)
    assert listed["credentialSubject"]["statusPurpose"] == "suspension"
    assert _bit(_bits(listed), index)
    assert _patch(client, master.headers, entry, "active").status_code == 200
    assert not _bit(_bits(_list_of(client, entry)), index)
    assert _patch(client, master.headers, entry, "revoked").status_code == 409


def test_another_tree_cannot_touch_an_entry(app, client, master):
    entry = allocate_status(client, master.headers)
    other = make_master(app, "Other issuer")
    assert _patch(client, other.headers, entry, "revoked").status_code == 404
    assert client.get(f"/v1/vc/issuer/status_entries/{entry['id']}", headers=other.headers).status_code == 404
    assert client.patch(f"/v1/vc/issuer/status_entries/{entry['id']}", json={"status": "revoked"}).status_code == 401


def test_verification_reports_revoked_and_suspended(client, master):
    issuer = Issuer()
    revocation = allocate_status(client, master.headers, "revocation")
    suspension = allocate_status(client, master.headers, "suspension")
    statuses = [revocation["credentialStatus"], suspension["credentialStatus"]]
    vc = issuer.sign(issuer.credential("did:example:holder", status=statuses))
    body = _verify(client, master.headers, vc)
    assert body["verified"] and "status" in body["checks"]

    _patch(client, master.headers, suspension, "suspended")
    assert [error["code"] for error in _verify(client, master.headers, vc)["errors"]] == ["suspended"]
    _patch(client, master.headers, revocation, "revoked")
    assert [error["code"] for error in _verify(client, master.headers, vc)["errors"]] == ["revoked"]


def test_status_entry_on_an_unknown_hosted_list_fails_the_check(app, client, master):
    issuer = Issuer()
    url = app.config["BASE_URL"] + "/status/lists/00000000-0000-0000-0000-000000000000"
    status = {
        "id": url + "#7",
        "type": "BitstringStatusListEntry",
        "statusPurpose": "revocation",
        "statusListIndex": "7",
        "statusListCredential": url,
    }
    body = _verify(client, master.headers, issuer.sign(issuer.credential("did:example:holder", status=status)))
    assert [error["code"] for error in body["errors"]] == ["status_check_failed"]


class _ListServer(BaseHTTPRequestHandler):
    document: bytes = b"{}"
    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/vc+ld+json")
        self.send_header("Content-Length", str(len(type(self).document)))
        self.end_headers()
        self.wfile.write(type(self).document)

    def log_message(self, *_args) -> None:
        return


@pytest.fixture
def foreign_list():
    """A status list host on loopback; yields (base URL, issuer, publish(bits, purpose, **changes))."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ListServer)
    _ListServer.hits = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    issuer = Issuer()

    def publish(bits: bytes, purpose: str = "revocation", ttl: int | None = 60_000, tamper: bool = False) -> str:
        url = f"{base}/lists/1"
        subject = {"id": f"{url}#list", "type": "BitstringStatusList", "statusPurpose": purpose}
        subject["encodedList"] = encode_bitstring(bits)
        if ttl is not None:
            subject["ttl"] = ttl
        credential = issuer.sign(
            {
                "@context": ["https://www.w3.org/ns/credentials/v2"],
                "id": url,
                "type": ["VerifiableCredential", "BitstringStatusListCredential"],
                "issuer": issuer.did,
                "validFrom": "2024-01-01T00:00:00Z",
                "credentialSubject": subject,
            },
            "eddsa-jcs-2022",
        )
        if tamper:
            credential["credentialSubject"]["encodedList"] = encode_bitstring(bytes(len(bits)))
        _ListServer.document = json.dumps(credential).encode()
        return url

    yield base, issuer, publish
    server.shutdown()


def _credential_with_foreign_status(url: str, index: int) -> dict:
    issuer = Issuer()
    status = {
        "id": f"{url}#{index}",
        "type": "BitstringStatusListEntry",
        "statusPurpose": "revocation",
        "statusListIndex": str(index),
        "statusListCredential": url,
    }
    return issuer.sign(issuer.credential("did:example:holder", status=status))


def _revoked_bits(index: int) -> bytes:
    bits = bytearray(131072 // 8)
    bits[index // 8] |= 0x80 >> (index % 8)
    return bytes(bits)


def test_foreign_list_on_a_private_address_is_refused_without_a_request(client, master, foreign_list):
    _base, _issuer, publish = foreign_list
    url = publish(_revoked_bits(42))
    body = _verify(client, master.headers, _credential_with_foreign_status(url, 42))
    assert [error["code"] for error in body["errors"]] == ["status_check_failed"]
    assert "must be an https URL" in body["errors"][0]["detail"]
    https_url = url.replace("http://", "https://")
    body = _verify(client, master.headers, _credential_with_foreign_status(https_url, 42))
    assert [error["code"] for error in body["errors"]] == ["status_check_failed"]
    assert "non-public address; refused" in body["errors"][0]["detail"]
    assert _ListServer.hits == []


def test_foreign_list_is_fetched_verified_and_cached(app, client, master, foreign_list, monkeypatch):
    base, _issuer, publish = foreign_list
    change_settings(monkeypatch, app, STATUS_LIST_ALLOW_HOSTS=urlsplit(base).netloc)
    url = publish(_revoked_bits(42))
    revoked = _verify(client, master.headers, _credential_with_foreign_status(url, 42))
    assert [error["code"] for error in revoked["errors"]] == ["revoked"]
    fine = _verify(client, master.headers, _credential_with_foreign_status(url, 43))
    assert fine["verified"], fine["errors"]
    assert _ListServer.hits == ["/lists/1"]


def test_foreign_list_with_a_bad_signature_or_too_short_fails(app, client, master, foreign_list, monkeypatch):
    base, _issuer, publish = foreign_list
    change_settings(monkeypatch, app, STATUS_LIST_ALLOW_HOSTS=urlsplit(base).netloc)
    change_settings(monkeypatch, app, STATUS_LIST_CACHE_MAX_SECONDS=0)
    url = publish(_revoked_bits(5), tamper=True)
    body = _verify(client, master.headers, _credential_with_foreign_status(url, 5))
    assert [error["code"] for error in body["errors"]] == ["status_check_failed"]
    assert "does not verify" in body["errors"][0]["detail"]

    publish(bytes(1024))
    body = _verify(client, master.headers, _credential_with_foreign_status(url, 5))
    assert [error["code"] for error in body["errors"]] == ["status_check_failed"]
    assert "fewer than 131072 bits" in body["errors"][0]["detail"]

    publish(_revoked_bits(5), purpose="suspension")
    body = _verify(client, master.headers, _credential_with_foreign_status(url, 5))
    assert "is not for revocation" in body["errors"][0]["detail"]


def test_foreign_status_is_rechecked_periodically(app, client, master, foreign_list, monkeypatch, real_worker):
    from sqlalchemy import func, select

    from app.credentials.service import recheck_foreign_status
    from app.credentials.tasks import recheck_status
    from app.extensions import db
    from app.jobs.models import Job

    base, _issuer, publish = foreign_list
    allowed = urlsplit(base).netloc
    change_settings(monkeypatch, app, STATUS_LIST_ALLOW_HOSTS=allowed)
    change_settings(monkeypatch, app, STATUS_RECHECK_SECONDS=0)
    if environment.USING_POSTGRES:
        real_worker.stop()
        real_worker.start(extra_env={"STATUS_LIST_ALLOW_HOSTS": allowed})
    try:
        url = publish(bytes(131072 // 8), ttl=0)
        user = create_user(client, master.headers)
        issuer = Issuer()
        status = {
            "id": f"{url}#77",
            "type": "BitstringStatusListEntry",
            "statusPurpose": "revocation",
            "statusListIndex": "77",
            "statusListCredential": url,
        }
        vc = issuer.sign(issuer.credential(user["did"], status=status))
        stored = client.post("/v1/vc/issuer/store", json={"vc": vc}, headers=master.headers)
        cid = stored.json["data"]["cid"]
        assert wait_for_verification(client, master.headers, cid)["verification"]["state"] == "verified"

        publish(_revoked_bits(77), ttl=0)
        count_jobs = select(func.count()).select_from(Job).where(Job.kind == "credentials.verify")
        with app.app_context():
            jobs_before = db.session.scalar(count_jobs)
            assert recheck_foreign_status() >= 1
            db.session.rollback()
            assert db.session.scalar(count_jobs) == jobs_before, "the service must leave the commit to its task"
            db.session.rollback()
        with app.app_context():
            assert recheck_status() >= 1
        deadline = time.monotonic() + 20
        while True:
            record = wait_for_verification(client, master.headers, cid)
            if record["verification"]["state"] == "failed":
                break
            assert time.monotonic() < deadline, record
            time.sleep(0.05)
        assert record["verification"]["reason"] == "revoked"
    finally:
        if environment.USING_POSTGRES:
            real_worker.stop()
            real_worker.start()


@pytest.mark.parametrize("host", ["localhost", "no-such-host.invalid"])
def test_foreign_list_errors_never_reveal_internal_addresses(client, master, foreign_list, host):
    base, _issuer, publish = foreign_list
    url = publish(_revoked_bits(42)).replace(f"http://{urlsplit(base).netloc}", f"https://{host}:{urlsplit(base).port}")
    body = _verify(client, master.headers, _credential_with_foreign_status(url, 42))
    assert [error["code"] for error in body["errors"]] == ["status_check_failed"]
    detail = body["errors"][0]["detail"]
    # An internal host and an unknown one answer alike, without any resolved address or OS error.
    assert detail == f"status list host {host} is unknown or has a non-public address; refused"
    assert _ListServer.hits == []
