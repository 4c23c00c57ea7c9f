"""BBS signatures and proofs (draft-irtf-cfrg-bbs-signatures -06 and later, H2G_HM2S interface).

Messages are octet strings mapped to scalars with MapMessageToScalarAsHash; generators come from
create_generators and are cached per (backend, suite). Secret keys, scalars and points cross this
API as big-endian bytes (32-byte scalars, 48-byte G1, 96-byte G2 compressed points).

Failure model: `verify` and `proof_verify` return False for a well-formed signature or proof that
does not verify; anything malformed raises `BbsInputError` (a ValueError).

Verification, where every scalar is public, uses the backends' fastest (variable-time) paths. Sign
and ProofGen keep secret scalars on the curve library's constant-time multiplication, but the
scalar arithmetic around it is plain Python integers, which is not constant time.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from app.credentials.bbs.curve import CurveBackend, Point, get_backend
from app.credentials.bbs.errors import BbsInputError
from app.credentials.bbs.hash_to_curve import R
from app.credentials.bbs.suites import SHA256_SUITE, Ciphersuite

RandomScalars = Callable[[int], Sequence[int]]
"""A source of `count` uniformly random scalars in [0, r) (`calculate_random_scalars`)."""

SCALAR_LENGTH = 32
G1_LENGTH = 48
G2_LENGTH = 96
SIGNATURE_LENGTH = G1_LENGTH + SCALAR_LENGTH
_PROOF_FLOOR_LENGTH = 3 * G1_LENGTH + 4 * SCALAR_LENGTH

MAX_MESSAGES = 4096
"""Most messages one signature or proof may cover; more raises BbsInputError (bounds generator work)."""
PREPARED_GENERATORS = 128
"""Generators kept with a fixed-base table (about 45 KB each on pyblst)."""


# --- small encoders and input checks -------------------------------------------------------------


def _i2osp8(value: int) -> bytes:
    return value.to_bytes(8, "big")


def _scalar_bytes(value: int) -> bytes:
    return value.to_bytes(SCALAR_LENGTH, "big")


def _as_bytes(value: object, what: str) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise BbsInputError(f"{what} must be bytes, got {type(value).__name__}")


def _optional_bytes(value: object, what: str) -> bytes:
    """Header and presentation header: None stands for the empty string, as in the draft."""
    return b"" if value is None else _as_bytes(value, what)


def _as_message_list(messages: Sequence[bytes], what: str) -> list[bytes]:
    if isinstance(messages, bytes | bytearray | str):
        raise BbsInputError(f"{what} must be a list of byte strings, not a single value")
    return [_as_bytes(message, f"{what}[{i}]") for i, message in enumerate(messages)]


def _checked_messages(messages: Sequence[bytes], what: str) -> list[bytes]:
    checked = _as_message_list(messages, what)
    _check_message_count(len(checked))
    return checked


def _parse_scalar(data: bytes, what: str) -> int:
    value = int.from_bytes(data, "big")
    if not 0 < value < R:
        raise BbsInputError(f"{what} is not a scalar in 1..r-1")
    return value


def _parse_secret_key(sk: bytes) -> int:
    sk = _as_bytes(sk, "secret key")
    if len(sk) != SCALAR_LENGTH:
        raise BbsInputError(f"secret key must be {SCALAR_LENGTH} bytes, got {len(sk)}")
    return _parse_scalar(sk, "secret key")


def _resolve_backend(backend: CurveBackend | None) -> CurveBackend:
    return get_backend() if backend is None else backend


def _check_indexes(indexes: Sequence[int], total: int) -> list[int]:
    """Disclosed indexes must be distinct ints in ascending order, each in 0..total-1."""
    checked: list[int] = []
    for index in indexes:
        if isinstance(index, bool) or not isinstance(index, int):
            raise BbsInputError(f"disclosed index {index!r} is not an integer")
        if not 0 <= index < total:
            raise BbsInputError(f"disclosed index {index} is out of range for {total} messages")
        if checked and index <= checked[-1]:
            raise BbsInputError("disclosed indexes must be distinct and in ascending order")
        checked.append(index)
    return checked


@lru_cache(maxsize=512)
def _decode_public_key(backend: CurveBackend, pk: bytes) -> Point:
    point = backend.g2_from_bytes(pk)
    if backend.g2_is_identity(point):
        raise BbsInputError("public key is the identity point")
    return point


def _public_key_point(backend: CurveBackend, pk: bytes) -> tuple[bytes, Point]:
    pk = _as_bytes(pk, "public key")
    if len(pk) != G2_LENGTH:
        raise BbsInputError(f"public key must be {G2_LENGTH} bytes, got {len(pk)}")
    return pk, _decode_public_key(backend, pk)


def _nonidentity_g1(backend: CurveBackend, data: bytes, what: str) -> Point:
    try:
        point = backend.g1_from_bytes(data)
    except BbsInputError as exc:
        raise BbsInputError(f"{what}: {exc}") from None
    if backend.g1_is_identity(point):
        raise BbsInputError(f"{what} is the identity point")
    return point


# --- hashing to scalars --------------------------------------------------------------------------


def hash_to_scalar(message: bytes, dst: bytes, suite: Ciphersuite = SHA256_SUITE) -> int:
    """hash_to_scalar: expand_message(message, dst, 48) read as an integer mod r."""
    if len(dst) > 255:
        raise BbsInputError("hash_to_scalar: DST longer than 255 bytes")
    uniform = suite.expand_message(_as_bytes(message, "message"), bytes(dst), suite.expand_len)
    return int.from_bytes(uniform, "big") % R


def messages_to_scalars(
    messages: Sequence[bytes], suite: Ciphersuite = SHA256_SUITE, api_id: bytes | None = None
) -> list[int]:
    """MapMessageToScalarAsHash for each message, DST api_id || "MAP_MSG_TO_SCALAR_AS_HASH_"."""
    map_dst = (suite.api_id if api_id is None else api_id) + b"MAP_MSG_TO_SCALAR_AS_HASH_"
    return [hash_to_scalar(message, map_dst, suite) for message in _as_message_list(messages, "messages")]


def _h2s_dst(suite: Ciphersuite) -> bytes:
    return suite.api_id + b"H2S_"


# --- generators ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Generators:
    """A prefix of a generator series: plain points, their fixed-base forms, compressed bytes."""

    points: list[Point]
    prepared: list[Point]
    encoded: list[bytes]


@dataclass
class _GeneratorSeries:
    """create_generators output for one set of DSTs, extended on demand and kept for reuse.

    The first `PREPARED_GENERATORS` points also get the backend's fixed-base form (operands of
    g1_multi_mul only, used when verifying); later ones are used as plain points, which bounds the
    memory an unusually long message list can pin.
    """

    suite: Ciphersuite
    backend: CurveBackend
    seed_dst: bytes
    generator_dst: bytes
    generator_seed: bytes
    points: list[Point] = field(default_factory=list)
    prepared: list[Point] = field(default_factory=list)
    encoded: list[bytes] = field(default_factory=list)
    _v: bytes | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, count: int) -> _Generators:
        if count > len(self.points):
            with self._lock:
                self._extend(count)
        return _Generators(self.points[:count], self.prepared[:count], self.encoded[:count])

    def _extend(self, count: int) -> None:
        expand = self.suite.expand_message
        if self._v is None:
            self._v = expand(self.generator_seed, self.seed_dst, self.suite.expand_len)
        v = self._v
        for i in range(len(self.points) + 1, count + 1):
            v = expand(v + _i2osp8(i), self.seed_dst, self.suite.expand_len)
            point = self.backend.g1_hash_to_curve(v, self.generator_dst, self.suite.expander)
            prepared = self.backend.g1_prepare_fixed_base(point) if i <= PREPARED_GENERATORS else point
            # `points` grows last: lock-free readers in take() go by its length.
            self.encoded.append(self.backend.g1_to_bytes(point))
            self.prepared.append(prepared)
            self.points.append(point)
        self._v = v


_series: dict[tuple[str, str, str], _GeneratorSeries] = {}
_series_lock = threading.Lock()


def _series_for(suite: Ciphersuite, backend: CurveBackend, kind: str) -> _GeneratorSeries:
    key = (backend.name, suite.name, kind)
    with _series_lock:
        series = _series.get(key)
        if series is None:
            if kind == "P1":
                # P1 is fixed per ciphersuite with its own DSTs (draft section 7.2, "BP" seed).
                prefix = suite.ciphersuite_id + b"H2G_HM2S_"
                series = _GeneratorSeries(
                    suite,
                    backend,
                    seed_dst=prefix + b"SIG_GENERATOR_SEED_",
                    generator_dst=prefix + b"SIG_GENERATOR_DST_",
                    generator_seed=prefix + b"BP_MESSAGE_GENERATOR_SEED",
                )
            else:
                series = _GeneratorSeries(
                    suite,
                    backend,
                    seed_dst=suite.api_id + b"SIG_GENERATOR_SEED_",
                    generator_dst=suite.api_id + b"SIG_GENERATOR_DST_",
                    generator_seed=suite.api_id + b"MESSAGE_GENERATOR_SEED",
                )
            _series[key] = series
        return series


def _check_message_count(count: int) -> None:
    if count > MAX_MESSAGES:
        raise BbsInputError(f"{count} messages exceed the supported maximum of {MAX_MESSAGES}")


def _generators(message_count: int, suite: Ciphersuite, backend: CurveBackend) -> _Generators:
    """(Q_1, H_1, ..., H_L) for L messages."""
    _check_message_count(message_count)
    return _series_for(suite, backend, "messages").take(message_count + 1)


def _p1(suite: Ciphersuite, backend: CurveBackend) -> _Generators:
    return _series_for(suite, backend, "P1").take(1)


def create_generators(
    count: int, suite: Ciphersuite = SHA256_SUITE, backend: CurveBackend | None = None
) -> list[bytes]:
    """create_generators(count, api_id): Q_1, H_1, ..., H_(count-1), compressed."""
    if count < 0:
        raise BbsInputError("generator count must not be negative")
    if count == 0:
        return []
    return _generators(count - 1, suite, _resolve_backend(backend)).encoded


def base_point_p1(suite: Ciphersuite = SHA256_SUITE, backend: CurveBackend | None = None) -> bytes:
    """The ciphersuite's fixed G1 point P1, compressed."""
    return _p1(suite, _resolve_backend(backend)).encoded[0]


