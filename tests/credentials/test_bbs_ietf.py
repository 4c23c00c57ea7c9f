"""BBS primitives against every IETF fixture (both ciphersuites, both curve backends), plus tampering."""

from __future__ import annotations

import json
import secrets
from functools import cache

import pytest

import app.credentials.bbs as bbs
from app.credentials.bbs.curve import BP2_COMPRESSED
from app.credentials.bbs.hash_to_curve import (
    XMD_SHA256,
    XOF_SHAKE256,
    P,
    R,
    expand_message_xmd_sha256,
    expand_message_xof_shake256,
    hash_to_g1_compressed,
)
from tests.support.vectors import VECTORS

IETF_DIR = VECTORS / "bbs-ietf"
SUITES = {"bls12-381-sha-256": bbs.SHA256_SUITE, "bls12-381-shake-256": bbs.SHAKE256_SUITE}
SIGNATURE_CASES = [f"signature{n:03d}" for n in range(1, 11)]
PROOF_CASES = [f"proof{n:03d}" for n in range(1, 16)]


@cache
def load(suite_dir: str, name: str) -> dict:
    return json.loads((IETF_DIR / suite_dir / f"{name}.json").read_text())


def hexes(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(v) for v in values]


@pytest.fixture(params=["pyblst", "arkworks"])
def backend(request: pytest.FixtureRequest) -> bbs.CurveBackend:
    return bbs.get_backend(request.param)


@pytest.fixture(params=sorted(SUITES))
def suite_dir(request: pytest.FixtureRequest) -> str:
    return request.param


def is_strictly_ascending(indexes: list[int]) -> bool:
    return all(a < b for a, b in zip(indexes, indexes[1:], strict=False))


# --- RFC 9380 building blocks --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "length", "expected"),
    [
        (b"", 0x20, "68a985b87eb6b46952128911f2a4412bbc302a9d759667f87f7a21d803f07235"),
        (b"abc", 0x20, "d8ccab23b5985ccea865c6c97b6e5b8350e794e603b4b97902f53a8a0d605615"),
        (
            b"abc",
            0x80,
            "abba86a6129e366fc877aab32fc4ffc70120d8996c88aee2fe4b32d6c7b6437a647e6c3163d40b76a73cf6a5674ef1d8"
            "90f95b664ee0afa5359a5c4e07985635bbecbac65d747d3d2da7ec2b8221b17b0ca9dc8a1ac1c07ea6a1e60583e2cb00"
            "058e77b7b72a298425cd1b941ad4ec65e8afc50303a22c0f99b0509b4c895f40",
        ),
    ],
)
def test_expand_message_xmd_sha256_matches_rfc9380(msg: bytes, length: int, expected: str) -> None:
    dst = b"QUUX-V01-CS02-with-expander-SHA256-128"
    assert expand_message_xmd_sha256(msg, dst, length).hex() == expected


@pytest.mark.parametrize(
    ("msg", "length", "expected"),
    [
        (b"", 0x20, "2ffc05c48ed32b95d72e807f6eab9f7530dd1c2f013914c8fed38c5ccc15ad76"),
        (b"abc", 0x20, "b39e493867e2767216792abce1f2676c197c0692aed061560ead251821808e07"),
        (
            b"abc",
            0x80,
            "a54303e6b172909783353ab05ef08dd435a558c3197db0c132134649708e0b9b4e34fb99b92a9e9e28fc1f1d8860d858"
            "97a8e021e6382f3eea10577f968ff6df6c45fe624ce65ca25932f679a42a404bc3681efe03fcd45ef73bb3a8f79ba784"
            "f80f55ea8a3c367408f30381299617f50c8cf8fbb21d0f1e1d70b0131a7b6fbe",
        ),
    ],
)
def test_expand_message_xof_shake256_matches_rfc9380(msg: bytes, length: int, expected: str) -> None:
    dst = b"QUUX-V01-CS02-with-expander-SHAKE256"
    assert expand_message_xof_shake256(msg, dst, length).hex() == expected


def test_expand_message_rejects_oversized_dst() -> None:
    with pytest.raises(ValueError, match="DST"):
        expand_message_xmd_sha256(b"", b"x" * 256, 32)


