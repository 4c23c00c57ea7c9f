"""Multibase, multicodec public keys and CIDv1, the small subset Tessera needs.

Decoding functions raise `MultiformatError` (a `ValueError`) on any malformed input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_INDEX = {char: index for index, char in enumerate(BASE58_ALPHABET)}
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]*$")
_BASE32_LOWER = re.compile(r"^[a-z2-7]*$")

ED25519_PUB = 0xED
P256_PUB = 0x1200
P384_PUB = 0x1201
BLS12_381_G2_PUB = 0xEB
ED25519_PRIV = 0x1300
P256_PRIV = 0x1306
P384_PRIV = 0x1307
BLS12_381_G2_PRIV = 0x130A
JSON_CODEC = 0x0200
RAW_CODEC = 0x55
SHA2_256 = 0x12

KEY_TYPE_BY_CODEC = {
    ED25519_PUB: "Ed25519",
    P256_PUB: "P-256",
    P384_PUB: "P-384",
    BLS12_381_G2_PUB: "Bls12381G2",
}
CODEC_BY_KEY_TYPE = {key_type: codec for codec, key_type in KEY_TYPE_BY_CODEC.items()}
PUBLIC_KEY_LENGTHS = {"Ed25519": (32,), "P-256": (33,), "P-384": (49,), "Bls12381G2": (96,)}


class MultiformatError(ValueError):
    """Input is not valid multibase / multicodec / varint data."""


def base58btc_encode(data: bytes) -> str:
    """Bitcoin base58 of `data` (no multibase prefix)."""
    zeros = len(data) - len(data.lstrip(b"\0"))
    number = int.from_bytes(data, "big")
    chars = []
    while number:
        number, remainder = divmod(number, 58)
        chars.append(BASE58_ALPHABET[remainder])
    return "1" * zeros + "".join(reversed(chars))


def base58btc_decode(text: str) -> bytes:
    """Bytes of a Bitcoin base58 string (no multibase prefix); raises `MultiformatError`."""
    number = 0
    for char in text:
        try:
            number = number * 58 + _BASE58_INDEX[char]
        except KeyError:
            raise MultiformatError(f"invalid base58btc character {char!r}") from None
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def multibase_encode(data: bytes, base: str = "z") -> str:
    """Multibase text: `z` base58btc, `u` base64url without padding, `b` base32 lower without padding."""
    if base == "z":
        return "z" + base58btc_encode(data)
    if base == "u":
        return "u" + base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
    if base == "b":
        return "b" + base64.b32encode(data).rstrip(b"=").decode("ascii").lower()
    raise MultiformatError(f"unsupported multibase {base!r}")


def multibase_decode(text: str, *, allowed: str = "zub") -> bytes:
    """Bytes of a multibase string whose prefix is in `allowed`; raises `MultiformatError`."""
    if not isinstance(text, str) or not text:
        raise MultiformatError("multibase value must be a non-empty string")
    prefix, body = text[0], text[1:]
    if prefix not in allowed:
        raise MultiformatError(f"unsupported multibase prefix {prefix!r}")
    if prefix == "z":
        return base58btc_decode(body)
    if prefix == "u":
        if not _BASE64URL.match(body) or len(body) % 4 == 1:
            raise MultiformatError("invalid base64url (no padding) text")
        try:
            return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except binascii.Error as error:
            raise MultiformatError(f"invalid base64url text: {error}") from None
    if not _BASE32_LOWER.match(body) or len(body) % 8 in (1, 3, 6):
        raise MultiformatError("invalid base32 (lower, no padding) text")
    try:
        return base64.b32decode(body.upper() + "=" * (-len(body) % 8))
    except binascii.Error as error:
        raise MultiformatError(f"invalid base32 text: {error}") from None


def varint_encode(value: int) -> bytes:
    """Unsigned LEB128 varint."""
    if value < 0:
        raise MultiformatError("varint must be non-negative")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint_decode(data: bytes) -> tuple[int, int]:
    """(value, bytes consumed) of the unsigned varint at the start of `data`; at most 9 bytes."""
    value = 0
    for index, byte in enumerate(data[:9]):
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if index > 0 and byte == 0:
                raise MultiformatError("varint is not minimally encoded")
            return value, index + 1
    raise MultiformatError("truncated or oversized varint")


def encode_multikey(key_type: str, public_key: bytes) -> str:
    """`publicKeyMultibase` (base58btc multicodec) of a raw public key of `key_type`."""
    try:
        codec = CODEC_BY_KEY_TYPE[key_type]
    except KeyError:
        raise MultiformatError(f"unsupported key type {key_type!r}") from None
    return multibase_encode(varint_encode(codec) + public_key, "z")


def decode_multikey(text: str) -> tuple[str, bytes]:
    """(key type, raw public key) of a `publicKeyMultibase` value; raises `MultiformatError`.

    The raw key length is checked per type (compressed points for P-256/P-384/BLS12-381 G2).
    """
    data = multibase_decode(text, allowed="zu")
    codec, consumed = varint_decode(data)
    key_type = KEY_TYPE_BY_CODEC.get(codec)
    if key_type is None:
        raise MultiformatError(f"unsupported multicodec 0x{codec:x}")
    public_key = data[consumed:]
    if len(public_key) not in PUBLIC_KEY_LENGTHS[key_type]:
        raise MultiformatError(f"{key_type} public key has {len(public_key)} bytes")
    return key_type, public_key


def decode_multikey_secret(text: str) -> tuple[str, bytes]:
    """(key type, raw secret key) of a `secretKeyMultibase`/`privateKeyMultibase` value."""
    data = multibase_decode(text, allowed="zu")
    codec, consumed = varint_decode(data)
    key_types = {
        ED25519_PRIV: "Ed25519",
        P256_PRIV: "P-256",
        P384_PRIV: "P-384",
        BLS12_381_G2_PRIV: "Bls12381G2",
    }
    if codec not in key_types:
        raise MultiformatError(f"unsupported secret-key multicodec 0x{codec:x}")
    return key_types[codec], data[consumed:]


def cid_for(data: bytes, *, codec: int = JSON_CODEC) -> str:
    """CIDv1 of `data`: multicodec `codec` (json 0x0200 or raw 0x55), sha2-256, base32 lower `b...`."""
    if codec not in (JSON_CODEC, RAW_CODEC):
        raise MultiformatError(f"unsupported CID codec 0x{codec:x}")
    digest = hashlib.sha256(data).digest()
    multihash = varint_encode(SHA2_256) + varint_encode(len(digest)) + digest
    return multibase_encode(varint_encode(1) + varint_encode(codec) + multihash, "b")
