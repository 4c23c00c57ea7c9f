"""Independent implementations for cross-checks: Data Integrity proofs made and checked without
Tessera's cryptosuites, BBS on py-arkworks-bls12381, ECDSA/EdDSA on `cryptography`.

Only the JSON-LD canonicalization (pyld's URDNA2015, with its own loader, no safe mode) and the
JSON canonicalization (rfc8785) are libraries; everything a suite adds is written here from the
specifications (vc-di-eddsa, vc-di-ecdsa, vc-di-bbs, draft-irtf-cfrg-bbs-signatures).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import re
import secrets
from datetime import UTC, datetime

import cbor2
import py_arkworks_bls12381 as ark
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pyld import jsonld

from tests.support.vectors import VECTORS

# --- encodings ----------------------------------------------------------------------------------

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
MULTICODEC = {"Ed25519": b"\xed\x01", "P-256": b"\x80\x24", "P-384": b"\x81\x24", "Bls12381G2": b"\xeb\x01"}


def b58encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    text = ""
    while number:
        number, rest = divmod(number, 58)
        text = _B58[rest] + text
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + text


def b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        number = number * 58 + _B58.index(char)
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def multikey(key_type: str, public_key: bytes) -> str:
    return "z" + b58encode(MULTICODEC[key_type] + public_key)


def public_key_from_multikey(text: str) -> tuple[str, bytes]:
    raw = b58decode(text[1:])
    for key_type, prefix in MULTICODEC.items():
        if raw.startswith(prefix):
            return key_type, raw[len(prefix) :]
    raise ValueError("unknown multicodec")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --- canonicalization ---------------------------------------------------------------------------

_URLS = json.loads((VECTORS / "contexts" / "urlmap.json").read_text())


def _loader(url: str, _options: dict | None = None) -> dict:
    document = json.loads((VECTORS / "contexts" / _URLS[url]).read_text())
    return {"contextUrl": None, "documentUrl": url, "document": document}


def rdfc(document: dict) -> str:
    return jsonld.normalize(
        document, {"algorithm": "URDNA2015", "format": "application/n-quads", "documentLoader": _loader}
    )


def _proof_config(document: dict, proof: dict) -> dict:
    config = {name: value for name, value in proof.items() if name != "proofValue"}
    config["@context"] = document["@context"]
    return config


def _unsecured(vc: dict) -> dict:
    return {name: value for name, value in vc.items() if name != "proof"}


# --- eddsa/ecdsa rdfc/jcs -----------------------------------------------------------------------


def hash_data(document: dict, proof: dict, transformation: str) -> bytes:
    """sha256(canonical proof config) || sha256(canonical document) (SHA-256 / P-256 / Ed25519 only)."""
    config = _proof_config(document, proof)
    if transformation == "jcs":
        return hashlib.sha256(rfc8785.dumps(config)).digest() + hashlib.sha256(rfc8785.dumps(document)).digest()
    return hashlib.sha256(rdfc(config).encode()).digest() + hashlib.sha256(rdfc(document).encode()).digest()


def _jcs_hash_data_p384(document: dict, proof: dict) -> bytes:
    config = _proof_config(document, proof)
    return hashlib.sha384(rfc8785.dumps(config)).digest() + hashlib.sha384(rfc8785.dumps(document)).digest()


def _raw_ecdsa(private_key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    size = private_key.curve.key_size // 8
    digest = hashes.SHA256() if size == 32 else hashes.SHA384()
    r, s = decode_dss_signature(private_key.sign(data, ec.ECDSA(digest)))
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def _ecdsa_valid(key_type: str, public_key: bytes, signature: bytes, data: bytes) -> bool:
    curve = ec.SECP256R1() if key_type == "P-256" else ec.SECP384R1()
    size = 32 if key_type == "P-256" else 48
    digest = hashes.SHA256() if key_type == "P-256" else hashes.SHA384()
    point = ec.EllipticCurvePublicKey.from_encoded_point(curve, public_key)
    der = encode_dss_signature(int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big"))
    try:
        point.verify(der, data, ec.ECDSA(digest))
    except InvalidSignature:
        return False
    return True


def verify_signature_suite(vc: dict, key_type: str, public_key: bytes) -> bool:
    """Check an eddsa-rdfc-2022, eddsa-jcs-2022, ecdsa-rdfc-2019 (P-256) or ecdsa-jcs-2019 proof."""
    proof = vc["proof"]
    transformation = "jcs" if proof["cryptosuite"].endswith(("jcs-2022", "jcs-2019")) else "rdfc"
    document = _unsecured(vc)
    if key_type == "P-384":
        assert transformation == "jcs"
        data = _jcs_hash_data_p384(document, proof)
    else:
        data = hash_data(document, proof, transformation)
    signature = b58decode(proof["proofValue"][1:])
    if key_type == "Ed25519":
        try:
            ed25519.Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
        except InvalidSignature:
            return False
        return True
    return _ecdsa_valid(key_type, public_key, signature, data)


def _created() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sign_signature_suite(credential: dict, suite: str, private_key, verification_method: str) -> dict:
    proof = {
        "type": "DataIntegrityProof",
        "cryptosuite": suite,
        "created": _created(),
        "verificationMethod": verification_method,
        "proofPurpose": "assertionMethod",
    }
    transformation = "jcs" if suite.endswith(("jcs-2022", "jcs-2019")) else "rdfc"
    if isinstance(private_key, ec.EllipticCurvePrivateKey) and private_key.curve.key_size == 384:
        data = _jcs_hash_data_p384(credential, proof)
    else:
        data = hash_data(credential, proof, transformation)
    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        signature = private_key.sign(data)
    else:
        signature = _raw_ecdsa(private_key, data)
    return {**copy.deepcopy(credential), "proof": {**proof, "proofValue": "z" + b58encode(signature)}}


# --- selective disclosure statements (no mandatory pointers: every statement is selective) ------

_LABEL = re.compile(r"_:(c14n[0-9]+)")


def relabelled_statements(document: dict, label_for) -> list[str]:
    """The canonical N-Quads with every `c14n<i>` label replaced by `label_for(...)`, sorted."""
    quads = rdfc(document).splitlines(keepends=True)
    labels = sorted(set(_LABEL.findall("".join(quads))))
    mapping = label_for(labels)
    return sorted(_LABEL.sub(lambda match: "_:" + mapping[match.group(1)], quad) for quad in quads)


def hmac_labels(hmac_key: bytes):
    def label_for(labels: list[str]) -> dict[str, str]:
        return {label: "u" + b64url(hmac.new(hmac_key, label.encode(), hashlib.sha256).digest()) for label in labels}

    return label_for


def shuffled_labels(hmac_key: bytes):
    def label_for(labels: list[str]) -> dict[str, str]:
        digests = hmac_labels(hmac_key)(labels)
        order = sorted(digests.values())
        return {label: f"b{order.index(digest)}" for label, digest in digests.items()}

    return label_for


def _decode_sd_proof_value(value: str, header: bytes) -> list:
    raw = b64url_decode(value[1:])
    assert value[0] == "u" and raw[:3] == header, raw[:3].hex()
    return cbor2.loads(raw[3:])


def verify_ecdsa_sd_derived(vc: dict, public_key: bytes) -> bool:
    """vc-di-ecdsa 3.4: a derived proof checked from its parts (issuer key: P-256 compressed)."""
    proof = vc["proof"]
    base_signature, scoped_key, signatures, compressed, mandatory_indexes = _decode_sd_proof_value(
        proof["proofValue"], b"\xd9\x5d\x01"
    )
    document = _unsecured(vc)
    label_map = {f"c14n{index}": "u" + b64url(digest) for index, digest in compressed.items()}
    statements = relabelled_statements(document, lambda labels: {label: label_map[label] for label in labels})
    mandatory = [quad for index, quad in enumerate(statements) if index in mandatory_indexes]
    selective = [quad for index, quad in enumerate(statements) if index not in mandatory_indexes]
    proof_hash = hashlib.sha256(rdfc(_proof_config(document, proof)).encode()).digest()
    mandatory_hash = hashlib.sha256("".join(mandatory).encode()).digest()
    if not _ecdsa_valid("P-256", public_key, base_signature, proof_hash + scoped_key + mandatory_hash):
        return False
    if len(signatures) != len(selective):
        return False
    return all(
        _ecdsa_valid("P-256", scoped_key[2:], signature, quad.encode())
        for signature, quad in zip(signatures, selective, strict=True)
    )


def ecdsa_sd_base_proof(credential: dict, private_key: ec.EllipticCurvePrivateKey, verification_method: str) -> dict:
    """An ecdsa-sd-2023 base proof with no mandatory pointers."""
    proof = {
        "type": "DataIntegrityProof",
        "cryptosuite": "ecdsa-sd-2023",
        "created": _created(),
        "verificationMethod": verification_method,
        "proofPurpose": "assertionMethod",
    }
    hmac_key = secrets.token_bytes(32)
    statements = relabelled_statements(credential, hmac_labels(hmac_key))
    scoped = ec.generate_private_key(ec.SECP256R1())
    scoped_key = b"\x80\x24" + scoped.public_key().public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    proof_hash = hashlib.sha256(rdfc(_proof_config(credential, proof)).encode()).digest()
    base_signature = _raw_ecdsa(private_key, proof_hash + scoped_key + hashlib.sha256(b"").digest())
    signatures = [_raw_ecdsa(scoped, quad.encode()) for quad in statements]
    value = b"\xd9\x5d\x00" + cbor2.dumps([base_signature, scoped_key, hmac_key, signatures, []])
    return {**copy.deepcopy(credential), "proof": {**proof, "proofValue": "u" + b64url(value)}}


# --- BBS (draft-irtf-cfrg-bbs-signatures, BLS12-381-SHA-256, H2G_HM2S interface) ----------------

R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
CIPHERSUITE_ID = b"BBS_BLS12381G1_XMD:SHA-256_SSWU_RO_"
API_ID = CIPHERSUITE_ID + b"H2G_HM2S_"
BP2 = ark.G2Point()


def expand_message_xmd(msg: bytes, dst: bytes, length: int) -> bytes:
    """RFC 9380 section 5.3.1 with SHA-256."""
    ell = -(-length // 32)
    dst_prime = dst + bytes([len(dst)])
    b0 = hashlib.sha256(b"\0" * 64 + msg + length.to_bytes(2, "big") + b"\0" + dst_prime).digest()
    blocks = [hashlib.sha256(b0 + b"\x01" + dst_prime).digest()]
    for index in range(2, ell + 1):
        mixed = bytes(x ^ y for x, y in zip(b0, blocks[-1], strict=True))
        blocks.append(hashlib.sha256(mixed + bytes([index]) + dst_prime).digest())
    return b"".join(blocks)[:length]


def hash_to_scalar(msg: bytes, dst: bytes) -> int:
    return int.from_bytes(expand_message_xmd(msg, dst, 48), "big") % R


def _generators(count: int, seed: bytes, api_id: bytes = API_ID) -> list:
    seed_dst = api_id + b"SIG_GENERATOR_SEED_"
    generator_dst = api_id + b"SIG_GENERATOR_DST_"
    v = expand_message_xmd(seed, seed_dst, 48)
    points = []
    for index in range(1, count + 1):
        v = expand_message_xmd(v + index.to_bytes(8, "big"), seed_dst, 48)
        points.append(ark.G1Point.hash_to_curve(v, generator_dst))
    return points


def base_point_p1():
    return _generators(1, API_ID + b"BP_MESSAGE_GENERATOR_SEED")[0]


def _scalar(value: int):
    return ark.Scalar(value % R)


def _b_point(public_key: bytes, header: bytes, messages: list[bytes]):
    generators = _generators(len(messages) + 1, API_ID + b"MESSAGE_GENERATOR_SEED")
    q1, hs = generators[0], generators[1:]
    dom_octs = len(messages).to_bytes(8, "big") + b"".join(point.to_compressed_bytes() for point in generators)
    dom_input = public_key + dom_octs + API_ID + len(header).to_bytes(8, "big") + header
    domain = hash_to_scalar(dom_input, API_ID + b"H2S_")
    scalars = [hash_to_scalar(message, API_ID + b"MAP_MSG_TO_SCALAR_AS_HASH_") for message in messages]
    b = base_point_p1() + q1 * _scalar(domain)
    for point, scalar in zip(hs, scalars, strict=True):
        b = b + point * _scalar(scalar)
    return b, domain, scalars


def bbs_public_key(secret: int) -> bytes:
    return (BP2 * _scalar(secret)).to_compressed_bytes()


def bbs_sign(secret: int, public_key: bytes, header: bytes, messages: list[bytes]) -> bytes:
    b, domain, scalars = _b_point(public_key, header, messages)
    serialized = b"".join(value.to_bytes(32, "big") for value in [secret, *scalars, domain])
    e = hash_to_scalar(serialized, API_ID + b"H2S_")
    a = b * _scalar(pow(secret + e, -1, R))
    return a.to_compressed_bytes() + e.to_bytes(32, "big")


def bbs_verify(public_key: bytes, signature: bytes, header: bytes, messages: list[bytes]) -> bool:
    a = ark.G1Point.from_compressed_bytes(signature[:48])
    e = int.from_bytes(signature[48:], "big")
    w = ark.G2Point.from_compressed_bytes(public_key)
    b, _, _ = _b_point(public_key, header, messages)
    return ark.GT.pairing(a, w + BP2 * _scalar(e)) == ark.GT.pairing(b, BP2)


def verify_bbs_base(vc: dict, public_key: bytes) -> bool:
    """A bbs-2023 base proof without mandatory pointers, checked from its parts."""
    proof = vc["proof"]
    signature, header, embedded_key, hmac_key, pointers = _decode_sd_proof_value(proof["proofValue"], b"\xd9\x5d\x02")
    assert pointers == [] and embedded_key == public_key
    document = _unsecured(vc)
    proof_hash = hashlib.sha256(rdfc(_proof_config(document, proof)).encode()).digest()
    if header != proof_hash + hashlib.sha256(b"").digest():
        return False
    statements = relabelled_statements(document, shuffled_labels(hmac_key))
    return bbs_verify(public_key, signature, header, [quad.encode() for quad in statements])


def bbs_base_proof(credential: dict, secret: int, verification_method: str) -> dict:
    """A bbs-2023 base proof with no mandatory pointers."""
    public_key = bbs_public_key(secret)
    proof = {
        "type": "DataIntegrityProof",
        "cryptosuite": "bbs-2023",
        "created": _created(),
        "verificationMethod": verification_method,
        "proofPurpose": "assertionMethod",
    }
    hmac_key = secrets.token_bytes(32)
    header = hashlib.sha256(rdfc(_proof_config(credential, proof)).encode()).digest() + hashlib.sha256(b"").digest()
    statements = relabelled_statements(credential, shuffled_labels(hmac_key))
    signature = bbs_sign(secret, public_key, header, [quad.encode() for quad in statements])
    value = b"\xd9\x5d\x02" + cbor2.dumps([signature, header, public_key, hmac_key, []])
    return {**copy.deepcopy(credential), "proof": {**proof, "proofValue": "u" + b64url(value)}}