def test_pure_python_hash_to_curve_matches_rfc9380_and_both_backends(backend: bbs.CurveBackend) -> None:
    dst = b"QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_"
    # RFC 9380 J.9.1, msg "abc": P.x = 03567bc5..., compressed with the sign bit of P.y clear.
    rfc_abc = "83567bc5ef9c690c2ab2ecdf6a96ef1c139cc0b2f284dca0a9a7943388a49a3aee664ba5379a7655d3c68900be2f6903"
    assert hash_to_g1_compressed(b"abc", dst, XMD_SHA256).hex() == rfc_abc
    for msg in (b"", b"abc", b"q128_" + b"q" * 128):
        native = backend.g1_to_bytes(backend.g1_hash_to_curve(msg, dst, XMD_SHA256))
        assert native == hash_to_g1_compressed(msg, dst, XMD_SHA256)
    shake_dst = b"BBS-TEST-XOF-DST"
    assert backend.g1_to_bytes(backend.g1_hash_to_curve(b"abc", shake_dst, XOF_SHAKE256)) == (
        hash_to_g1_compressed(b"abc", shake_dst, XOF_SHAKE256)
    )


def test_multi_mul_with_prepared_bases_matches_plain_multiplication(backend: bbs.CurveBackend) -> None:
    generator = backend.g1_hash_to_curve(b"base", b"TEST-DST", XMD_SHA256)
    points = [backend.g1_mul(generator, k) for k in (2, 3, 5, 7, 11)]
    scalars = [0, 1, R - 1, secrets.randbelow(R), (1 << 255) + 12345]
    expected = backend.g1_mul(points[0], scalars[0])
    for point, scalar in zip(points[1:], scalars[1:], strict=True):
        expected = backend.g1_add(expected, backend.g1_mul(point, scalar))
    prepared = [backend.g1_prepare_fixed_base(point) for point in points]
    mixed = [prepared[0], points[1], prepared[2], points[3], prepared[4]]
    for operands in (points, prepared, mixed):
        result = backend.g1_multi_mul(operands, scalars)
        assert backend.g1_to_bytes(result) == backend.g1_to_bytes(expected)
    assert backend.g1_is_identity(backend.g1_multi_mul(prepared, [0] * 5))


# --- IETF fixtures -------------------------------------------------------------------------------


def test_generators_fixture(suite_dir: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, "generators")
    generators = bbs.create_generators(1 + len(fixture["MsgGenerators"]), suite, backend)
    assert bbs.base_point_p1(suite, backend).hex() == fixture["P1"]
    assert generators[0].hex() == fixture["Q1"]
    assert [g.hex() for g in generators[1:]] == fixture["MsgGenerators"]
    assert bbs.create_generators(3, suite, backend) == generators[:3]


def test_hash_to_scalar_fixture(suite_dir: str) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, "h2s")
    assert bytes.fromhex(fixture["dst"]) == suite.api_id + b"H2S_"
    scalar = bbs.hash_to_scalar(bytes.fromhex(fixture["message"]), bytes.fromhex(fixture["dst"]), suite)
    assert scalar == int(fixture["scalar"], 16)


def test_map_message_to_scalar_fixture(suite_dir: str) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, "MapMessageToScalarAsHash")
    assert bytes.fromhex(fixture["dst"]) == suite.api_id + b"MAP_MSG_TO_SCALAR_AS_HASH_"
    messages = hexes([case["message"] for case in fixture["cases"]])
    assert messages == hexes(json.loads((IETF_DIR / "messages.json").read_text()))
    assert bbs.messages_to_scalars(messages, suite) == [int(case["scalar"], 16) for case in fixture["cases"]]


def test_keypair_fixture(suite_dir: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, "keypair")
    sk = bbs.keygen(
        bytes.fromhex(fixture["keyMaterial"]),
        bytes.fromhex(fixture["keyInfo"]),
        bytes.fromhex(fixture["keyDst"]),
        suite,
    )
    assert sk.hex() == fixture["keyPair"]["secretKey"]
    assert bbs.sk_to_pk(sk, suite, backend).hex() == fixture["keyPair"]["publicKey"]


