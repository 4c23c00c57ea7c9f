"""BBS signatures (draft-irtf-cfrg-bbs-signatures, H2G_HM2S interface) on BLS12-381. Pure Python API.

    sk_to_pk(sk, suite=SHA256_SUITE) -> bytes                                     # 96-byte G2 key
    sign(sk, pk, header, messages, suite=...) -> bytes                             # 80 bytes
    verify(pk, signature, header, messages, suite=..., backend=None) -> bool
    proof_gen(pk, signature, header, ph, messages, disclosed_indexes, suite=..., rng=None) -> bytes
    proof_verify(pk, proof, header, ph, disclosed_messages, disclosed_indexes, suite=...,
                 backend=None) -> bool

Keys, signatures and proofs are bytes; messages are lists of bytes (at most MAX_MESSAGES). Invalid signatures and proofs
give False; malformed input raises `BbsInputError` (a ValueError). `backend` selects the curve
library (`get_backend("pyblst")`, the default, or `get_backend("arkworks")`).
"""

from app.credentials.bbs.curve import ArkworksBackend, CurveBackend, PyblstBackend, get_backend
from app.credentials.bbs.errors import BbsInputError
from app.credentials.bbs.scheme import (
    MAX_MESSAGES,
    RandomScalars,
    base_point_p1,
    create_generators,
    hash_to_scalar,
    keygen,
    messages_to_scalars,
    proof_gen,
    proof_verify,
    seeded_random_scalars,
    sign,
    sk_to_pk,
    verify,
)
from app.credentials.bbs.suites import SHA256_SUITE, SHAKE256_SUITE, Ciphersuite, get_suite

__all__ = [
    "MAX_MESSAGES",
    "SHA256_SUITE",
    "SHAKE256_SUITE",
    "ArkworksBackend",
    "BbsInputError",
    "Ciphersuite",
    "CurveBackend",
    "PyblstBackend",
    "RandomScalars",
    "base_point_p1",
    "create_generators",
    "get_backend",
    "get_suite",
    "hash_to_scalar",
    "keygen",
    "messages_to_scalars",
    "proof_gen",
    "proof_verify",
    "seeded_random_scalars",
    "sign",
    "sk_to_pk",
    "verify",
]
