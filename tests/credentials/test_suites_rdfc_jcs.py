"""Official W3C vectors for eddsa-rdfc-2022, ecdsa-rdfc-2019 (P-256, P-384), eddsa-jcs-2022 and
ecdsa-jcs-2019: canonical forms, intermediate hashes, signatures, and one-change tampering."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.credentials.cryptosuites import get_suite, require_suite
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.cryptosuites.data_integrity import jcs
from app.credentials.jsonld.loader import make_document_loader
from app.dids.verification_methods import VerificationKey
from app.multiformats import (
    base58btc_decode,
    decode_multikey,
    decode_multikey_secret,
    multibase_encode,
)
from tests.support.vectors import VECTORS

CONTEXTS = VECTORS / "contexts"

# (folder, file-name suffix, key pair file, RDFC/JCS)
VECTOR_SETS = [
    ("eddsa/eddsa-rdfc-2022", "DataInt", "eddsa/keyPair.json"),
    ("eddsa/eddsa-rdfc-2022/employ", "DataInt", "eddsa/keyPair.json"),
    ("eddsa/eddsa-jcs-2022", "JCS", "eddsa/keyPair.json"),
    ("ecdsa/ecdsa-rdfc-2019-p256", "ECDSAP256", "ecdsa/p256KeyPair.json"),
    ("ecdsa/ecdsa-rdfc-2019-p256/employ", "ECDSAP256", "ecdsa/p256KeyPair.json"),
    ("ecdsa/ecdsa-rdfc-2019-p384", "ECDSAP384", "ecdsa/p384KeyPair.json"),
    ("ecdsa/ecdsa-rdfc-2019-p384/employ", "ECDSAP384", "ecdsa/p384KeyPair.json"),
    ("ecdsa/ecdsa-jcs-2019-p256", "JCSECDSAP256", "ecdsa/p256KeyPair.json"),
    ("ecdsa/ecdsa-jcs-2019-p384", "JCSECDSAP384", "ecdsa/p384KeyPair.json"),
]
IDS = [folder.split("/", 1)[1] for folder, _, _ in VECTOR_SETS]


@pytest.fixture(scope="module")
def ctx() -> SuiteContext:
    return SuiteContext(loader=make_document_loader(CONTEXTS))


class VectorSet:
    def __init__(self, folder: str, suffix: str, key_file: str) -> None:
        self.folder = VECTORS / folder
        self.suffix = suffix
        signed = self.json("signed")
        self.proof = signed.pop("proof")
        self.document = signed
        self.suite = require_suite(self.proof["cryptosuite"])
        pair = json.loads((VECTORS / key_file).read_text())
        key_type, public_key = decode_multikey(pair["publicKeyMultibase"])
        self.key = VerificationKey(
            id=self.proof["verificationMethod"],
            controller=self.proof["verificationMethod"].split("#")[0],
            key_type=key_type,
            public_key=public_key,
        )
        secret = pair.get("secretKeyMultibase") or pair["privateKeyMultibase"]
        self.private_key = decode_multikey_secret(secret)[1]
        self.hash_name = "sha384" if key_type == "P-384" else "sha256"

    def text(self, stem: str) -> str:
        return (self.folder / f"{stem}{self.suffix}.txt").read_text()

    def json(self, stem: str) -> dict:
        return json.loads((self.folder / f"{stem}{self.suffix}.json").read_text())

    @property
    def is_rdfc(self) -> bool:
        return "rdfc" in self.proof["cryptosuite"]


@pytest.fixture(params=VECTOR_SETS, ids=IDS)
def vectors(request: pytest.FixtureRequest) -> VectorSet:
    return VectorSet(*request.param)


def test_every_suite_is_registered() -> None:
    for name in ("eddsa-rdfc-2022", "ecdsa-rdfc-2019", "eddsa-jcs-2022", "ecdsa-jcs-2019"):
        assert get_suite(name) is not None and get_suite(name).name == name
    assert get_suite("rsa-2018") is None


def test_vector_verifies(vectors: VectorSet, ctx: SuiteContext) -> None:
    vectors.suite.verify_proof(vectors.document, vectors.proof, vectors.key, ctx)


def test_canonical_forms_match(vectors: VectorSet, ctx: SuiteContext) -> None:
    proof_config = vectors.json("proofConfig")
    if vectors.is_rdfc:
        document_canon = ctx.canonicalize(vectors.document, hash_name=vectors.hash_name)
        config_canon = ctx.canonicalize(proof_config, hash_name=vectors.hash_name)
    else:
        document_canon = jcs(vectors.document).decode()
        config_canon = jcs(proof_config).decode()
    assert document_canon == vectors.text("canonDoc")
    assert config_canon.strip() == vectors.text("proofCanon").strip()


def test_intermediate_hashes_and_signature_match(vectors: VectorSet, ctx: SuiteContext) -> None:
    options = {name: value for name, value in vectors.proof.items() if name != "proofValue"}
    data = vectors.suite.hash_data(vectors.document, options, vectors.key.key_type, ctx)
    half = hashlib.new(vectors.hash_name).digest_size
    assert data[:half].hex() == vectors.text("proofHash").strip()
    assert data[half:].hex() == vectors.text("docHash").strip()
    assert data.hex() == vectors.text("combinedHash").strip()
    signature = base58btc_decode(vectors.proof["proofValue"][1:])
    assert signature.hex() == vectors.text("sigHex").strip()
    assert vectors.proof["proofValue"] == vectors.text("sigBTC58").strip()


def test_sign_reproduces_or_round_trips(vectors: VectorSet, ctx: SuiteContext) -> None:
    signed = vectors.suite.sign(
        vectors.document,
        private_key=vectors.private_key,
        verification_method=vectors.proof["verificationMethod"],
        created=vectors.proof["created"],
        ctx=ctx,
    )
    # Every member but the signature as the official vector has it: the JCS suites' Create Proof
    # puts the document's @context in the proof, RDFC's does not (vc-di-ecdsa suite,
    # "If unsecuredDocument.@context is present, set proof.@context to unsecuredDocument.@context.").
    without_value = {name: value for name, value in signed["proof"].items() if name != "proofValue"}
    assert without_value == {name: value for name, value in vectors.proof.items() if name != "proofValue"}
    if vectors.key.key_type == "Ed25519":  # Ed25519 is deterministic, ECDSA is not
        assert signed["proof"] == vectors.proof
    document = {name: value for name, value in signed.items() if name != "proof"}
    assert document == vectors.document
    vectors.suite.verify_proof(document, signed["proof"], vectors.key, ctx)


def _expect(code: str, vectors: VectorSet, ctx: SuiteContext, document: dict, proof: dict, key=None) -> None:
    with pytest.raises(ProofCheckFailed) as failure:
        vectors.suite.verify_proof(document, proof, key or vectors.key, ctx)
    assert failure.value.code == code, failure.value.detail


def test_changed_claim_fails(vectors: VectorSet, ctx: SuiteContext) -> None:
    document = copy.deepcopy(vectors.document)
    subject = document["credentialSubject"]
    claim = next(name for name in sorted(subject) if name != "id" and isinstance(subject[name], str))
    subject[claim] += "."
    _expect("invalid_signature", vectors, ctx, document, vectors.proof)


def test_changed_issuer_fails(vectors: VectorSet, ctx: SuiteContext) -> None:
    document = dict(vectors.document, issuer="https://vc.example/issuers/0000")
    _expect("invalid_signature", vectors, ctx, document, vectors.proof)


@pytest.mark.parametrize("position", [0, 31, -1])
def test_changed_proof_byte_fails(vectors: VectorSet, ctx: SuiteContext, position: int) -> None:
    signature = bytearray(base58btc_decode(vectors.proof["proofValue"][1:]))
    signature[position] ^= 0x01
    proof = dict(vectors.proof, proofValue=multibase_encode(bytes(signature), "z"))
    _expect("invalid_signature", vectors, ctx, vectors.document, proof)


def test_changed_proof_option_fails(vectors: VectorSet, ctx: SuiteContext) -> None:
    proof = dict(vectors.proof, created="2023-02-24T23:36:39Z")
    _expect("invalid_signature", vectors, ctx, vectors.document, proof)


def test_other_key_fails(vectors: VectorSet, ctx: SuiteContext) -> None:
    if vectors.key.key_type == "Ed25519":
        pair = json.loads((VECTORS / "eddsa/proof-set-chain/multiKeyPairs.json").read_text())["keyPair1"]
        public_key = decode_multikey(pair["publicKeyMultibase"])[1]
    else:
        curve = ec.SECP256R1() if vectors.key.key_type == "P-256" else ec.SECP384R1()
        public_key = (
            ec.generate_private_key(curve)
            .public_key()
            .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
        )
    key = VerificationKey(vectors.key.id, vectors.key.controller, vectors.key.key_type, public_key)
    _expect("invalid_signature", vectors, ctx, vectors.document, vectors.proof, key)


@pytest.mark.parametrize("vector_set", [entry for entry in VECTOR_SETS if "ecdsa" in entry[0]])
def test_invalid_curve_point_fails(vector_set: tuple[str, str, str], ctx: SuiteContext) -> None:
    vectors = VectorSet(*vector_set)
    key = VerificationKey(
        vectors.key.id, vectors.key.controller, vectors.key.key_type, b"\x05" + vectors.key.public_key[1:]
    )
    _expect("invalid_public_key", vectors, ctx, vectors.document, vectors.proof, key)


def test_key_of_wrong_type_fails(vectors: VectorSet, ctx: SuiteContext) -> None:
    wrong = "P-256" if vectors.key.key_type == "Ed25519" else "Ed25519"
    length = 33 if wrong == "P-256" else 32
    key = VerificationKey(vectors.key.id, vectors.key.controller, wrong, b"\x02" * length)
    _expect("unsupported_key_type", vectors, ctx, vectors.document, vectors.proof, key)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda value: value[:-2],  # too short
        lambda value: value + "2",  # too long
        lambda value: "u" + value[1:],  # wrong multibase for the suite
        lambda value: value.replace(value[5], "0", 1),  # "0" is not base58
        lambda value: value[1:],  # no multibase prefix
        lambda value: "",
        lambda value: 12345,
    ],
    ids=["short", "long", "base64url", "bad-char", "no-prefix", "empty", "number"],
)
def test_malformed_proof_value_fails(vectors: VectorSet, ctx: SuiteContext, mangle) -> None:
    proof = dict(vectors.proof, proofValue=mangle(vectors.proof["proofValue"]))
    _expect("malformed_proof_value", vectors, ctx, vectors.document, proof)


def test_proof_configuration_is_checked(vectors: VectorSet, ctx: SuiteContext) -> None:
    other_suite = "ecdsa-rdfc-2019" if vectors.suite.name != "ecdsa-rdfc-2019" else "eddsa-rdfc-2022"
    for change in (
        {"type": "Ed25519Signature2020"},
        {"cryptosuite": other_suite},
        {"created": "24 Feb 2023"},
        {"@context": ["https://www.w3.org/ns/credentials/examples/v2"]},
    ):
        _expect("invalid_proof_configuration", vectors, ctx, vectors.document, {**vectors.proof, **change})


def test_matching_proof_context_is_accepted(vectors: VectorSet, ctx: SuiteContext) -> None:
    proof = dict(vectors.proof, **{"@context": vectors.document["@context"]})
    vectors.suite.verify_proof(vectors.document, proof, vectors.key, ctx)


def test_p384_rdfc_needs_the_sha384_variant(ctx: SuiteContext) -> None:
    vectors = VectorSet("ecdsa/ecdsa-rdfc-2019-p384/employ", "ECDSAP384", "ecdsa/p384KeyPair.json")
    expected = vectors.text("canonDoc")
    assert ctx.canonicalize(vectors.document, hash_name="sha384") == expected
    assert ctx.canonicalize(vectors.document, hash_name="sha256") != expected


def test_sign_adds_to_an_existing_proof(ctx: SuiteContext) -> None:
    vectors = VectorSet("eddsa/eddsa-rdfc-2022", "DataInt", "eddsa/keyPair.json")
    signed = vectors.suite.sign(
        {**vectors.document, "proof": vectors.proof},
        private_key=vectors.private_key,
        verification_method=vectors.proof["verificationMethod"],
        ctx=ctx,
    )
    assert isinstance(signed["proof"], list) and signed["proof"][0] == vectors.proof
    vectors.suite.verify_proof(vectors.document, signed["proof"][1], vectors.key, ctx)


def test_signing_rejects_a_key_of_the_wrong_kind(ctx: SuiteContext) -> None:
    eddsa = require_suite("eddsa-jcs-2022")
    ecdsa = require_suite("ecdsa-jcs-2019")
    with pytest.raises(ValueError):
        eddsa.sign({"a": 1}, private_key=b"\x01" * 48, verification_method="did:key:z#z", ctx=ctx)
    with pytest.raises(ValueError):
        ecdsa.sign({"a": 1}, private_key=b"\x01" * 20, verification_method="did:key:z#z", ctx=ctx)
