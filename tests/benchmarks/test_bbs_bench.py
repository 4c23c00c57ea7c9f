"""Latency of the BBS primitives per curve backend: proof_verify (bbs-2023 sized) and verify.

Run with `pytest -m benchmark tests/benchmarks/test_bbs_bench.py -s`. Prints wall-clock p50/p99
and the p50 of process CPU time (steadier on a shared, loaded machine) in milliseconds; never
asserts on time. Iterations: env TESSERA_BENCH_ITERATIONS (default 300).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable

import pytest

from app.credentials import bbs

pytestmark = pytest.mark.benchmark

ITERATIONS = int(os.environ.get("TESSERA_BENCH_ITERATIONS", "300"))
WARMUP = 20
HEADER = secrets.token_bytes(64)  # bbs-2023: proofHash || mandatoryHash


def _percentiles(operation: Callable[[], object]) -> tuple[float, float, float]:
    """(wall p50, wall p99, CPU p50) in milliseconds."""
    for _ in range(WARMUP):
        operation()
    wall, cpu = [], []
    for _ in range(ITERATIONS):
        started, started_cpu = time.perf_counter(), time.process_time()
        operation()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    wall.sort()
    cpu.sort()
    p99 = min(len(wall) - 1, int(len(wall) * 0.99))
    return wall[len(wall) // 2] * 1e3, wall[p99] * 1e3, cpu[len(cpu) // 2] * 1e3


def _nquads(count: int) -> list[bytes]:
    return [f'_:b0 <https://example.org/vocab#claim{i}> "value number {i}" .\n'.encode() for i in range(count)]


@pytest.mark.parametrize("backend_name", ["pyblst", "arkworks"])
@pytest.mark.parametrize(("message_count", "disclosed_count"), [(10, 4), (20, 8)])
def test_bbs_latency(backend_name: str, message_count: int, disclosed_count: int) -> None:
    backend = bbs.get_backend(backend_name)
    sk = bbs.keygen(secrets.token_bytes(32))
    pk = bbs.sk_to_pk(sk, backend=backend)
    messages = _nquads(message_count)
    indexes = sorted(secrets.SystemRandom().sample(range(message_count), disclosed_count))
    disclosed = [messages[i] for i in indexes]
    signature = bbs.sign(sk, pk, HEADER, messages, backend=backend)
    proof = bbs.proof_gen(pk, signature, HEADER, b"ph", messages, indexes, backend=backend)
    assert bbs.proof_verify(pk, proof, HEADER, b"ph", disclosed, indexes, backend=backend)

    figures = {
        "proof_verify": _percentiles(
            lambda: bbs.proof_verify(pk, proof, HEADER, b"ph", disclosed, indexes, backend=backend)
        ),
        "verify": _percentiles(lambda: bbs.verify(pk, signature, HEADER, messages, backend=backend)),
        "proof_gen": _percentiles(
            lambda: bbs.proof_gen(pk, signature, HEADER, b"ph", messages, indexes, backend=backend)
        ),
        "sign": _percentiles(lambda: bbs.sign(sk, pk, HEADER, messages, backend=backend)),
    }
    for operation, (p50, p99, cpu_p50) in figures.items():
        print(
            f"\nBBS SHA-256 {backend_name:8s} L={message_count:2d} disclosed={disclosed_count:2d} "
            f"{operation:12s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  cpu p50 {cpu_p50:6.2f} ms"
        )