def _calculate_domain(pk: bytes, encoded_generators: Sequence[bytes], header: bytes, suite: Ciphersuite) -> int:
    # dom_array = (L, Q_1, H_1, ..., H_L); encoded_generators is (Q_1, H_1, ..., H_L).
    message_count = len(encoded_generators) - 1
    dom_octets = _i2osp8(message_count) + b"".join(encoded_generators) + suite.api_id
    dom_input = pk + dom_octets + _i2osp8(len(header)) + header
    return hash_to_scalar(dom_input, _h2s_dst(suite), suite)


# --- keys ----------------------------------------------------------------------------------------


def keygen(
    key_material: bytes,
    key_info: bytes = b"",
    key_dst: bytes | None = None,
    suite: Ciphersuite = SHA256_SUITE,
) -> bytes:
    """KeyGen: a 32-byte secret key derived from at least 32 bytes of secret key material."""
    key_material = _as_bytes(key_material, "key material")
    key_info = _as_bytes(key_info, "key info")
    if len(key_material) < 32:
        raise BbsInputError("key material must be at least 32 bytes")
    if len(key_info) > 65535:
        raise BbsInputError("key info must be at most 65535 bytes")
    dst = suite.api_id + b"KEYGEN_DST_" if key_dst is None else bytes(key_dst)
    derive_input = key_material + len(key_info).to_bytes(2, "big") + key_info
    sk = hash_to_scalar(derive_input, dst, suite)
    if sk == 0:
        raise BbsInputError("key material derives the zero secret key")
    return _scalar_bytes(sk)


