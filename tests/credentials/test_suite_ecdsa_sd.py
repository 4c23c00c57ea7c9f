"""ecdsa-sd-2023 against the W3C vc-di-ecdsa test vectors: every intermediate step, then tampering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.credentials.cryptosuites import get_suite
from app.credentials.cryptosuites import sd_primitives as sd
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.cryptosuites.ecdsa_sd_2023 import (
    BaseProofValue,
    DerivedProofValue,
    create_base_proof,
    create_derived_verify_data,
    derive_proof,
    parse_proof_value,
)
from app.credentials.jsonld.loader import make_document_loader
from app.dids.verification_methods import VerificationKey
from app.multiformats import decode_multikey, multibase_decode, multibase_encode
from tests.support.vectors import VECTORS

SUITE_DIR = VECTORS / "ecdsa" / "ecdsa-sd-2023"
SETS = {"employ": "employ", "prc": "prCred"}
SUITE = get_suite("ecdsa-sd-2023")


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _map_entries(value: dict) -> dict[int, str]:
    assert value["dataType"] == "Map"
    return {index: quad for index, quad in value["value"]}


@pytest.fixture(scope="module")
def ctx() -> SuiteContext:
    return SuiteContext(loader=make_document_loader(VECTORS / "contexts"))


def _vector_issuer_key() -> VerificationKey:
    multikey = _json(SUITE_DIR / "SDKeyMaterial.json")["baseKeyPair"]["publicKeyMultibase"]
    key_type, public_key = decode_multikey(multikey)
    return VerificationKey(
        id=f"did:key:{multikey}#{multikey}", controller=f"did:key:{multikey}", key_type=key_type, public_key=public_key
    )


@pytest.fixture(scope="module")
def issuer_key() -> VerificationKey:
    return _vector_issuer_key()


def _secured(name: str, file: str) -> tuple[dict, dict]:
    document = _json(SUITE_DIR / name / file)
    return document, document.pop("proof")


def _pointers(name: str) -> tuple[list[str], list[str]]:
    prefix = VECTORS / "ecdsa" / SETS[name]
    return _json(Path(f"{prefix}Mandatory.json")), _json(Path(f"{prefix}Selective.json"))


def _failure(document: dict, proof: dict, key: VerificationKey, ctx: SuiteContext) -> ProofCheckFailed:
    with pytest.raises(ProofCheckFailed) as caught:
        SUITE.verify_proof(document, proof, key, ctx)
    return caught.value


# --- base proof, step by step ------------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_base_document_canonical_nquads(name, ctx):
    document, _ = _secured(name, "addSignedSDBase.json")
    assert ctx.canonicalize_with_labels(document).nquads == _json(SUITE_DIR / name / "addBaseDocCanon.json")


@pytest.mark.parametrize("name", SETS)
def test_hmac_relabelled_nquads(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    canonical = ctx.canonicalize_with_labels(document)
    nquads, label_map = sd.label_replaced_canonical_nquads(
        canonical.nquads, canonical.label_map, sd.hmac_id_label_map_factory(parsed.hmac_key)
    )
    assert nquads == _json(SUITE_DIR / name / "addBaseDocHMACCanon.json")
    assert all(label.startswith("u") and len(label) == 44 for label in label_map.values())


@pytest.mark.parametrize("name", SETS)
def test_mandatory_grouping(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    expected = _json(SUITE_DIR / name / "addBaseTransform.json")
    assert parsed.mandatory_pointers == expected["mandatoryPointers"]
    grouped = sd.canonicalize_and_group(
        document, sd.hmac_id_label_map_factory(parsed.hmac_key), {"mandatory": parsed.mandatory_pointers}, ctx
    )
    assert grouped.nquads == _json(SUITE_DIR / name / "addBaseDocHMACCanon.json")
    assert grouped.groups["mandatory"].matching == _map_entries(expected["mandatory"])
    assert grouped.groups["mandatory"].non_matching == _map_entries(expected["nonMandatory"])


@pytest.mark.parametrize("name", SETS)
def test_selective_and_combined_groups_and_holder_indexes(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    mandatory, selective = _pointers(name)
    grouped = sd.canonicalize_and_group(
        document,
        sd.hmac_id_label_map_factory(parsed.hmac_key),
        {"mandatory": mandatory, "selective": selective, "combined": mandatory + selective},
        ctx,
    )
    expected = _json(SUITE_DIR / name / "derivedAllGroupData.json")["groups"]
    for group in ("mandatory", "selective", "combined"):
        assert grouped.groups[group].matching == _map_entries(expected[group]["matching"]), group
        assert grouped.groups[group].non_matching == _map_entries(expected[group]["nonMatching"]), group
    indexes = _json(SUITE_DIR / name / "derivedGroupIndexes.json")
    combined = list(grouped.groups["combined"].matching)
    assert combined == indexes["combinedIndexes"]
    assert list(grouped.groups["mandatory"].non_matching) == indexes["nonMandatoryIndexes"]
    adjusted = [combined.index(index) for index in grouped.groups["mandatory"].matching]
    assert adjusted == _json(SUITE_DIR / name / "derivedAdjMandatoryIndexes.json")["adjMandatoryIndexes"]


@pytest.mark.parametrize("name", SETS)
def test_selection_gives_the_reveal_document(name):
    document, _ = _secured(name, "addSignedSDBase.json")
    mandatory, selective = _pointers(name)
    assert sd.select_json_ld(mandatory + selective, document) == _json(SUITE_DIR / name / "derivedUnsignedReveal.json")
    for entry in _json(SUITE_DIR / name / "addPointerValues.json"):
        value = sd.select_json_ld([entry["pointer"]], document)
        # One pointer selects one element of each array on its way, so every array is [element].
        for path in sd.json_pointer_to_paths(entry["pointer"]):
            value = value[0 if isinstance(path, int) else path]
        assert value == entry["value"]


@pytest.mark.parametrize("name", SETS)
def test_proof_configuration_and_hashes(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    config = sd.proof_configuration(proof, document)
    assert config == _json(SUITE_DIR / name / "addProofConfig.json")
    assert ctx.canonicalize(config) == (SUITE_DIR / name / "addProofConfigCanon.txt").read_text().strip() + "\n"
    parsed = parse_proof_value(proof["proofValue"])
    grouped = sd.canonicalize_and_group(
        document, sd.hmac_id_label_map_factory(parsed.hmac_key), {"mandatory": parsed.mandatory_pointers}, ctx
    )
    hashes = _json(SUITE_DIR / name / "addHashData.json")
    assert sd.proof_hash(proof, document, ctx).hex() == hashes["proofHash"]
    assert sd.hash_nquads(grouped.groups["mandatory"].matching.values()).hex() == hashes["mandatoryHash"]


@pytest.mark.parametrize("name", SETS)
def test_base_proof_value_components(name):
    _, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    raw = _json(SUITE_DIR / name / "addRawBaseSignatureInfo.json")
    recovered = _json(SUITE_DIR / name / "derivedRecoveredBaseData.json")
    assert isinstance(parsed, BaseProofValue)
    assert parsed.base_signature.hex() == raw["baseSignature"]
    assert multibase_encode(parsed.public_key, "z") == raw["publicKey"]
    assert [signature.hex() for signature in parsed.signatures] == raw["signatures"]
    assert parsed.hmac_key.hex() == recovered["hmacKey"]


@pytest.mark.parametrize("name", SETS)
def test_base_proof_verifies_as_the_holder_checks_it(name, ctx, issuer_key):
    document, proof = _secured(name, "addSignedSDBase.json")
    SUITE.verify_proof(document, proof, issuer_key, ctx)


# --- derived proof, step by step ---------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_derived_proof_value_components(name):
    _, proof = _secured(name, "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    expected = _json(SUITE_DIR / name / "verifyDerivedProofValue.json")
    assert isinstance(parsed, DerivedProofValue)
    assert parsed.base_signature.hex() == expected["baseSignature"]
    assert multibase_encode(parsed.public_key, "z") == expected["publicKey"]
    assert [signature.hex() for signature in parsed.signatures] == expected["signatures"]
    assert parsed.label_map == dict(expected["labelMap"])
    assert parsed.mandatory_indexes == expected["mandatoryIndexes"]
    adjusted = _json(SUITE_DIR / name / "derivedAdjSignatures.json")
    assert [signature.hex() for signature in parsed.signatures] == adjusted["filteredSignatures"]


@pytest.mark.parametrize("name", SETS)
def test_derived_verify_data(name, ctx):
    document, proof = _secured(name, "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    assert sd.relabelled_canonical_nquads(document, parsed.label_map, ctx) == _json(
        SUITE_DIR / name / "verifyNQuads.json"
    )
    data = create_derived_verify_data(document, proof, parsed, ctx)
    expected = _json(SUITE_DIR / name / "verifyCreateVerifyData.json")
    assert data.proof_hash.hex() == expected["proofHash"]
    assert data.mandatory_hash.hex() == expected["mandatoryHash"]
    assert data.non_mandatory == expected["nonMandatory"]
    assert [signature.hex() for signature in data.signatures] == expected["signatures"]


@pytest.mark.parametrize("name", SETS)
def test_derived_proof_verifies(name, ctx, issuer_key):
    document, proof = _secured(name, "derivedRevealDocument.json")
    SUITE.verify_proof(document, proof, issuer_key, ctx)


# --- tampering ---------------------------------------------------------------------------------

PROOF_FILES = ["addSignedSDBase.json", "derivedRevealDocument.json"]


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_claim_fails_with_invalid_signature(name, file, ctx, issuer_key):
    document, proof = _secured(name, file)
    document["credentialSubject"]["birthCountry"] = "Atlantis"
    assert _failure(document, proof, issuer_key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_mandatory_claim_fails_with_invalid_signature(name, file, ctx, issuer_key):
    document, proof = _secured(name, file)
    document["validUntil"] = "2039-12-03T00:00:00Z"
    document["issuer"]["image"] = "data:image/png;base64,AAAA"
    assert _failure(document, proof, issuer_key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_proof_option_fails_with_invalid_signature(file, ctx, issuer_key):
    document, proof = _secured("employ", file)
    proof["created"] = "2024-01-01T00:00:00Z"
    assert _failure(document, proof, issuer_key, ctx).code == "invalid_signature"


def test_added_statement_fails(ctx, issuer_key):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    document["credentialSubject"]["givenName"] = "JOHN"
    assert _failure(document, proof, issuer_key, ctx).code == "invalid_signature"


def test_removed_statement_fails(ctx, issuer_key):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    del document["credentialSubject"]["birthCountry"]
    assert _failure(document, proof, issuer_key, ctx).code == "invalid_signature"


def _with_byte_changed(proof: dict, offset: int) -> dict:
    data = bytearray(multibase_decode(proof["proofValue"]))
    data[offset] ^= 0x01
    return {**proof, "proofValue": multibase_encode(bytes(data), "u")}


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_signature_byte_fails_with_invalid_signature(name, file, ctx, issuer_key):
    document, proof = _secured(name, file)
    data = multibase_decode(proof["proofValue"])
    parsed = parse_proof_value(proof["proofValue"])
    for signature in (parsed.base_signature, parsed.signatures[0], parsed.signatures[-1]):
        offset = data.index(signature) + 10
        assert _failure(document, _with_byte_changed(proof, offset), issuer_key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_proof_scoped_key_fails(file, ctx, issuer_key):
    document, proof = _secured("employ", file)
    data = multibase_decode(proof["proofValue"])
    offset = data.index(parse_proof_value(proof["proofValue"]).public_key) + 20
    assert _failure(document, _with_byte_changed(proof, offset), issuer_key, ctx).code in {
        "invalid_signature",
        "malformed_proof_value",
    }


def test_changed_hmac_key_fails_with_invalid_signature(ctx, issuer_key):
    document, proof = _secured("employ", "addSignedSDBase.json")
    data = multibase_decode(proof["proofValue"])
    offset = data.index(parse_proof_value(proof["proofValue"]).hmac_key) + 3
    assert _failure(document, _with_byte_changed(proof, offset), issuer_key, ctx).code == "invalid_signature"


def test_changed_label_map_fails_with_invalid_signature(ctx, issuer_key):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    data = multibase_decode(proof["proofValue"])
    label = multibase_decode(parse_proof_value(proof["proofValue"]).label_map["c14n0"])
    assert _failure(document, _with_byte_changed(proof, data.index(label)), issuer_key, ctx).code == (
        "invalid_signature"
    )


@pytest.mark.parametrize("file", PROOF_FILES)
@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4])
def test_changed_header_or_structure_byte_fails_as_malformed(file, offset, ctx, issuer_key):
    document, proof = _secured("employ", file)
    assert _failure(document, _with_byte_changed(proof, offset), issuer_key, ctx).code == "malformed_proof_value"


@pytest.mark.parametrize("file", PROOF_FILES)
@pytest.mark.parametrize("name", SETS)
def test_another_key_fails_with_invalid_signature(file, name, ctx):
    multikey = _json(SUITE_DIR / "SDKeyMaterial.json")["proofKeyPair"]["publicKeyMultibase"]
    _, other = decode_multikey(multikey)
    document, proof = _secured(name, file)
    key = VerificationKey(id="did:key:x#x", controller="did:key:x", key_type="P-256", public_key=other)
    assert _failure(document, proof, key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("public_key", [b"\x02" + b"\xff" * 32, b"\x04" + bytes(64), b"\x02" + bytes(20)])
def test_invalid_key_bytes_are_refused(public_key, ctx):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    key = VerificationKey(id="k", controller="c", key_type="P-256", public_key=public_key)
    assert _failure(document, proof, key, ctx).code == "invalid_public_key"


def test_key_of_another_type_is_refused(ctx):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    key = VerificationKey(id="k", controller="c", key_type="Ed25519", public_key=bytes(32))
    assert _failure(document, proof, key, ctx).code == "unsupported_key_type"


def _encode(components: list, header: bytes = b"\xd9\x5d\x01") -> str:
    import cbor2

    return multibase_encode(header + cbor2.dumps(components), "u")


@pytest.mark.parametrize(
    "proof_value",
    [
        None,
        "",
        "u",
        "z3vQB7B6MrGQZaxCuFg4oh",
        "u2V0B!!!",
        "u2V0BhVhAuNxVr-tkJ6mQ6dYMDTY7ZUMG2ScD5QNiEMopYZ2O0gQZS6PYbjHNvJn07p1fJfDMHB9E9fo5q-yaUM31GbRX4F",
        "u2V0C",
    ],
)
def test_undecodable_proof_values_are_malformed(proof_value, ctx, issuer_key):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    assert _failure(document, {**proof, "proofValue": proof_value}, issuer_key, ctx).code == "malformed_proof_value"


def test_wrong_component_shapes_are_malformed(ctx, issuer_key):
    import cbor2

    document, proof = _secured("employ", "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    good = [
        parsed.base_signature,
        parsed.public_key,
        parsed.signatures,
        {int(k[4:]): multibase_decode(v) for k, v in parsed.label_map.items()},
        parsed.mandatory_indexes,
    ]
    assert parse_proof_value(_encode(good)) == parsed
    variants = [
        good[:4],
        good + [1],
        [parsed.base_signature[:63], *good[1:]],
        [good[0], parsed.public_key[1:], *good[2:]],
        [good[0], b"\x00\x00" + parsed.public_key[2:], *good[2:]],
        [*good[:2], [b"x"], *good[3:]],
        [*good[:3], {"c14n0": bytes(32)}, good[4]],
        [*good[:3], {0: bytes(31)}, good[4]],
        [*good[:3], {0: bytes(32), 1: bytes(32)}, good[4]],
        [*good[:4], [0, 0]],
        [*good[:4], [-1]],
        [*good[:4], ["0"]],
        [*good[:4], [cbor2.CBORTag(2, b"\x01")]],
        {"not": "an array"},
    ]
    for components in variants:
        assert _failure(document, {**proof, "proofValue": _encode(components)}, issuer_key, ctx).code == (
            "malformed_proof_value"
        ), components
    trailing = multibase_encode(multibase_decode(proof["proofValue"]) + b"\x00", "u")
    assert _failure(document, {**proof, "proofValue": trailing}, issuer_key, ctx).code == "malformed_proof_value"


def test_mandatory_index_beyond_the_document_fails(ctx, issuer_key):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    components = [
        parsed.base_signature,
        parsed.public_key,
        parsed.signatures,
        {int(k[4:]): multibase_decode(v) for k, v in parsed.label_map.items()},
        [*parsed.mandatory_indexes, 99],
    ]
    assert _failure(document, {**proof, "proofValue": _encode(components)}, issuer_key, ctx).code == (
        "invalid_signature"
    )


def test_base_proof_pointer_missing_from_document_fails(ctx, issuer_key):
    document, proof = _secured("employ", "addSignedSDBase.json")
    del document["issuer"]
    assert _failure(document, proof, issuer_key, ctx).code == "pointer_not_found"


def test_wrong_proof_type_is_refused(ctx, issuer_key):
    document, proof = _secured("employ", "derivedRevealDocument.json")
    assert _failure(document, {**proof, "cryptosuite": "bbs-2023"}, issuer_key, ctx).code == (
        "invalid_proof_configuration"
    )


# --- shared selective-disclosure primitives ----------------------------------------------------


def test_cbor_decoder_reads_what_cbor2_writes():
    import cbor2

    value = [b"\x00" * 64, b"", "text ü", [0, 23, 24, 255, 256, 65536, 2**32, 2**64 - 1, -1, -500], {0: b"a", 7: [1]}]
    assert sd.decode_cbor(cbor2.dumps(value)) == value


def test_cbor_decoder_reads_indefinite_lengths():
    assert sd.decode_cbor(bytes.fromhex("9f0102ff")) == [1, 2]
    assert sd.decode_cbor(bytes.fromhex("5f41614162ff")) == b"ab"
    assert sd.decode_cbor(bytes.fromhex("bf0041aaff")) == {0: b"\xaa"}


@pytest.mark.parametrize(
    "hex_data",
    [
        "c24101",  # tag 2 (bignum)
        "d818420102",  # tag 24
        "f5",  # true
        "f93c00",  # half float
        "fb3ff0000000000000",  # double
        "0100",  # trailing byte
        "5820aa",  # truncated byte string
        "9f01",  # unterminated indefinite array
        "5f01ff",  # indefinite byte string with an integer chunk
        "1c",  # reserved additional information
        "a2000100 02".replace(" ", ""),  # duplicate map key
        "a1800100",  # array as map key
        "62ff00",  # invalid UTF-8 text
        "81" * 12 + "00",  # nested too deeply
        "",
    ],
)
def test_cbor_decoder_refuses_what_proof_values_must_not_hold(hex_data):
    with pytest.raises(ProofCheckFailed) as caught:
        sd.decode_cbor(bytes.fromhex(hex_data))
    assert caught.value.code == "malformed_proof_value"


def test_relabelling_never_touches_literals_or_iris():
    quad = '_:c14n0 <http://e/_:c14n0> "say \\"_:c14n0\\" _:c14n1"^^<http://e/_:c14n1> _:c14n1 .\n'
    relabelled = sd.relabel_nquads([quad], {"c14n0": "b1", "c14n1": "b0"})
    assert relabelled == ['_:b1 <http://e/_:c14n0> "say \\"_:c14n0\\" _:c14n1"^^<http://e/_:c14n1> _:b0 .\n']
    with pytest.raises(ProofCheckFailed) as caught:
        sd.relabel_nquads(["_:c14n2 <http://e/p> _:c14n0 .\n"], {"c14n0": "b0"})
    assert caught.value.code == "invalid_signature"
    assert sd.relabel_nquads(["_:x <http://e/p> _:c14n0 .\n"], {"c14n0": "b0"}, strict=False) == [
        "_:x <http://e/p> _:b0 .\n"
    ]


def test_json_pointer_paths():
    assert sd.json_pointer_to_paths("/a~1b/~0c/0/12/01/x") == ["a/b", "~c", 0, 12, "01", "x"]
    for pointer in ("", "a/b", "/a~2"):
        with pytest.raises(ProofCheckFailed):
            sd.json_pointer_to_paths(pointer)


def test_selection_keeps_ids_and_types_and_makes_arrays_dense():
    document = {
        "@context": ["https://www.w3.org/ns/credentials/v2"],
        "id": "urn:uuid:1",
        "type": ["VerifiableCredential"],
        "credentialSubject": {
            "id": "_:b0",
            "type": "Person",
            "items": [{"id": "urn:x:0", "v": 0}, {"v": 1, "type": "T"}, {"v": 2}, "literal"],
            "name": "n",
        },
    }
    selection = sd.select_json_ld(["/credentialSubject/items/3", "/credentialSubject/items/1/v"], document)
    assert selection == {
        "@context": ["https://www.w3.org/ns/credentials/v2"],
        "id": "urn:uuid:1",
        "type": ["VerifiableCredential"],
        "credentialSubject": {"type": "Person", "items": [{"type": "T", "v": 1}, "literal"]},
    }
    assert sd.select_json_ld([], document) is None
    whole_then_part = sd.select_json_ld(["/credentialSubject/items", "/credentialSubject/items/3"], document)
    part_then_whole = sd.select_json_ld(["/credentialSubject/items/3", "/credentialSubject/items"], document)
    assert whole_then_part["credentialSubject"]["items"] == document["credentialSubject"]["items"]
    assert part_then_whole["credentialSubject"]["items"] == document["credentialSubject"]["items"]
    for pointer in ("/credentialSubject/missing", "/credentialSubject/items/9", "/credentialSubject/name/x"):
        with pytest.raises(ProofCheckFailed) as caught:
            sd.select_json_ld([pointer], document)
        assert caught.value.code == "pointer_not_found"


def test_label_map_factories():
    key = bytes(range(32))
    canonical = {"x": "c14n0", "y": "c14n1", "z": "c14n2"}
    hmac_labels = sd.hmac_id_label_map_factory(key)(canonical)
    shuffled = sd.shuffled_id_label_map_factory(key)(canonical)
    assert sorted(shuffled.values()) == ["b0", "b1", "b2"]
    ranked = sorted(hmac_labels, key=hmac_labels.get)
    assert [shuffled[label] for label in ranked] == ["b0", "b1", "b2"]


@pytest.mark.parametrize("file", PROOF_FILES)
def test_unlisted_context_and_undefined_term_fail_with_their_reasons(file, ctx, issuer_key):
    document, proof = _secured("employ", file)
    document["@context"] = [*document["@context"], "https://evil.example/context"]
    assert _failure(document, proof, issuer_key, ctx).code == "context_not_allowed"
    document, proof = _secured("employ", file)
    document["undefinedTerm"] = "x"
    assert _failure(document, proof, issuer_key, ctx).code == "undefined_term"


def test_compaction_stops_at_the_work_limit(ctx):
    from app.credentials.jsonld.canon import CanonicalizationLimits

    document, _ = _secured("employ", "addSignedSDBase.json")
    expanded = ctx.expand(document)
    tight = SuiteContext(loader=ctx.loader, limits=CanonicalizationLimits(max_steps=3))
    with pytest.raises(ProofCheckFailed) as caught:
        sd._compact(expanded, document["@context"], tight)
    assert caught.value.code == "canonicalization_limit"
    assert sd._compact(expanded, document["@context"], ctx)["credentialSubject"]["givenName"] == "JOHN"


# --- issuing and deriving (the issuer's and holder's side) -------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_derived_proof_is_reproduced_byte_for_byte(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    derived = derive_proof(document, proof, _pointers(name)[1], ctx)
    assert derived == _json(SUITE_DIR / name / "derivedRevealDocument.json")


def _issuer_private_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    from app.multiformats import decode_multikey_secret

    _, secret = decode_multikey_secret(_json(SUITE_DIR / "SDKeyMaterial.json")["baseKeyPair"]["secretKeyMultibase"])
    return ec.derive_private_key(int.from_bytes(secret, "big"), ec.SECP256R1())


@pytest.mark.parametrize("name", SETS)
def test_fresh_base_proof_on_vector_input_verifies(name, ctx, issuer_key):
    document, proof = _secured(name, "addSignedSDBase.json")
    options = {key: value for key, value in proof.items() if key != "proofValue"}
    hmac_key = parse_proof_value(proof["proofValue"]).hmac_key
    made = create_base_proof(document, options, _pointers(name)[0], _issuer_private_key(), ctx, hmac_key=hmac_key)
    fresh, original = parse_proof_value(made["proofValue"]), parse_proof_value(proof["proofValue"])
    assert (fresh.hmac_key, fresh.mandatory_pointers, len(fresh.signatures)) == (
        original.hmac_key,
        original.mandatory_pointers,
        len(original.signatures),
    )
    SUITE.verify_proof(document, made, issuer_key, ctx)


ROUND_TRIP_CREDENTIAL = {
    "@context": ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"],
    "type": ["VerifiableCredential", "ExampleCredential"],
    "issuer": "did:example:issuer",
    "validFrom": "2026-01-01T00:00:00Z",
    "credentialSubject": {
        "name": 'Zoë "_:c14n0"',
        "scores": [1, 2.5, 3],
        "addresses": [{"city": "Genève", "lines": ["1 rue", "CH-1200"]}, {"city": "Zürich"}],
    },
}


@pytest.mark.parametrize(
    "selective",
    [["/credentialSubject/name"], ["/credentialSubject/addresses/1"], ["/credentialSubject/addresses/0/lines/1"]],
)
def test_issue_check_derive_verify_round_trip(selective, ctx):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private_key = ec.generate_private_key(ec.SECP256R1())
    public_key = private_key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint
    )
    key = VerificationKey(
        id="did:example:issuer#p256", controller="did:example:issuer", key_type="P-256", public_key=public_key
    )
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": "ecdsa-sd-2023",
        "created": "2026-01-01T00:00:00Z",
        "verificationMethod": key.id,
        "proofPurpose": "assertionMethod",
    }
    proof = create_base_proof(ROUND_TRIP_CREDENTIAL, options, ["/issuer", "/validFrom"], private_key, ctx)
    SUITE.verify_proof(ROUND_TRIP_CREDENTIAL, proof, key, ctx)
    derived = derive_proof(ROUND_TRIP_CREDENTIAL, proof, selective, ctx)
    derived_proof = derived.pop("proof")
    SUITE.verify_proof(derived, derived_proof, key, ctx)
    tampered = json.loads(json.dumps(derived))
    tampered["validFrom"] = "2025-01-01T00:00:00Z"
    assert _failure(tampered, derived_proof, key, ctx).code == "invalid_signature"
    assert _failure(derived, derived_proof, _vector_issuer_key(), ctx).code == "invalid_signature"