@pytest.mark.parametrize("case", SIGNATURE_CASES)
def test_signature_fixture(suite_dir: str, case: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, f"signature/{case}")
    sk = bytes.fromhex(fixture["signerKeyPair"]["secretKey"])
    pk = bytes.fromhex(fixture["signerKeyPair"]["publicKey"])
    header = bytes.fromhex(fixture["header"])
    messages = hexes(fixture["messages"])
    signature = bytes.fromhex(fixture["signature"])

    assert bbs.verify(pk, signature, header, messages, suite, backend) is fixture["result"]["valid"]
    if fixture["result"]["valid"]:
        assert bbs.sign(sk, pk, header, messages, suite, backend) == signature


@pytest.mark.parametrize("case", PROOF_CASES)
def test_proof_verify_fixture(suite_dir: str, case: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, f"proof/{case}")
    messages = hexes(fixture["messages"])
    indexes = fixture["disclosedIndexes"]
    arguments = (
        bytes.fromhex(fixture["signerPublicKey"]),
        bytes.fromhex(fixture["proof"]),
        bytes.fromhex(fixture["header"]),
        bytes.fromhex(fixture["presentationHeader"]),
        [messages[i] for i in indexes],
        indexes,
    )
    if not is_strictly_ascending(indexes):
        # proof010 re-orders (and repeats) indexes: refused as malformed input, never accepted.
        assert fixture["result"]["valid"] is False
        with pytest.raises(bbs.BbsInputError, match="ascending"):
            bbs.proof_verify(*arguments, suite=suite, backend=backend)
        return
    assert bbs.proof_verify(*arguments, suite=suite, backend=backend) is fixture["result"]["valid"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The valid proof cases are read from the fixtures at collection time, not at import.
    if metafunc.function.__name__ == "test_proof_gen_reproduces_fixture_with_mocked_rng":
        valid = [case for case in PROOF_CASES if load("bls12-381-sha-256", f"proof/{case}")["result"]["valid"]]
        metafunc.parametrize("case", valid)


def test_proof_gen_reproduces_fixture_with_mocked_rng(suite_dir: str, case: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, f"proof/{case}")
    mocked = load(suite_dir, "mockedRng")
    requested: list[int] = []

    def mocked_rng(count: int) -> list[int]:
        requested.append(count)
        return bbs.seeded_random_scalars(bytes.fromhex(mocked["seed"]), bytes.fromhex(mocked["dst"]), count, suite)

    proof = bbs.proof_gen(
        bytes.fromhex(fixture["signerPublicKey"]),
        bytes.fromhex(fixture["signature"]),
        bytes.fromhex(fixture["header"]),
        bytes.fromhex(fixture["presentationHeader"]),
        hexes(fixture["messages"]),
        fixture["disclosedIndexes"],
        suite=suite,
        rng=mocked_rng,
        backend=backend,
    )
    trace = fixture["trace"]["random_scalars"]
    expected_scalars = [int(trace[k], 16) for k in ("r1", "r2", "e_tilde", "r1_tilde", "r3_tilde")]
    expected_scalars += [int(v, 16) for v in trace["m_tilde_scalars"]]
    assert requested == [len(expected_scalars)]
    assert mocked_rng(requested[0]) == expected_scalars
    assert proof.hex() == fixture["proof"]


def test_mocked_rng_fixture(suite_dir: str) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, "mockedRng")
    scalars = bbs.seeded_random_scalars(
        bytes.fromhex(fixture["seed"]), bytes.fromhex(fixture["dst"]), fixture["count"], suite
    )
    assert scalars == [int(v, 16) for v in fixture["mockedScalars"]]


# --- round trips and interoperability between backends -------------------------------------------


@pytest.mark.parametrize("disclosed", [[], [0], [1, 3], [0, 1, 2, 3, 4]], ids=["none", "first", "some", "all"])
def test_round_trip_with_random_key_and_randomness(
    suite_dir: str, backend: bbs.CurveBackend, disclosed: list[int]
) -> None:
    suite = SUITES[suite_dir]
    sk = bbs.keygen(secrets.token_bytes(32), suite=suite)
    pk = bbs.sk_to_pk(sk, suite, backend)
    messages = [f"message {i}".encode() for i in range(5)]
    signature = bbs.sign(sk, pk, b"header", messages, suite, backend)
    assert bbs.verify(pk, signature, b"header", messages, suite, backend) is True

    proof = bbs.proof_gen(pk, signature, b"header", b"ph", messages, disclosed, suite=suite, backend=backend)
    assert len(proof) == 3 * 48 + 32 * (4 + len(messages) - len(disclosed))
    shown = [messages[i] for i in disclosed]
    assert bbs.proof_verify(pk, proof, b"header", b"ph", shown, disclosed, suite=suite, backend=backend)
    again = bbs.proof_gen(pk, signature, b"header", b"ph", messages, disclosed, suite=suite, backend=backend)
    assert again != proof, "proofs must be randomised (unlinkable)"