def sk_to_pk(sk: bytes, suite: Ciphersuite = SHA256_SUITE, backend: CurveBackend | None = None) -> bytes:
    """SkToPk: the 96-byte compressed G2 public key W = SK * BP2 (same for both suites)."""
    backend = _resolve_backend(backend)
    return backend.g2_to_bytes(backend.g2_mul(backend.g2_generator(), _parse_secret_key(sk)))


# --- signatures ----------------------------------------------------------------------------------


def _parse_signature(backend: CurveBackend, signature: bytes) -> tuple[Point, int]:
    signature = _as_bytes(signature, "signature")
    if len(signature) != SIGNATURE_LENGTH:
        raise BbsInputError(f"signature must be {SIGNATURE_LENGTH} bytes, got {len(signature)}")
    a_point = _nonidentity_g1(backend, signature[:G1_LENGTH], "signature point A")
    return a_point, _parse_scalar(signature[G1_LENGTH:], "signature scalar e")


def _message_commitment(
    backend: CurveBackend, suite: Ciphersuite, generators: _Generators, domain: int, scalars: Sequence[int]
) -> Point:
    """B = P1 + Q_1 * domain + H_1 * msg_1 + ... + H_L * msg_L, with plain points (secret scalars)."""
    return backend.g1_multi_mul([*_p1(suite, backend).points, *generators.points], [1, domain, *scalars])


