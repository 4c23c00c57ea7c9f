"""`DEV_OUTBOX` serves the mail it keeps (login codes) to loopback clients only, though the Procfile's web
server listens on every interface."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid

import httpx
import pytest

from tests.support import environment
from tests.support.bench import procfile_web_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return sock.getsockname()[1]


def _non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (`hostname -I`), or None."""
    try:
        listed = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return next((address for address in listed if "." in address and not address.startswith("127.")), None)


def _mail_a_code(app, to: str) -> None:
    from app.extensions import db
    from app.oidc.mail import send_mail

    with app.app_context():
        send_mail(to=to, sender="no-reply@example.org", subject="Your code 123456", text="123456")
        db.session.commit()


@pytest.mark.parametrize(
    ("remote_addr", "served"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True),
     ("192.0.2.10", False), ("10.0.0.5", False), ("2001:db8::1", False), ("::ffff:192.0.2.10", False)],
)  # fmt: skip
def test_the_outbox_answers_loopback_clients_only(app, client, remote_addr, served):
    to = f"outbox-{uuid.uuid4().hex[:8]}@example.org"
    _mail_a_code(app, to)
    answer = client.get("/dev/outbox", query_string={"to": to}, environ_base={"REMOTE_ADDR": remote_addr})
    if served:
        assert answer.status_code == 200
        assert [mail["text"] for mail in answer.get_json()["data"]] == ["123456"]
    else:
        assert answer.status_code == 404 and answer.mimetype == "application/problem+json"
        assert "123456" not in answer.get_data(as_text=True)


def test_the_procfile_web_server_keeps_the_outbox_from_the_network(app):
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    to = f"outbox-{uuid.uuid4().hex[:8]}@example.org"
    _mail_a_code(app, to)
    port = _free_port()
    log_path = environment.TMP_DIR / f"web-outbox-{port}.log"
    env = {
        **os.environ,
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "DEV_OUTBOX": "1",
        "BASE_URL": f"http://localhost:{port}",
    }
    assert "--host 0.0.0.0" in procfile_web_command()
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            ["sh", "-c", "exec " + procfile_web_command()],
            cwd=environment.REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, log_path.read_text()[-2000:]
                time.sleep(0.2)
        from_network = httpx.get(f"http://{address}:{port}/dev/outbox", params={"to": to}, timeout=10)
        from_loopback = httpx.get(f"http://127.0.0.1:{port}/dev/outbox", params={"to": to}, timeout=10)
    finally:
        environment.stop_process(server)
    assert from_network.status_code == 404 and "123456" not in from_network.text
    assert from_loopback.status_code == 200
    assert [mail["text"] for mail in from_loopback.json()["data"]] == ["123456"]