def test_signature_over_no_messages(suite_dir: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    sk = bbs.keygen(secrets.token_bytes(32), suite=suite)
    pk = bbs.sk_to_pk(sk, suite, backend)
    signature = bbs.sign(sk, pk, b"only a header", [], suite, backend)
    assert bbs.verify(pk, signature, b"only a header", [], suite, backend) is True
    assert bbs.verify(pk, signature, b"another header", [], suite, backend) is False
    proof = bbs.proof_gen(pk, signature, b"only a header", b"", [], [], suite=suite, backend=backend)
    assert bbs.proof_verify(pk, proof, b"only a header", b"", [], [], suite=suite, backend=backend) is True


def test_backends_interoperate(suite_dir: str) -> None:
    suite = SUITES[suite_dir]
    blst, arkworks = bbs.get_backend("pyblst"), bbs.get_backend("arkworks")
    sk = bbs.keygen(secrets.token_bytes(32), suite=suite)
    pk = bbs.sk_to_pk(sk, suite, blst)
    assert bbs.sk_to_pk(sk, suite, arkworks) == pk
    messages = [b"a", b"b", b"c"]
    signature = bbs.sign(sk, pk, b"h", messages, suite, blst)
    assert bbs.sign(sk, pk, b"h", messages, suite, arkworks) == signature
    assert bbs.verify(pk, signature, b"h", messages, suite, arkworks) is True
    proof = bbs.proof_gen(pk, signature, b"h", b"ph", messages, [2], suite=suite, backend=arkworks)
    assert bbs.proof_verify(pk, proof, b"h", b"ph", [b"c"], [2], suite=suite, backend=blst) is True


def test_default_suite_and_backend_are_sha256_and_pyblst() -> None:
    fixture = load("bls12-381-sha-256", "proof/proof003")
    messages = hexes(fixture["messages"])
    indexes = fixture["disclosedIndexes"]
    assert (
        bbs.proof_verify(
            bytes.fromhex(fixture["signerPublicKey"]),
            bytes.fromhex(fixture["proof"]),
            bytes.fromhex(fixture["header"]),
            bytes.fromhex(fixture["presentationHeader"]),
            [messages[i] for i in indexes],
            indexes,
        )
        is True
    )
    assert bbs.get_suite("BBS_BLS12381G1_XMD:SHA-256_SSWU_RO_") is bbs.SHA256_SUITE
    assert bbs.get_suite("BBS_BLS12381G1_XOF:SHAKE-256_SSWU_RO_") is bbs.SHAKE256_SUITE
    assert bbs.SHA256_SUITE.api_id == b"BBS_BLS12381G1_XMD:SHA-256_SSWU_RO_H2G_HM2S_"
    with pytest.raises(ValueError, match="unknown BBS ciphersuite"):
        bbs.get_suite("BBS_BLS12381G2_XMD:SHA-256_SSWU_RO_")
    with pytest.raises(ValueError, match="unknown curve backend"):
        bbs.get_backend("relic")


# --- tampering: a changed proof byte, message or key fails ---------------------------------------


@pytest.fixture
def proof_case(suite_dir: str) -> dict:
    fixture = load(suite_dir, "proof/proof003")
    messages = hexes(fixture["messages"])
    indexes = fixture["disclosedIndexes"]
    return {
        "suite": SUITES[suite_dir],
        "pk": bytes.fromhex(fixture["signerPublicKey"]),
        "proof": bytes.fromhex(fixture["proof"]),
        "header": bytes.fromhex(fixture["header"]),
        "ph": bytes.fromhex(fixture["presentationHeader"]),
        "messages": [messages[i] for i in indexes],
        "indexes": indexes,
    }


def check_proof(case: dict, backend: bbs.CurveBackend, **changes: object) -> bool:
    values = {**case, **changes}
    return bbs.proof_verify(
        values["pk"],
        values["proof"],
        values["header"],
        values["ph"],
        values["messages"],
        values["indexes"],
        suite=values["suite"],
        backend=backend,
    )


def flip(data: bytes, position: int, mask: int = 0x01) -> bytes:
    changed = bytearray(data)
    changed[position] ^= mask
    return bytes(changed)


def test_untampered_proof_verifies(proof_case: dict, backend: bbs.CurveBackend) -> None:
    assert check_proof(proof_case, backend) is True


@pytest.mark.parametrize(
    "position",
    [3 * 48 + 31, 3 * 48 + 32 + 31, 3 * 48 + 64 + 31, 3 * 48 + 96 + 31, -1],
    ids=["e_hat", "r1_hat", "r3_hat", "first_commitment", "challenge"],
)
def test_flipped_scalar_byte_fails(proof_case: dict, backend: bbs.CurveBackend, position: int) -> None:
    assert check_proof(proof_case, backend, proof=flip(proof_case["proof"], position)) is False


@pytest.mark.parametrize("point", [0, 1, 2], ids=["Abar", "Bbar", "D"])
def test_flipped_point_byte_is_refused(proof_case: dict, backend: bbs.CurveBackend, point: int) -> None:
    tampered = flip(proof_case["proof"], point * 48 + 47)
    with pytest.raises(bbs.BbsInputError, match="proof point"):
        check_proof(proof_case, backend, proof=tampered)


def test_swapping_points_fails(proof_case: dict, backend: bbs.CurveBackend) -> None:
    proof = proof_case["proof"]
    swapped = proof[48:96] + proof[:48] + proof[96:]
    assert check_proof(proof_case, backend, proof=swapped) is False


def test_changed_disclosed_message_fails(proof_case: dict, backend: bbs.CurveBackend) -> None:
    messages = list(proof_case["messages"])
    messages[1] = messages[1] + b"!"
    assert check_proof(proof_case, backend, messages=messages) is False


def test_other_disclosure_positions_fail(proof_case: dict, backend: bbs.CurveBackend) -> None:
    assert check_proof(proof_case, backend, indexes=[1, 2, 4, 6]) is False


def test_other_key_fails(proof_case: dict, backend: bbs.CurveBackend) -> None:
    other_pk = bbs.sk_to_pk(bbs.keygen(secrets.token_bytes(32)), backend=backend)
    assert check_proof(proof_case, backend, pk=other_pk) is False


def test_other_header_or_presentation_header_fails(proof_case: dict, backend: bbs.CurveBackend) -> None:
    assert check_proof(proof_case, backend, header=proof_case["header"] + b"\x00") is False
    assert check_proof(proof_case, backend, ph=b"") is False


def test_other_suite_fails(proof_case: dict, backend: bbs.CurveBackend) -> None:
    other = bbs.SHAKE256_SUITE if proof_case["suite"] is bbs.SHA256_SUITE else bbs.SHA256_SUITE
    assert check_proof(proof_case, backend, suite=other) is False


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda proof: proof[:-1], "proof length"),
        (lambda proof: proof[: 3 * 48 + 3 * 32], "proof length"),
        (lambda proof: proof[:-32] + b"\xff" * 32, "not a scalar"),
        (lambda proof: proof[:-32] + bytes(32), "not a scalar"),
        (lambda proof: proof[:-32] + R.to_bytes(32, "big"), "not a scalar"),
        (lambda proof: bytes([0xC0]) + bytes(47) + proof[48:], "identity"),
        (lambda proof: bytes([proof[0] & 0x7F]) + proof[1:], "compressed"),
        (lambda proof: bytes([0x9F]) + b"\xff" * 47 + proof[48:], "canonical"),
    ],
    ids=[
        "truncated",
        "too_short",
        "scalar_too_big",
        "zero_scalar",
        "scalar_equals_r",
        "identity",
        "uncompressed_flag",
        "x_not_reduced",
    ],
)
def test_malformed_proof_raises(proof_case: dict, backend: bbs.CurveBackend, change, reason: str) -> None:
    with pytest.raises(bbs.BbsInputError, match=reason):
        check_proof(proof_case, backend, proof=change(proof_case["proof"]))


