"""The BLS12-381 operations BBS needs, behind one small interface with two implementations.

`PyblstBackend` (the default, on pyblst/blst) and `ArkworksBackend` (py-arkworks-bls12381, imported
only when constructed; it is a test extra used to cross-check). Points are opaque objects of the
backend that made them; never mix points of two backends. Scalars are Python ints (reduced mod r by
the backend). Decoding validates the canonical compressed encoding, the curve equation and subgroup
membership, and raises `BbsInputError` with a reason; the identity is decoded (callers decide
whether it is acceptable).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from app.credentials.bbs.errors import BbsInputError
from app.credentials.bbs.hash_to_curve import (
    XMD_SHA256,
    Expander,
    P,
    R,
    hash_to_field_fp,
    hash_to_g1_compressed,
)

G1_LENGTH = 48
G2_LENGTH = 96

BP2_COMPRESSED = bytes.fromhex(
    "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"
)

Point = Any


@runtime_checkable
class CurveBackend(Protocol):
    """BLS12-381 group operations; G1 points, G2 points and scalars as BBS uses them."""

    name: str

    def g1_from_bytes(self, data: bytes) -> Point:
        """Decode a 48-byte compressed G1 point (subgroup-checked); raises BbsInputError."""
        ...

    def g1_to_bytes(self, point: Point) -> bytes:
        """Encode a G1 point compressed (48 bytes)."""
        ...

    def g2_from_bytes(self, data: bytes) -> Point:
        """Decode a 96-byte compressed G2 point (subgroup-checked); raises BbsInputError."""
        ...

    def g2_to_bytes(self, point: Point) -> bytes:
        """Encode a G2 point compressed (96 bytes)."""
        ...

    def g1_is_identity(self, point: Point) -> bool: ...

    def g2_is_identity(self, point: Point) -> bool: ...

    def g1_add(self, a: Point, b: Point) -> Point: ...

    def g1_neg(self, point: Point) -> Point: ...

    def g1_mul(self, point: Point, scalar: int) -> Point: ...

    def g2_mul(self, point: Point, scalar: int) -> Point: ...

    def g1_multi_mul(self, points: Sequence[Point], scalars: Sequence[int]) -> Point:
        """Sum of points[i] * scalars[i] (one multi-scalar multiplication where available).

        `points` may mix plain points and the results of `g1_prepare_fixed_base`.
        """
        ...

    def g1_prepare_fixed_base(self, point: Point) -> Point:
        """A form of a long-lived point (a generator) that speeds up `g1_multi_mul`.

        The result is only valid as a `g1_multi_mul` operand; it may be the point itself. The
        faster path need not be constant time: pair prepared points with public scalars only.
        """
        ...

    def g2_generator(self) -> Point: ...

    def g1_hash_to_curve(self, msg: bytes, dst: bytes, expander: Expander) -> Point:
        """RFC 9380 hash_to_curve to G1 (`BLS12381G1_<expander>_SSWU_RO_`)."""
        ...

    def pairing_product_is_one(self, pairs: Sequence[tuple[Point, Point]]) -> bool:
        """True when the product of e(g1, g2) over all (g1, g2) pairs is the identity of GT."""
        ...


def check_compressed_encoding(data: bytes, group: str) -> bool:
    """Check the canonical compressed form of a G1/G2 point; True when it encodes the identity.

    Raises BbsInputError for a wrong type or length, an uncompressed or malformed flag byte, a
    non-canonical identity, or a coordinate that is not reduced mod p.
    """
    length = G1_LENGTH if group == "G1" else G2_LENGTH
    if not isinstance(data, bytes | bytearray | memoryview):
        raise BbsInputError(f"{group} point must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) != length:
        raise BbsInputError(f"{group} point must be {length} bytes (compressed), got {len(data)}")
    flags = data[0] & 0xE0
    if not flags & 0x80:
        raise BbsInputError(f"{group} point is not in compressed form")
    if flags & 0x40:
        if flags & 0x20 or data[0] & 0x1F or any(data[1:]):
            raise BbsInputError(f"{group} point has a malformed identity encoding")
        return True
    body = bytes([data[0] & 0x1F]) + data[1:]
    halves = [body] if group == "G1" else [body[:48], body[48:]]
    if any(int.from_bytes(half, "big") >= P for half in halves):
        raise BbsInputError(f"{group} point coordinate is not a canonical field element")
    return False


_COMB_TEETH = 8
_COMB_COLUMNS = 32  # teeth * columns = 256 bits >= log2(r)
# _SPREAD_BITS[b] moves bit k of the byte b to bit 8k, so scalar bits can be regrouped per comb column.
_SPREAD_BITS = tuple(sum(((b >> k) & 1) << (8 * k) for k in range(8)) for b in range(256))


def _comb_digits(scalar: int) -> bytes:
    """Byte j is the comb digit of column j: bit t is bit (32 t + j) of the scalar."""
    scalar_bytes = scalar.to_bytes(32, "little")
    spread = 0
    for tooth in range(_COMB_TEETH):
        for byte_in_tooth in range(4):
            byte = scalar_bytes[4 * tooth + byte_in_tooth]
            if byte:
                spread |= _SPREAD_BITS[byte] << (64 * byte_in_tooth + tooth)
    return spread.to_bytes(_COMB_COLUMNS, "little")


class _PyblstFixedBase:
    """A generator's fixed-base comb table: entry v is the sum of 2^(32 t) * point over bits t of v."""

    __slots__ = ("table",)

    def __init__(self, table: list[Point]) -> None:
        self.table = table


