"""The ecdsa-rdfc-2019 cryptosuite: RDFC-1.0 canonical N-Quads signed with ECDSA.

P-256 hashes and signs with SHA-256; P-384 with SHA-384, which RDFC-1.0 also uses internally.

`SUITE.verify_proof(...)` checks a proof; `sign(...)` adds one (see `SignatureSuite.sign`).
"""

from app.credentials.cryptosuites.base import register_suite
from app.credentials.cryptosuites.data_integrity import SignatureSuite

SUITE = SignatureSuite(name="ecdsa-rdfc-2019", transformation="rdfc", algorithm="ECDSA")
register_suite(SUITE)

sign = SUITE.sign
verify_proof = SUITE.verify_proof
