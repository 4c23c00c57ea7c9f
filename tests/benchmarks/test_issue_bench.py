"""Issue latency per suite beside verify: the pure proof creation and the HTTP endpoints.

Run with `pytest -m benchmark tests/benchmarks/test_issue_bench.py -s`. For each suite prints
p50/p99 in milliseconds of `app.issuer.proofs.add_proof` beside `verify_credential` (did:key
issuer, warm JSON-LD loader), and of `POST /credentials/issue` beside `POST /credentials/verify`
(did:web issuer resolved from the database). Never asserts on time. Iterations: env
TESSERA_BENCH_ITERATIONS (default 40, BBS and RDFC are the slow ones).
"""

from __future__ import annotations

import os

import pytest

from app.credentials.cryptosuites.base import SuiteContext
from app.credentials.jsonld.loader import make_document_loader
from app.credentials.verifier import verify_credential
from app.dids.resolver import DidResolver
from app.issuer import proofs
from app.multiformats import encode_multikey
from tests.support.bench import latency_ms
from tests.support.issuer import SUITES, create_key, unsigned
from tests.support.vectors import VECTORS

pytestmark = pytest.mark.benchmark

ITERATIONS = int(os.environ.get("TESSERA_BENCH_ITERATIONS", "40"))
WARMUP = 3
MANDATORY = ["/issuer", "/validFrom"]


@pytest.mark.parametrize(("suite", "key_type"), SUITES)
def test_issue_and_verify_latency(suite: str, key_type: str) -> None:
    ctx = SuiteContext(loader=make_document_loader(VECTORS / "contexts"))
    private = proofs.generate_private_key(key_type)
    multikey = encode_multikey(key_type, proofs.public_key_of(key_type, private))
    credential = {**unsigned("did:example:holder", degree="BSc", gpa="3.9"), "issuer": f"did:key:{multikey}"}
    pointers = MANDATORY if suite in proofs.SELECTIVE_DISCLOSURE_SUITES else []

    def sign() -> dict:
        return proofs.add_proof(
            credential,
            cryptosuite=suite,
            key_type=key_type,
            private_key=private,
            verification_method=f"did:key:{multikey}#{multikey}",
            ctx=ctx,
            mandatory_pointers=pointers,
        )

    vc = sign()
    resolver = DidResolver()
    assert verify_credential(vc, resolver=resolver, loader=ctx.loader).verified
    issue_p50, issue_p99 = latency_ms(sign, iterations=ITERATIONS, warmup=WARMUP)
    verify_p50, verify_p99 = latency_ms(
        lambda: verify_credential(vc, resolver=resolver, loader=ctx.loader), iterations=ITERATIONS, warmup=WARMUP
    )
    print(
        f"\n{suite:16s} {key_type:10s} issue p50 {issue_p50:7.2f} ms p99 {issue_p99:7.2f} ms"
        f"   verify p50 {verify_p50:7.2f} ms p99 {verify_p99:7.2f} ms"
    )


@pytest.mark.parametrize(("suite", "key_type"), SUITES)
def test_http_issue_and_verify_latency(client, master, suite: str, key_type: str) -> None:
    create_key(client, master.headers, key_type)
    options = {"cryptosuite": suite}
    if suite in proofs.SELECTIVE_DISCLOSURE_SUITES:
        options["mandatoryPointers"] = MANDATORY
    body = {"credential": unsigned("did:example:holder", degree="BSc"), "options": options}
    issued = client.post("/credentials/issue", json=body, headers=master.headers)
    assert issued.status_code == 201, issued.get_data(as_text=True)
    vc = issued.json["verifiableCredential"]

    def issue() -> None:
        assert client.post("/credentials/issue", json=body, headers=master.headers).status_code == 201

    def verify() -> None:
        response = client.post("/credentials/verify", json={"verifiableCredential": vc}, headers=master.headers)
        assert response.status_code == 200, response.get_data(as_text=True)

    issue_p50, _ = latency_ms(issue, iterations=ITERATIONS, warmup=WARMUP)
    verify_p50, _ = latency_ms(verify, iterations=ITERATIONS, warmup=WARMUP)
    print(
        f"\nHTTP {suite:16s} {key_type:10s} POST /credentials/issue p50 {issue_p50:7.2f} ms"
        f"   POST /credentials/verify p50 {verify_p50:7.2f} ms"
    )