class PyblstBackend:
    """CurveBackend on pyblst (blst).

    pyblst has no multi-scalar multiplication. Sums loop over blst's scalar multiplication, except
    for prepared fixed bases (the cached generators), which share one fixed-base comb evaluation
    (8 teeth: 32 doublings in all plus one addition per generator and column, about twice as fast
    as separate multiplications). The comb is not constant time; BBS only feeds it public values when
    verifying.
    """

    name = "pyblst"

    def __init__(self) -> None:
        import pyblst

        self._p1 = pyblst.BlstP1Element
        self._p2 = pyblst.BlstP2Element
        self._miller_loop = pyblst.miller_loop
        self._final_verify = pyblst.final_verify
        self._bp2 = self._p2.uncompress(BP2_COMPRESSED)

    @staticmethod
    def _decode(element_type: Any, data: bytes, group: str) -> Point:
        try:
            return element_type.uncompress(bytes(data))
        except ValueError as exc:
            if "NOT_IN_GROUP" in str(exc):
                raise BbsInputError(f"{group} point is not in the prime-order subgroup") from None
            raise BbsInputError(f"{group} point is not on the curve") from None

    def g1_from_bytes(self, data: bytes) -> Point:
        if check_compressed_encoding(data, "G1"):
            return self._p1()
        return self._decode(self._p1, data, "G1")

    def g1_to_bytes(self, point: Point) -> bytes:
        return bytes(point.compress())

    def g2_from_bytes(self, data: bytes) -> Point:
        if check_compressed_encoding(data, "G2"):
            return self._p2()
        return self._decode(self._p2, data, "G2")

    def g2_to_bytes(self, point: Point) -> bytes:
        return bytes(point.compress())

    def g1_is_identity(self, point: Point) -> bool:
        return bool(point.compress()[0] & 0x40)

    def g2_is_identity(self, point: Point) -> bool:
        return bool(point.compress()[0] & 0x40)

    def g1_add(self, a: Point, b: Point) -> Point:
        return a + b

    def g1_neg(self, point: Point) -> Point:
        return -point

    def g1_mul(self, point: Point, scalar: int) -> Point:
        return point.scalar_mul(scalar % R)

    def g2_mul(self, point: Point, scalar: int) -> Point:
        return point.scalar_mul(scalar % R)

    def g1_multi_mul(self, points: Sequence[Point], scalars: Sequence[int]) -> Point:
        if len(points) != len(scalars):
            raise ValueError("g1_multi_mul needs as many scalars as points")
        total = self._p1()
        comb_terms: list[tuple[list[Point], bytes]] = []
        for point, scalar in zip(points, scalars, strict=True):
            scalar %= R
            if isinstance(point, _PyblstFixedBase):
                comb_terms.append((point.table, _comb_digits(scalar)))
            elif scalar == 1:
                total = total + point
            else:
                total = total + point.scalar_mul(scalar)
        if comb_terms:
            total = total + self._comb_sum(comb_terms)
        return total

    def _comb_sum(self, terms: list[tuple[list[Point], bytes]]) -> Point:
        accumulator = self._p1()
        for column in range(_COMB_COLUMNS - 1, -1, -1):
            accumulator = accumulator + accumulator
            for table, digits in terms:
                digit = digits[column]
                if digit:
                    accumulator = accumulator + table[digit]
        return accumulator

    def g1_prepare_fixed_base(self, point: Point) -> Point:
        teeth = [point]
        for _ in range(_COMB_TEETH - 1):
            tooth = teeth[-1]
            for _ in range(_COMB_COLUMNS):
                tooth = tooth + tooth
            teeth.append(tooth)
        table: list[Point] = [self._p1()]
        for value in range(1, 1 << _COMB_TEETH):
            lowest = value & -value
            tooth, rest = teeth[lowest.bit_length() - 1], value ^ lowest
            table.append(table[rest] + tooth if rest else tooth)
        return _PyblstFixedBase(table)

    def g2_generator(self) -> Point:
        return self._bp2

    def g1_hash_to_curve(self, msg: bytes, dst: bytes, expander: Expander) -> Point:
        if expander.name == XMD_SHA256.name:
            return self._p1.hash_to_group(bytes(msg), bytes(dst))
        return self._p1.uncompress(hash_to_g1_compressed(msg, dst, expander))

    def pairing_product_is_one(self, pairs: Sequence[tuple[Point, Point]]) -> bool:
        # e(O, Q) = e(P, O) = 1, and blst's Miller loop is not meant for the identity: drop them.
        live = [(a, b) for a, b in pairs if not (self.g1_is_identity(a) or self.g2_is_identity(b))]
        if not live:
            return True
        if len(live) == 1:
            # The pairing is non-degenerate: e(P, Q) != 1 for non-identity P and Q.
            return False
        *head, (last_g1, last_g2) = live
        accumulated = self._miller_loop(*head[0])
        for g1, g2 in head[1:]:
            accumulated = accumulated * self._miller_loop(g1, g2)
        # final_verify(x, y) compares the final exponentiations: prod e(head) == e(-last).
        return bool(self._final_verify(accumulated, self._miller_loop(-last_g1, last_g2)))


