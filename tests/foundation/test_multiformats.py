"""`app.multiformats`: multibase, multicodec keys and CIDv1, published examples and malformed input."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785

from app.multiformats import (
    JSON_CODEC,
    RAW_CODEC,
    MultiformatError,
    base58btc_decode,
    base58btc_encode,
    cid_for,
    decode_multikey,
    decode_multikey_secret,
    encode_multikey,
    multibase_decode,
    multibase_encode,
    varint_decode,
    varint_encode,
)
from tests.support.vectors import VECTORS


@pytest.mark.parametrize(
    ("base", "text"),
    [("z", "zStV1DL6CwTryKyV"), ("u", "uaGVsbG8gd29ybGQ"), ("b", "bnbswy3dpeb3w64tmmq")],
)
def test_multibase_spec_examples(base: str, text: str) -> None:
    assert multibase_encode(b"hello world", base) == text
    assert multibase_decode(text) == b"hello world"


@pytest.mark.parametrize("data", [b"", b"\0", b"\0\0\x01", bytes(range(256)), b"\xff" * 40])
def test_base58_round_trips_with_leading_zeros(data: bytes) -> None:
    assert base58btc_decode(base58btc_encode(data)) == data


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("", "zub"),
        ("z0OIl", "z"),
        ("mAAAA", "zub"),
        ("uAA==", "u"),
        ("u+/", "u"),
        ("bABC", "b"),
        ("ba", "b"),
        ("zStV1DL6CwTryKyV", "u"),
        (None, "z"),
    ],
)
def test_malformed_multibase_is_rejected(text, allowed: str) -> None:
    with pytest.raises(MultiformatError):
        multibase_decode(text, allowed=allowed)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 0xED, 0x1200, 0x1201, 0x0200, 2**40])
def test_varints_round_trip(value: int) -> None:
    encoded = varint_encode(value)
    assert varint_decode(encoded + b"rest") == (value, len(encoded))


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff" * 10, b"\x80\x00"])
def test_malformed_varints_are_rejected(data: bytes) -> None:
    with pytest.raises(MultiformatError):
        varint_decode(data)


@pytest.mark.parametrize(
    ("key_file", "key_type", "prefix", "length"),
    [
        ("eddsa/keyPair.json", "Ed25519", "z6Mk", 32),
        ("ecdsa/p256KeyPair.json", "P-256", "zDna", 33),
        ("ecdsa/p384KeyPair.json", "P-384", "z82L", 49),
    ],
)
def test_multikeys_of_the_vectors(key_file: str, key_type: str, prefix: str, length: int) -> None:
    pair = json.loads((VECTORS / key_file).read_text())
    decoded_type, public_key = decode_multikey(pair["publicKeyMultibase"])
    assert (decoded_type, len(public_key)) == (key_type, length)
    assert encode_multikey(key_type, public_key) == pair["publicKeyMultibase"]
    assert pair["publicKeyMultibase"].startswith(prefix)
    secret_type, secret = decode_multikey_secret(pair.get("secretKeyMultibase") or pair["privateKeyMultibase"])
    assert secret_type == key_type and len(secret) == (32 if key_type != "P-384" else 48)


def test_bls12_381_g2_multikey() -> None:
    public_key = bytes.fromhex(json.loads((VECTORS / "bbs-2023/BBSKeyMaterial.json").read_text())["publicKeyHex"])
    encoded = encode_multikey("Bls12381G2", public_key)
    assert encoded.startswith("zUC7") and decode_multikey(encoded) == ("Bls12381G2", public_key)


@pytest.mark.parametrize(
    "text",
    [
        encode_multikey("Ed25519", b"\x01" * 31),
        encode_multikey("P-256", b"\x02" * 65),
        multibase_encode(varint_encode(0x1205) + b"\x01" * 32, "z"),  # rsa-pub is not supported
        "z",
    ],
)
def test_bad_multikeys_are_rejected(text: str) -> None:
    with pytest.raises(MultiformatError):
        decode_multikey(text)


def test_cid_of_empty_raw_block_is_the_well_known_one() -> None:
    assert cid_for(b"", codec=RAW_CODEC) == "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def test_cid_over_canonical_json() -> None:
    document = {"b": [1, 2], "a": "x"}
    canonical = rfc8785.dumps(document)
    cid = cid_for(canonical)
    assert cid.startswith("bagaaiera")
    raw = multibase_decode(cid)
    assert raw[:5] == varint_encode(1) + varint_encode(JSON_CODEC) + bytes([0x12, 0x20])
    assert raw[5:] == hashlib.sha256(canonical).digest()
    assert cid == cid_for(rfc8785.dumps({"a": "x", "b": [1, 2]}))
    with pytest.raises(MultiformatError):
        cid_for(canonical, codec=0x71)