def sign(
    sk: bytes,
    pk: bytes,
    header: bytes | None,
    messages: Sequence[bytes],
    suite: Ciphersuite = SHA256_SUITE,
    backend: CurveBackend | None = None,
) -> bytes:
    """Sign: an 80-byte BBS signature (A || e) over header and messages.

    `pk` must be the public key of `sk` (it is checked: a mismatched key would only produce
    signatures that never verify). Raises BbsInputError for malformed keys or inputs.
    """
    backend = _resolve_backend(backend)
    secret = _parse_secret_key(sk)
    pk, _ = _public_key_point(backend, pk)
    if sk_to_pk(sk, suite, backend) != pk:
        raise BbsInputError("public key does not belong to the secret key")
    header = _optional_bytes(header, "header")
    scalars = messages_to_scalars(_checked_messages(messages, "messages"), suite)
    generators = _generators(len(scalars), suite, backend)
    domain = _calculate_domain(pk, generators.encoded, header, suite)
    e = hash_to_scalar(b"".join(_scalar_bytes(s) for s in (secret, *scalars, domain)), _h2s_dst(suite), suite)
    if (secret + e) % R == 0:
        raise BbsInputError("secret key and messages lead to a degenerate signature")
    b_point = _message_commitment(backend, suite, generators, domain, scalars)
    a_point = backend.g1_mul(b_point, pow(secret + e, -1, R))
    return backend.g1_to_bytes(a_point) + _scalar_bytes(e)


def verify(
    pk: bytes,
    signature: bytes,
    header: bytes | None,
    messages: Sequence[bytes],
    suite: Ciphersuite = SHA256_SUITE,
    backend: CurveBackend | None = None,
) -> bool:
    """Verify: True when `signature` is a valid BBS signature of header and messages under pk.

    Returns False for a well-formed signature that does not verify; raises BbsInputError for a
    malformed key or signature.
    """
    backend = _resolve_backend(backend)
    a_point, e = _parse_signature(backend, signature)
    pk, w_point = _public_key_point(backend, pk)
    header = _optional_bytes(header, "header")
    scalars = messages_to_scalars(_checked_messages(messages, "messages"), suite)
    generators = _generators(len(scalars), suite, backend)
    domain = _calculate_domain(pk, generators.encoded, header, suite)
    # h(A, W) * h(A * e - B, BP2) == 1  <=>  e(A, W + BP2 * e) == e(B, BP2), with no G2 multiplication;
    # A * e - B = A * e - P1 - Q_1 * domain - sum H_i * msg_i in one multi-scalar multiplication.
    a_e_minus_b = backend.g1_multi_mul(
        [a_point, *_p1(suite, backend).prepared, *generators.prepared],
        [e, R - 1, -domain % R, *(-s % R for s in scalars)],
    )
    return backend.pairing_product_is_one([(a_point, w_point), (a_e_minus_b, backend.g2_generator())])


# --- proofs --------------------------------------------------------------------------------------


def _default_random_scalars(count: int) -> list[int]:
    # 48 bytes (expand_len) per scalar keeps the bias of the mod-r reduction negligible.
    return [int.from_bytes(secrets.token_bytes(48), "big") % R for _ in range(count)]


def seeded_random_scalars(seed: bytes, dst: bytes, count: int, suite: Ciphersuite = SHA256_SUITE) -> list[int]:
    """The draft's mocked calculate_random_scalars (deterministic; for test vectors only)."""
    if count * suite.expand_len > 65535:
        raise BbsInputError("too many seeded random scalars requested")
    if count == 0:
        return []
    uniform = suite.expand_message(bytes(seed), bytes(dst), count * suite.expand_len)
    size = suite.expand_len
    return [int.from_bytes(uniform[i * size : (i + 1) * size], "big") % R for i in range(count)]


