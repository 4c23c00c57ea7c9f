"""The eddsa-jcs-2022 cryptosuite: RFC 8785 (JCS) canonical JSON, Ed25519 over SHA-256 hashes.

`SUITE.verify_proof(...)` checks a proof; `sign(...)` adds one (see `SignatureSuite.sign`).
"""

from app.credentials.cryptosuites.base import register_suite
from app.credentials.cryptosuites.data_integrity import SignatureSuite

SUITE = SignatureSuite(name="eddsa-jcs-2022", transformation="jcs", algorithm="Ed25519")
register_suite(SUITE)

sign = SUITE.sign
verify_proof = SUITE.verify_proof
