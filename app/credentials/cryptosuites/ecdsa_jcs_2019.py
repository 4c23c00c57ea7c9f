"""The ecdsa-jcs-2019 cryptosuite: RFC 8785 (JCS) canonical JSON signed with ECDSA.

P-256 hashes and signs with SHA-256, P-384 with SHA-384.

`SUITE.verify_proof(...)` checks a proof; `sign(...)` adds one (see `SignatureSuite.sign`).
"""

from app.credentials.cryptosuites.base import register_suite
from app.credentials.cryptosuites.data_integrity import SignatureSuite

SUITE = SignatureSuite(name="ecdsa-jcs-2019", transformation="jcs", algorithm="ECDSA")
register_suite(SUITE)

sign = SUITE.sign
verify_proof = SUITE.verify_proof