def _challenge(
    disclosed: Sequence[tuple[int, int]],
    encoded_points: Sequence[bytes],
    domain: int,
    ph: bytes,
    suite: Ciphersuite,
) -> int:
    """ProofChallengeCalculate: (R, i1, msg_i1, ..., Abar, Bbar, D, T1, T2, domain) || len(ph) || ph."""
    parts = [_i2osp8(len(disclosed))]
    for index, scalar in disclosed:
        parts.append(_i2osp8(index))
        parts.append(_scalar_bytes(scalar))
    parts.extend(encoded_points)
    parts.append(_scalar_bytes(domain))
    parts.append(_i2osp8(len(ph)))
    parts.append(ph)
    return hash_to_scalar(b"".join(parts), _h2s_dst(suite), suite)


def proof_gen(
    pk: bytes,
    signature: bytes,
    header: bytes | None,
    ph: bytes | None,
    messages: Sequence[bytes],
    disclosed_indexes: Sequence[int],
    suite: Ciphersuite = SHA256_SUITE,
    rng: RandomScalars | None = None,
    backend: CurveBackend | None = None,
) -> bytes:
    """ProofGen: a zero-knowledge proof of the signature disclosing messages[i] for i in the indexes.

    `messages` is the full signed list; `disclosed_indexes` must be ascending and distinct. `rng`
    replaces calculate_random_scalars (called once with 5 + number of undisclosed messages);
    leave it None outside tests. The signature is not verified first: an invalid signature yields
    a proof that does not verify. Raises BbsInputError for malformed input.
    """
    backend = _resolve_backend(backend)
    a_point, e = _parse_signature(backend, signature)
    pk, _ = _public_key_point(backend, pk)
    header = _optional_bytes(header, "header")
    ph = _optional_bytes(ph, "presentation header")
    scalars = messages_to_scalars(_checked_messages(messages, "messages"), suite)
    total = len(scalars)
    disclosed = _check_indexes(disclosed_indexes, total)
    disclosed_set = set(disclosed)
    undisclosed = [j for j in range(total) if j not in disclosed_set]

    randoms = list((rng or _default_random_scalars)(5 + len(undisclosed)))
    if len(randoms) != 5 + len(undisclosed):
        raise BbsInputError("random scalar source returned the wrong number of scalars")
    randoms = [int(value) % R for value in randoms]
    r1, r2, e_tilde, r1_tilde, r3_tilde, *m_tildes = randoms
    if r1 == 0 or r2 == 0:
        raise BbsInputError("random scalar source returned zero for r1 or r2")

    generators = _generators(total, suite, backend)
    message_points = generators.points[1:]
    domain = _calculate_domain(pk, generators.encoded, header, suite)
    b_point = _message_commitment(backend, suite, generators, domain, scalars)
    d_point = backend.g1_mul(b_point, r2)
    a_bar = backend.g1_mul(a_point, r1 * r2 % R)
    b_bar = backend.g1_multi_mul([d_point, a_bar], [r1, -e % R])
    t1 = backend.g1_multi_mul([a_bar, d_point], [e_tilde, r1_tilde])
    t2 = backend.g1_multi_mul([d_point, *(message_points[j] for j in undisclosed)], [r3_tilde, *m_tildes])
    encoded_points = [backend.g1_to_bytes(p) for p in (a_bar, b_bar, d_point, t1, t2)]
    challenge = _challenge([(i, scalars[i]) for i in disclosed], encoded_points, domain, ph, suite)

    r3 = pow(r2, -1, R)
    responses = [
        (e_tilde + e * challenge) % R,
        (r1_tilde - r1 * challenge) % R,
        (r3_tilde - r3 * challenge) % R,
        *((m_tilde + scalars[j] * challenge) % R for m_tilde, j in zip(m_tildes, undisclosed, strict=True)),
        challenge,
    ]
    return b"".join(encoded_points[:3]) + b"".join(_scalar_bytes(s) for s in responses)


@dataclass(frozen=True)
class _Proof:
    a_bar: Point
    b_bar: Point
    d_point: Point
    encoded_points: bytes
    e_hat: int
    r1_hat: int
    r3_hat: int
    commitments: list[int]
    challenge: int


