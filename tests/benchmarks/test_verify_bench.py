"""End-to-end `verify_credential` latency for the RDFC and JCS suites (canonicalization included),
in process and over HTTP.

Run with `pytest -m benchmark tests/benchmarks/test_verify_bench.py -s`. Prints p50/p99 in
milliseconds for a typical credential (the W3C employment-authorization example, did:key issuer)
and one cold verification with a fresh loader; over HTTP, `POST /v1/vc/verify` one request at a
time on a keep-alive connection to the Procfile's web process, with that server's CPU per
request. Never asserts on time. Iterations: env TESSERA_BENCH_ITERATIONS (default 300).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from app.credentials.cryptosuites import require_suite
from app.credentials.cryptosuites.base import SuiteContext
from app.credentials.jsonld.loader import make_document_loader
from app.credentials.verifier import verify_credential
from app.dids.resolver import DidResolver
from app.multiformats import decode_multikey_secret
from tests.support.bench import free_port, latency_ms, server_cpu_seconds, start_procfile_web
from tests.support.environment import stop_process
from tests.support.tenancy import make_master
from tests.support.vectors import VECTORS

pytestmark = pytest.mark.benchmark

ITERATIONS = int(os.environ.get("TESSERA_BENCH_ITERATIONS", "300"))
WARMUP = 20
KEY_FILES = {"Ed25519": "eddsa/keyPair.json", "P-256": "ecdsa/p256KeyPair.json", "P-384": "ecdsa/p384KeyPair.json"}


def _signed_credential(suite: str, key_type: str, loader) -> dict:
    pair = json.loads((VECTORS / KEY_FILES[key_type]).read_text())
    public = pair["publicKeyMultibase"]
    secret = decode_multikey_secret(pair.get("secretKeyMultibase") or pair["privateKeyMultibase"])[1]
    credential = json.loads((VECTORS / "eddsa/employmentAuth.json").read_text())
    credential["issuer"] = f"did:key:{public}"
    return require_suite(suite).sign(
        credential, private_key=secret, verification_method=f"did:key:{public}#{public}", ctx=SuiteContext(loader)
    )


@pytest.mark.parametrize(
    ("suite", "key_type"),
    [
        ("eddsa-rdfc-2022", "Ed25519"),
        ("ecdsa-rdfc-2019", "P-256"),
        ("ecdsa-rdfc-2019", "P-384"),
        ("eddsa-jcs-2022", "Ed25519"),
        ("ecdsa-jcs-2019", "P-256"),
        ("ecdsa-jcs-2019", "P-384"),
    ],
)
def test_verify_latency(suite: str, key_type: str) -> None:
    loader = make_document_loader(VECTORS / "contexts")
    resolver = DidResolver()
    vc = _signed_credential(suite, key_type, loader)

    cold_loader = make_document_loader(VECTORS / "contexts")
    started = time.perf_counter()
    cold = verify_credential(vc, resolver=resolver, loader=cold_loader)
    cold_ms = (time.perf_counter() - started) * 1e3
    assert cold.verified, cold.errors

    p50, p99 = latency_ms(
        lambda: verify_credential(vc, resolver=resolver, loader=loader), iterations=ITERATIONS, warmup=WARMUP
    )
    print(f"\nverify {suite:16s} {key_type:8s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  cold {cold_ms:6.1f} ms")


def test_verify_over_http(app) -> None:
    import httpx

    loader = make_document_loader(VECTORS / "contexts")
    master = make_master(app, "Verification over HTTP benchmark")
    port = free_port()
    server = start_procfile_web(port, {})
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"x-api-token": master.api_token}) as http:
            for suite in ("eddsa-rdfc-2022", "eddsa-jcs-2022"):
                body = {"verifiableCredential": _signed_credential(suite, "Ed25519", loader)}

                def verify(body=body) -> None:
                    answer = http.post("/v1/vc/verify", json=body)
                    assert answer.status_code == 200, answer.text

                cpu_before = server_cpu_seconds(server.pid)
                p50, p99 = latency_ms(verify, iterations=ITERATIONS, warmup=WARMUP)
                cpu_ms = (server_cpu_seconds(server.pid) - cpu_before) * 1e3 / (ITERATIONS + WARMUP)
                print(
                    f"\nverify over HTTP {suite:16s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
                    f"server CPU {cpu_ms:5.2f} ms per request"
                )
    finally:
        stop_process(server)