@pytest.mark.parametrize(
    ("indexes", "messages_count", "reason"),
    [
        ([0, 2, 4, 60], 4, "out of range"),
        ([-1, 2, 4, 6], 4, "out of range"),
        ([2, 0, 4, 6], 4, "ascending"),
        ([0, 2, 4, 6], 3, "do not match"),
        ([0, 2, 4, True], 4, "not an integer"),
    ],
)
def test_bad_disclosure_raises(
    proof_case: dict, backend: bbs.CurveBackend, indexes: list, messages_count: int, reason: str
) -> None:
    with pytest.raises(bbs.BbsInputError, match=reason):
        check_proof(proof_case, backend, indexes=indexes, messages=proof_case["messages"][:messages_count])


def small_g1_points_outside_subgroup() -> tuple[bytes, bytes]:
    """(an on-curve point outside G1, an x with no point on the curve), both compressed."""
    on_curve = off_curve = None
    x = 1
    while on_curve is None or off_curve is None:
        x += 1
        if pow(x**3 + 4, (P - 1) // 2, P) == 1:
            on_curve = on_curve or bytes([0x80]) + x.to_bytes(48, "big")[1:]
        else:
            off_curve = off_curve or bytes([0x80]) + x.to_bytes(48, "big")[1:]
    return on_curve, off_curve


def test_points_outside_the_subgroup_or_curve_are_refused(proof_case: dict, backend: bbs.CurveBackend) -> None:
    outside_subgroup, off_curve = small_g1_points_outside_subgroup()
    with pytest.raises(bbs.BbsInputError, match="subgroup"):
        check_proof(proof_case, backend, proof=outside_subgroup + proof_case["proof"][48:])
    with pytest.raises(bbs.BbsInputError, match="not on the curve"):
        check_proof(proof_case, backend, proof=off_curve + proof_case["proof"][48:])


@pytest.mark.parametrize(
    ("pk", "reason"),
    [
        (b"\x00" * 95, "96 bytes"),
        (bytes([0xC0]) + bytes(95), "identity"),
        (flip(BP2_COMPRESSED, 95), "G2 point"),
        ("not bytes", "must be bytes"),
    ],
    ids=["short", "identity", "not_a_key", "wrong_type"],
)
def test_malformed_public_key_raises(proof_case: dict, backend: bbs.CurveBackend, pk, reason: str) -> None:
    with pytest.raises(bbs.BbsInputError, match=reason):
        check_proof(proof_case, backend, pk=pk)


# --- signature tampering and key handling --------------------------------------------------------


@pytest.fixture
def signature_case(suite_dir: str) -> dict:
    fixture = load(suite_dir, "signature/signature004")
    return {
        "suite": SUITES[suite_dir],
        "sk": bytes.fromhex(fixture["signerKeyPair"]["secretKey"]),
        "pk": bytes.fromhex(fixture["signerKeyPair"]["publicKey"]),
        "header": bytes.fromhex(fixture["header"]),
        "messages": hexes(fixture["messages"]),
        "signature": bytes.fromhex(fixture["signature"]),
    }


def check_signature(case: dict, backend: bbs.CurveBackend, **changes: object) -> bool:
    values = {**case, **changes}
    return bbs.verify(values["pk"], values["signature"], values["header"], values["messages"], values["suite"], backend)


def test_signature_tampering(signature_case: dict, backend: bbs.CurveBackend) -> None:
    assert check_signature(signature_case, backend) is True
    assert check_signature(signature_case, backend, signature=flip(signature_case["signature"], 79)) is False
    changed = list(signature_case["messages"])
    changed[3] = b"changed"
    assert check_signature(signature_case, backend, messages=changed) is False
    other_pk = bbs.sk_to_pk(bbs.keygen(secrets.token_bytes(32)), backend=backend)
    assert check_signature(signature_case, backend, pk=other_pk) is False


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (lambda sig: sig[:-1], "80 bytes"),
        (lambda sig: sig[:48] + bytes(32), "not a scalar"),
        (lambda sig: bytes([0xC0]) + bytes(47) + sig[48:], "identity"),
        (lambda sig: flip(sig, 47), "signature point A"),
    ],
    ids=["short", "zero_e", "identity_A", "A_not_a_point"],
)
def test_malformed_signature_raises(signature_case: dict, backend: bbs.CurveBackend, signature, reason) -> None:
    with pytest.raises(bbs.BbsInputError, match=reason):
        check_signature(signature_case, backend, signature=signature(signature_case["signature"]))


