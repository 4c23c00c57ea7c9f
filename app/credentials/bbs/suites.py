"""The two BLS12-381 BBS ciphersuites of draft-irtf-cfrg-bbs-signatures, H2G_HM2S interface."""

from __future__ import annotations

from dataclasses import dataclass

from app.credentials.bbs.hash_to_curve import XMD_SHA256, XOF_SHAKE256, Expander

INTERFACE_ID = b"H2G_HM2S_"


@dataclass(frozen=True)
class Ciphersuite:
    """A BBS ciphersuite: its identifiers and the expand_message it hashes with.

    `api_id` (ciphersuite_id || "H2G_HM2S_") prefixes every domain separation tag of the interface.
    """

    name: str
    expander: Expander
    expand_len: int = 48
    scalar_length: int = 32
    point_length: int = 48

    @property
    def ciphersuite_id(self) -> bytes:
        return self.name.encode("ascii")

    @property
    def api_id(self) -> bytes:
        return self.ciphersuite_id + INTERFACE_ID

    def expand_message(self, msg: bytes, dst: bytes, length: int) -> bytes:
        """The suite's RFC 9380 expand_message."""
        return self.expander.expand(msg, dst, length)


SHA256_SUITE = Ciphersuite("BBS_BLS12381G1_XMD:SHA-256_SSWU_RO_", XMD_SHA256)
SHAKE256_SUITE = Ciphersuite("BBS_BLS12381G1_XOF:SHAKE-256_SSWU_RO_", XOF_SHAKE256)

_SUITES_BY_NAME = {
    SHA256_SUITE.name: SHA256_SUITE,
    SHAKE256_SUITE.name: SHAKE256_SUITE,
    "bls12-381-sha-256": SHA256_SUITE,
    "bls12-381-shake-256": SHAKE256_SUITE,
}


def get_suite(name: str) -> Ciphersuite:
    """The ciphersuite with this ciphersuite_id (or short name "bls12-381-sha-256" / "-shake-256").

    Raises ValueError for an unknown name.
    """
    try:
        return _SUITES_BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown BBS ciphersuite {name!r}") from None
