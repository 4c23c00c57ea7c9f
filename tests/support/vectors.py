"""Where the vendored W3C/IETF test vectors live (tests/vectors/, see its README) and lazy access.

Nothing here reads a file at import: the paths are plain values and the loader is built on first use.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
CONTEXTS = VECTORS / "contexts"

# Vectors whose every proof verifies; the issuer of most is not a DID (or is a DID that does not
# control the signing key), so they are checked as raw Data Integrity proofs.
VERIFIED_VECTORS = [
    "eddsa/eddsa-rdfc-2022/signedDataInt.json",
    "eddsa/eddsa-rdfc-2022/employ/signedDataInt.json",
    "eddsa/eddsa-jcs-2022/signedJCS.json",
    "eddsa/proof-set-chain/signedProofSet1.json",
    "eddsa/proof-set-chain/signedProofSet2.json",
    "eddsa/proof-set-chain/signedProofChain1.json",
    "eddsa/proof-set-chain/signedProofChain2.json",
    "eddsa/proof-set-chain/proofChainTempDoc1.json",
    "ecdsa/ecdsa-rdfc-2019-p256/signedECDSAP256.json",
    "ecdsa/ecdsa-rdfc-2019-p256/employ/signedECDSAP256.json",
    "ecdsa/ecdsa-rdfc-2019-p384/signedECDSAP384.json",
    "ecdsa/ecdsa-rdfc-2019-p384/employ/signedECDSAP384.json",
    "ecdsa/ecdsa-jcs-2019-p256/signedJCSECDSAP256.json",
    "ecdsa/ecdsa-jcs-2019-p384/signedJCSECDSAP384.json",
    "ecdsa/ecdsa-sd-2023/employ/addSignedSDBase.json",
    "ecdsa/ecdsa-sd-2023/employ/derivedRevealDocument.json",
    "bbs-2023/addSignedSDBase.json",
    "bbs-2023/derivedRevealDocument.json",
]
# Vectors whose proofs verify but whose validity window closed on 2025-12-16.
EXPIRED_VECTORS = [
    "ecdsa/ecdsa-sd-2023/prc/addSignedSDBase.json",
    "ecdsa/ecdsa-sd-2023/prc/derivedRevealDocument.json",
    "bbs-2023/prc/addSignedSDBase.json",
    "bbs-2023/prc/derivedRevealDocument.json",
]
# Vectors of the six suites that no verifier should accept as they stand, and why.
UNVERIFIABLE_VECTORS = {
    "bbs-2023/HolderBinding/addSignedSDBase.json": "optional bbs-2023 feature (anonymous holder binding)",
    "bbs-2023/HolderBinding/derivedRevealDocument.json": "optional bbs-2023 feature (anonymous holder binding)",
    "bbs-2023/Pseudonym/addSignedSDBase.json": "optional bbs-2023 feature (pseudonym)",
    "bbs-2023/Pseudonym/derivedRevealDocument.json": "optional bbs-2023 feature (pseudonym)",
    "bbs-2023/PseudonymHB/addSignedSDBase.json": "optional bbs-2023 feature (pseudonym with holder binding)",
    "bbs-2023/PseudonymHB/derivedRevealDocument.json": "optional bbs-2023 feature (pseudonym with holder binding)",
    "eddsa/proof-set-chain/proofChainTempDoc2.json": "an intermediate document: its previousProof is not in it",
}


@cache
def contexts_loader():
    """One offline loader over the vendored contexts, built at first use."""
    from app.credentials.jsonld.loader import make_document_loader

    return make_document_loader(CONTEXTS)


def suite_context():
    """A cryptosuite context over the vendored contexts (the loader is built at first use)."""
    from app.credentials.cryptosuites.base import SuiteContext

    return SuiteContext(loader=contexts_loader())
