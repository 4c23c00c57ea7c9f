"""What operations surfaces reveal: access logs without query values, /metrics behind a token, HSTS."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time

import httpx
import pytest

from tests.support import environment

SECRETS = ("c0de-SECRET", "st4te-SECRET", "eyJhint-SECRET", "n0nce-SECRET", "l0cation-SECRET")


@pytest.fixture
def metrics_token(app):
    app.config["METRICS_TOKEN"] = "scrape-token-1"
    yield "scrape-token-1"
    app.config["METRICS_TOKEN"] = ""


def test_metrics_need_the_bearer_token_when_one_is_set(client, metrics_token):
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing.mimetype == "application/problem+json"
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {metrics_token}"}).status_code == 401
    scraped = client.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"})
    assert scraped.status_code == 200
    assert "tessera_jobs_oldest_queued_age_seconds" in scraped.get_data(as_text=True)


def test_without_a_token_only_the_loopback_interface_may_scrape(client):
    remote = client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert remote.status_code == 403
    assert remote.mimetype == "application/problem+json"
    assert "tessera_" not in remote.get_data(as_text=True)
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "::1"}).status_code == 200


def test_https_responses_carry_strict_transport_security(client):
    secure = client.get("/healthz", base_url="https://tessera.example")
    assert re.fullmatch(r"max-age=\d+", secure.headers["Strict-Transport-Security"])
    assert int(secure.headers["Strict-Transport-Security"].split("=")[1]) >= 180 * 24 * 3600
    plain = client.get("/healthz")
    assert "Strict-Transport-Security" not in plain.headers
    # X-Forwarded-Proto counts only from trusted proxies (none in this configuration).
    spoofed = client.get("/healthz", headers={"X-Forwarded-Proto": "https"})
    assert "Strict-Transport-Security" not in spoofed.headers


def test_an_https_base_url_sends_strict_transport_security(app, client):
    base_url, app.config["BASE_URL"] = app.config["BASE_URL"], "https://id.example"
    try:
        response = client.get("/healthz")
    finally:
        app.config["BASE_URL"] = base_url
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_procfile_web_process_logs_no_query_values(app):
    procfile = (environment.REPO_ROOT / "Procfile").read_text()
    web = next(line for line in procfile.splitlines() if line.startswith("web:"))
    port = _free_port()
    command = shlex.split(web.partition(":")[2].replace("${PORT:-5000}", str(port)).replace("0.0.0.0", "127.0.0.1"))
    command = [part.replace("${WEB_CONCURRENCY:-2}", "1").replace("${WEB_THREADS:-2}", "2") for part in command]
    log_path = environment.TMP_DIR / f"web-{port}.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command,
            cwd=environment.REPO_ROOT,
            env={**os.environ, "LOG_LEVEL": "INFO"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, log_path.read_text()
                time.sleep(0.2)
        query = f"code={SECRETS[0]}&state={SECRETS[1]}&id_token_hint={SECRETS[2]}&nonce={SECRETS[3]}"
        answer = httpx.get(
            f"{base}/healthz?{query}",
            headers={"Referer": f"https://rp.example/cb?code={SECRETS[4]}", "Authorization": "Bearer x"},
            timeout=5,
        )
        assert answer.status_code == 200
    finally:
        environment.stop_process(server)
    logged = log_path.read_text()
    access = [json.loads(line) for line in logged.splitlines() if '"tessera.access"' in line]
    assert [entry["message"] for entry in access if "?" in entry["message"]] == [
        '127.0.0.1 - "GET /healthz?code=REDACTED&state=REDACTED&id_token_hint=REDACTED&nonce=REDACTED HTTP/1.1" 200 '
        + access[-1]["message"].rsplit(" ", 1)[1]
    ]
    assert re.fullmatch(r"\d+\.\dms", access[-1]["message"].rsplit(" ", 1)[1])
    assert not [secret for secret in SECRETS if secret in logged]


def test_the_access_log_records_a_request_the_application_failed(caplog):
    from app.ops.logging import current_request_id, logged_access, request_id_var

    def failing(environ, start_response):
        raise RuntimeError("boom")

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/v1/openidc/token",
        "QUERY_STRING": "code=c0de-SECRET",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "192.0.2.7",
    }
    request_id_var.set("0123456789abcdef-previous-request")
    with caplog.at_level("INFO", logger="tessera.access"), pytest.raises(RuntimeError):
        logged_access(failing, environ, lambda *args: None)
    assert current_request_id() is None  # the line is not labelled with the thread's previous request
    [record] = [record for record in caplog.records if record.name == "tessera.access"]
    assert record.getMessage().startswith('192.0.2.7 - "POST /v1/openidc/token?code=REDACTED HTTP/1.1" 500 ')


def test_the_development_server_request_log_is_redacted(app):
    import logging

    record = logging.LogRecord(
        "werkzeug",
        logging.INFO,
        __file__,
        1,
        '%s - - [%s] "%s" %s %s',
        ("127.0.0.1", "now", f"GET /v1/openidc/authorize?state={SECRETS[1]}&code={SECRETS[0]} HTTP/1.1", "302", "-"),
        None,
    )
    for log_filter in logging.getLogger("werkzeug").filters:
        log_filter.filter(record)
    assert SECRETS[0] not in record.getMessage() and SECRETS[1] not in record.getMessage()
    assert "/v1/openidc/authorize?state=REDACTED&code=REDACTED" in record.getMessage()