class ArkworksBackend:
    """CurveBackend on py-arkworks-bls12381 (native multi-scalar multiplication and pairing check)."""

    name = "arkworks"

    def __init__(self) -> None:
        import py_arkworks_bls12381 as arkworks

        self._g1 = arkworks.G1Point
        self._g2 = arkworks.G2Point
        self._scalar = arkworks.Scalar
        self._gt = arkworks.GT
        self._g1_identity = arkworks.G1Point.identity()
        self._g2_identity = arkworks.G2Point.identity()
        self._bp2 = arkworks.G2Point.from_compressed_bytes(BP2_COMPRESSED)

    @staticmethod
    def _decode(element_type: Any, data: bytes, group: str) -> Point:
        try:
            point = element_type.from_compressed_bytes_unchecked(bytes(data))
        except ValueError:
            raise BbsInputError(f"{group} point is not on the curve") from None
        if not point.is_in_subgroup():
            raise BbsInputError(f"{group} point is not in the prime-order subgroup")
        return point

    def g1_from_bytes(self, data: bytes) -> Point:
        if check_compressed_encoding(data, "G1"):
            return self._g1_identity
        return self._decode(self._g1, data, "G1")

    def g1_to_bytes(self, point: Point) -> bytes:
        return point.to_compressed_bytes()

    def g2_from_bytes(self, data: bytes) -> Point:
        if check_compressed_encoding(data, "G2"):
            return self._g2_identity
        return self._decode(self._g2, data, "G2")

    def g2_to_bytes(self, point: Point) -> bytes:
        return point.to_compressed_bytes()

    def g1_is_identity(self, point: Point) -> bool:
        return point == self._g1_identity

    def g2_is_identity(self, point: Point) -> bool:
        return point == self._g2_identity

    def g1_add(self, a: Point, b: Point) -> Point:
        return a + b

    def g1_neg(self, point: Point) -> Point:
        return -point

    def g1_mul(self, point: Point, scalar: int) -> Point:
        return point * self._scalar(scalar % R)

    def g2_mul(self, point: Point, scalar: int) -> Point:
        return point * self._scalar(scalar % R)

    def g1_multi_mul(self, points: Sequence[Point], scalars: Sequence[int]) -> Point:
        if len(points) != len(scalars):
            raise ValueError("g1_multi_mul needs as many scalars as points")
        if not points:
            return self._g1_identity
        return self._g1.multiexp_unchecked(list(points), [self._scalar(s % R) for s in scalars])

    def g1_prepare_fixed_base(self, point: Point) -> Point:
        return point

    def g2_generator(self) -> Point:
        return self._bp2

    def g1_hash_to_curve(self, msg: bytes, dst: bytes, expander: Expander) -> Point:
        if expander.name == XMD_SHA256.name:
            return self._g1.hash_to_curve(bytes(msg), bytes(dst))
        # map_from_fp clears the cofactor of each half; clearing is linear, so the sum matches RFC 9380.
        u0, u1 = hash_to_field_fp(msg, dst, 2, expander)
        return self._g1.map_from_fp_be(u0.to_bytes(48, "big")) + self._g1.map_from_fp_be(u1.to_bytes(48, "big"))

    def pairing_product_is_one(self, pairs: Sequence[tuple[Point, Point]]) -> bool:
        if not pairs:
            return True
        return bool(self._gt.pairing_check([a for a, _ in pairs], [b for _, b in pairs]))


_BACKEND_TYPES: dict[str, type] = {"pyblst": PyblstBackend, "arkworks": ArkworksBackend}
_backends: dict[str, CurveBackend] = {}
_backends_lock = threading.Lock()


def get_backend(name: str = "pyblst") -> CurveBackend:
    """The shared backend instance called `name` ("pyblst", the default, or "arkworks").

    Raises ValueError for an unknown name and ImportError when the library is not installed.
    """
    if name not in _BACKEND_TYPES:
        raise ValueError(f"unknown curve backend {name!r}; known: {sorted(_BACKEND_TYPES)}")
    with _backends_lock:
        if name not in _backends:
            _backends[name] = _BACKEND_TYPES[name]()
        return _backends[name]