def _parse_proof(backend: CurveBackend, proof: bytes) -> _Proof:
    proof = _as_bytes(proof, "proof")
    if len(proof) < _PROOF_FLOOR_LENGTH or (len(proof) - 3 * G1_LENGTH) % SCALAR_LENGTH:
        raise BbsInputError(f"proof length {len(proof)} is not 144 + 32 * k bytes with k >= 4 (3 points, 4+ scalars)")
    names = ("Abar", "Bbar", "D")
    a_bar, b_bar, d_point = (
        _nonidentity_g1(backend, proof[i * G1_LENGTH : (i + 1) * G1_LENGTH], f"proof point {name}")
        for i, name in enumerate(names)
    )
    offset = 3 * G1_LENGTH
    scalars = [
        _parse_scalar(proof[start : start + SCALAR_LENGTH], f"proof scalar #{n}")
        for n, start in enumerate(range(offset, len(proof), SCALAR_LENGTH))
    ]
    return _Proof(
        a_bar=a_bar,
        b_bar=b_bar,
        d_point=d_point,
        encoded_points=proof[:offset],
        e_hat=scalars[0],
        r1_hat=scalars[1],
        r3_hat=scalars[2],
        commitments=scalars[3:-1],
        challenge=scalars[-1],
    )


def proof_verify(
    pk: bytes,
    proof: bytes,
    header: bytes | None,
    ph: bytes | None,
    disclosed_messages: Sequence[bytes],
    disclosed_indexes: Sequence[int],
    suite: Ciphersuite = SHA256_SUITE,
    backend: CurveBackend | None = None,
) -> bool:
    """ProofVerify: True when `proof` proves a signature on these disclosed messages under pk.

    `disclosed_messages[k]` is the signed message at position `disclosed_indexes[k]`; the indexes
    must be ascending, distinct and below the signed message count (disclosed + the proof's
    undisclosed count). Returns False for a well-formed proof that does not verify; raises
    BbsInputError for malformed input (lengths, encodings, ranges, index/message mismatch).
    """
    backend = _resolve_backend(backend)
    parsed = _parse_proof(backend, proof)
    pk, w_point = _public_key_point(backend, pk)
    header = _optional_bytes(header, "header")
    ph = _optional_bytes(ph, "presentation header")
    messages = _as_message_list(disclosed_messages, "disclosed messages")
    total = len(disclosed_indexes) + len(parsed.commitments)
    _check_message_count(total)
    disclosed = _check_indexes(disclosed_indexes, total)
    if len(messages) != len(disclosed):
        raise BbsInputError(f"{len(messages)} disclosed messages do not match {len(disclosed)} disclosed indexes")
    scalars = messages_to_scalars(messages, suite)
    disclosed_set = set(disclosed)
    undisclosed = [j for j in range(total) if j not in disclosed_set]

    generators = _generators(total, suite, backend)
    q1, message_points = generators.prepared[0], generators.prepared[1:]
    domain = _calculate_domain(pk, generators.encoded, header, suite)
    c = parsed.challenge
    t1 = backend.g1_multi_mul([parsed.b_bar, parsed.a_bar, parsed.d_point], [c, parsed.e_hat, parsed.r1_hat])
    # T2 = Bv * c + D * r3^ + sum H_j * m^_j, with Bv = P1 + Q_1 * domain + sum H_i * msg_i
    # expanded into a single multi-scalar multiplication.
    t2 = backend.g1_multi_mul(
        [
            *_p1(suite, backend).prepared,
            q1,
            *(message_points[i] for i in disclosed),
            parsed.d_point,
            *(message_points[j] for j in undisclosed),
        ],
        [c, domain * c % R, *(s * c % R for s in scalars), parsed.r3_hat, *parsed.commitments],
    )
    encoded_points = [parsed.encoded_points, backend.g1_to_bytes(t1), backend.g1_to_bytes(t2)]
    challenge = _challenge(list(zip(disclosed, scalars, strict=True)), encoded_points, domain, ph, suite)
    if challenge != c:
        return False
    return backend.pairing_product_is_one(
        [(parsed.a_bar, w_point), (backend.g1_neg(parsed.b_bar), backend.g2_generator())]
    )