def test_sign_refuses_bad_keys(signature_case: dict, backend: bbs.CurveBackend) -> None:
    case = signature_case
    other_pk = bbs.sk_to_pk(bbs.keygen(secrets.token_bytes(32)), backend=backend)
    with pytest.raises(bbs.BbsInputError, match="does not belong"):
        bbs.sign(case["sk"], other_pk, case["header"], case["messages"], case["suite"], backend)
    for bad_sk, reason in ((bytes(32), "not a scalar"), (R.to_bytes(32, "big"), "not a scalar"), (b"1", "32 bytes")):
        with pytest.raises(bbs.BbsInputError, match=reason):
            bbs.sign(bad_sk, case["pk"], case["header"], case["messages"], case["suite"], backend)
    with pytest.raises(bbs.BbsInputError, match="at least 32 bytes"):
        bbs.keygen(b"short")
    with pytest.raises(bbs.BbsInputError, match="list of byte strings"):
        bbs.sign(case["sk"], case["pk"], case["header"], b"not a list", case["suite"], backend)


def test_proof_gen_checks_its_inputs(signature_case: dict, backend: bbs.CurveBackend) -> None:
    case = signature_case
    args = (case["pk"], case["signature"], case["header"], b"ph", case["messages"])
    with pytest.raises(bbs.BbsInputError, match="out of range"):
        bbs.proof_gen(*args, [10], suite=case["suite"], backend=backend)
    with pytest.raises(bbs.BbsInputError, match="ascending"):
        bbs.proof_gen(*args, [3, 3], suite=case["suite"], backend=backend)
    with pytest.raises(bbs.BbsInputError, match="wrong number"):
        bbs.proof_gen(*args, [0], suite=case["suite"], rng=lambda count: [1] * (count - 1), backend=backend)
    with pytest.raises(bbs.BbsInputError, match="zero"):
        bbs.proof_gen(*args, [0], suite=case["suite"], rng=lambda count: [R] * count, backend=backend)


def test_proof_from_an_invalid_signature_does_not_verify(signature_case: dict, backend: bbs.CurveBackend) -> None:
    case = signature_case
    forged = flip(case["signature"], 79)
    proof = bbs.proof_gen(
        case["pk"], forged, case["header"], b"", case["messages"], [0], suite=case["suite"], backend=backend
    )
    assert (
        bbs.proof_verify(
            case["pk"], proof, case["header"], b"", case["messages"][:1], [0], suite=case["suite"], backend=backend
        )
        is False
    )


def test_message_count_is_bounded(proof_case: dict, signature_case: dict, backend: bbs.CurveBackend) -> None:
    too_many = bbs.MAX_MESSAGES + 1
    with pytest.raises(bbs.BbsInputError, match="supported maximum"):
        check_proof(proof_case, backend, indexes=list(range(too_many)), messages=[b"m"] * too_many)
    case = signature_case
    with pytest.raises(bbs.BbsInputError, match="supported maximum"):
        bbs.sign(case["sk"], case["pk"], case["header"], [b"m"] * too_many, case["suite"], backend)
    assert bbs.create_generators(0, case["suite"], backend) == []


def test_missing_headers_mean_empty_but_messages_must_be_bytes(suite_dir: str, backend: bbs.CurveBackend) -> None:
    suite = SUITES[suite_dir]
    fixture = load(suite_dir, "signature/signature010")
    assert fixture["header"] == ""
    pk = bytes.fromhex(fixture["signerKeyPair"]["publicKey"])
    signature = bytes.fromhex(fixture["signature"])
    messages = hexes(fixture["messages"])
    assert bbs.verify(pk, signature, None, messages, suite, backend) is True
    with pytest.raises(bbs.BbsInputError, match=r"messages\[2\] must be bytes"):
        bbs.verify(pk, signature, None, [*messages[:2], None, *messages[3:]], suite, backend)
    with pytest.raises(bbs.BbsInputError, match=r"messages\[0\] must be bytes"):
        bbs.verify(pk, signature, None, ["text, not bytes"], suite, backend)
