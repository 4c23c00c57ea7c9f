"""bbs-2023 against the W3C vc-di-bbs test vectors: every intermediate step, both curve backends,
then tampering."""

from __future__ import annotations

import json
from pathlib import Path

import cbor2
import pytest

from app.credentials import bbs
from app.credentials.cryptosuites import get_suite
from app.credentials.cryptosuites import sd_primitives as sd
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.cryptosuites.bbs_2023 import (
    MAX_BBS_MESSAGES,
    PRESENTATION_HEADER_OPTION,
    BaseProofValue,
    Bbs2023,
    DerivedProofValue,
    create_base_proof,
    create_derived_verify_data,
    derive_proof,
    parse_proof_value,
)
from app.credentials.jsonld.loader import make_document_loader
from app.dids.verification_methods import VerificationKey
from app.multiformats import multibase_decode, multibase_encode
from tests.support.vectors import VECTORS

SUITE_DIR = VECTORS / "bbs-2023"
# set name -> (directory, mandatory pointers file, selective pointers file)
SETS = {
    "windsurf": (SUITE_DIR, "windMandatory.json", "windSelective.json"),
    "prc": (SUITE_DIR / "prc", "prCredMandatory.json", "prCredSelective.json"),
}
BACKENDS = ["pyblst", "arkworks"]


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _map_entries(value: dict) -> dict[int, str]:
    assert value["dataType"] == "Map"
    return {index: quad for index, quad in value["value"]}


def _dir(name: str) -> Path:
    return SETS[name][0]


def _pointers(name: str) -> tuple[list[str], list[str]]:
    _, mandatory, selective = SETS[name]
    return _json(SUITE_DIR / mandatory), _json(SUITE_DIR / selective)


def _secured(name: str, file: str) -> tuple[dict, dict]:
    document = _json(_dir(name) / file)
    return document, document.pop("proof")


@pytest.fixture(scope="module")
def ctx() -> SuiteContext:
    return SuiteContext(loader=make_document_loader(VECTORS / "contexts"))


@pytest.fixture(scope="module")
def issuer_key() -> VerificationKey:
    public_key = bytes.fromhex(_json(SUITE_DIR / "BBSKeyMaterial.json")["publicKeyHex"])
    multikey = multibase_encode(b"\xeb\x01" + public_key, "z")
    return VerificationKey(
        id=f"did:key:{multikey}#{multikey}",
        controller=f"did:key:{multikey}",
        key_type="Bls12381G2",
        public_key=public_key,
    )


@pytest.fixture(scope="module", params=BACKENDS)
def suite(request) -> Bbs2023:
    return Bbs2023(backend=bbs.get_backend(request.param))


def _failure(suite, document: dict, proof: dict, key: VerificationKey, ctx: SuiteContext) -> ProofCheckFailed:
    with pytest.raises(ProofCheckFailed) as caught:
        suite.verify_proof(document, proof, key, ctx)
    return caught.value


def test_registered_suite_is_bbs_2023():
    assert isinstance(get_suite("bbs-2023"), Bbs2023)


# --- base proof, step by step ------------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_base_document_canonical_nquads(name, ctx):
    document, _ = _secured(name, "addSignedSDBase.json")
    assert ctx.canonicalize_with_labels(document).nquads == _json(_dir(name) / "addBaseDocCanon.json")


@pytest.mark.parametrize("name", SETS)
def test_shuffled_hmac_relabelled_nquads(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    canonical = ctx.canonicalize_with_labels(document)
    nquads, label_map = sd.label_replaced_canonical_nquads(
        canonical.nquads, canonical.label_map, sd.shuffled_id_label_map_factory(parsed.hmac_key)
    )
    assert nquads == _json(_dir(name) / "addBaseDocHMACCanon.json")
    assert sorted(label_map.values()) == sorted(f"b{i}" for i in range(len(label_map)))


@pytest.mark.parametrize("name", SETS)
def test_mandatory_grouping(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    expected = _json(_dir(name) / "addBaseTransform.json")
    assert parsed.mandatory_pointers == expected["mandatoryPointers"] == _pointers(name)[0]
    grouped = sd.canonicalize_and_group(
        document, sd.shuffled_id_label_map_factory(parsed.hmac_key), {"mandatory": parsed.mandatory_pointers}, ctx
    )
    assert grouped.groups["mandatory"].matching == _map_entries(expected["mandatory"])
    assert grouped.groups["mandatory"].non_matching == _map_entries(expected["nonMandatory"])


@pytest.mark.parametrize("name", SETS)
def test_holder_groups_and_adjusted_indexes(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    mandatory, selective = _pointers(name)
    grouped = sd.canonicalize_and_group(
        document,
        sd.shuffled_id_label_map_factory(parsed.hmac_key),
        {"mandatory": mandatory, "selective": selective, "combined": mandatory + selective},
        ctx,
    )
    groups = grouped.groups
    if (_dir(name) / "derivedAllGroupData.json").exists():
        expected = _json(_dir(name) / "derivedAllGroupData.json")["groups"]
        for group in ("mandatory", "selective", "combined"):
            assert groups[group].matching == _map_entries(expected[group]["matching"]), group
            assert groups[group].non_matching == _map_entries(expected[group]["nonMatching"]), group
    indexes = _json(_dir(name) / "derivedGroupIndexes.json")
    combined = list(groups["combined"].matching)
    non_mandatory = list(groups["mandatory"].non_matching)
    assert combined == indexes["combinedIndexes"]
    assert list(groups["mandatory"].matching) == indexes["mandatoryIndexes"]
    assert non_mandatory == indexes["nonMandatoryIndexes"]
    assert list(groups["selective"].matching) == indexes["selectiveIndexes"]
    adjusted = _json(_dir(name) / "derivedAdjIndexes.json")
    assert [combined.index(i) for i in groups["mandatory"].matching] == adjusted["adjMandatoryIndexes"]
    assert [non_mandatory.index(i) for i in groups["selective"].matching if i in non_mandatory] == adjusted[
        "adjSelectiveIndexes"
    ]


@pytest.mark.parametrize("name", SETS)
def test_selection_gives_the_reveal_document(name):
    document, _ = _secured(name, "addSignedSDBase.json")
    mandatory, selective = _pointers(name)
    assert sd.select_json_ld(mandatory + selective, document) == _json(_dir(name) / "derivedUnsignedReveal.json")
    # The windsurf pointer values are written relative to the credential subject.
    prefix = "/credentialSubject" if name == "windsurf" else ""
    for entry in _json(_dir(name) / "addPointerValues.json"):
        pointer = prefix + entry["pointer"]
        value = sd.select_json_ld([pointer], document)
        # One pointer selects one element of each array on its way, so every array is [element].
        for path in sd.json_pointer_to_paths(pointer):
            value = value[0 if isinstance(path, int) else path]
        assert value == entry["value"]


@pytest.mark.parametrize("name", SETS)
def test_proof_configuration_hashes_and_base_components(name, ctx, issuer_key):
    document, proof = _secured(name, "addSignedSDBase.json")
    config = sd.proof_configuration(proof, document)
    assert config == _json(_dir(name) / "addProofConfig.json")
    assert ctx.canonicalize(config) == (_dir(name) / "addProofConfigCanon.txt").read_text().strip() + "\n"
    parsed = parse_proof_value(proof["proofValue"])
    assert isinstance(parsed, BaseProofValue)
    hashes = _json(_dir(name) / "addHashData.json")
    assert sd.proof_hash(proof, document, ctx).hex() == hashes["proofHash"]
    grouped = sd.canonicalize_and_group(
        document, sd.shuffled_id_label_map_factory(parsed.hmac_key), {"mandatory": parsed.mandatory_pointers}, ctx
    )
    assert sd.hash_nquads(grouped.groups["mandatory"].matching.values()).hex() == hashes["mandatoryHash"]
    assert parsed.bbs_header.hex() == hashes["proofHash"] + hashes["mandatoryHash"]
    raw = _json(_dir(name) / "addRawBaseSignatureInfo.json")
    recovered = _json(_dir(name) / "derivedRecoveredBaseData.json")
    assert parsed.bbs_signature.hex() == raw["bbsSignature"] == recovered["bbsSignature"]
    assert parsed.mandatory_pointers == raw["mandatoryPointers"]
    assert parsed.hmac_key.hex() == recovered["hmacKey"]
    assert parsed.public_key == issuer_key.public_key


@pytest.mark.parametrize("name", SETS)
def test_base_signature_verifies_over_header_and_non_mandatory_messages(name, ctx, issuer_key):
    document, proof = _secured(name, "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    messages = [
        quad.encode() for quad in _map_entries(_json(_dir(name) / "addBaseTransform.json")["nonMandatory"]).values()
    ]
    for backend in BACKENDS:
        assert bbs.verify(
            issuer_key.public_key, parsed.bbs_signature, parsed.bbs_header, messages, backend=bbs.get_backend(backend)
        )


@pytest.mark.parametrize("name", SETS)
def test_base_proof_verifies_as_the_holder_checks_it(name, suite, ctx, issuer_key):
    document, proof = _secured(name, "addSignedSDBase.json")
    suite.verify_proof(document, proof, issuer_key, ctx)


# --- derived proof, step by step ---------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_derived_proof_value_components(name):
    _, proof = _secured(name, "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    assert isinstance(parsed, DerivedProofValue)
    disclosure = _json(_dir(name) / "derivedDisclosureData.json")
    assert parsed.bbs_proof.hex() == disclosure["bbsProof"]
    assert parsed.label_map == dict(disclosure["labelMap"]["value"])
    assert parsed.mandatory_indexes == disclosure["mandatoryIndexes"]
    assert parsed.selective_indexes == disclosure["adjSelectiveIndexes"]
    header = disclosure["presentationHeader"]
    assert parsed.presentation_header == bytes(header[str(i)] for i in range(len(header)))
    assert parsed.presentation_header.hex() == _json(SUITE_DIR / "BBSDeriveMaterial.json")["presentationHeaderHex"]


def test_prc_derived_verify_data_matches_vectors(ctx):
    document, proof = _secured("prc", "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    relabelled = sd.relabelled_canonical_nquads(document, parsed.label_map, ctx)
    assert relabelled == _json(_dir("prc") / "verifyNQuads.json")
    expected = _json(_dir("prc") / "verifyDerivedProofValue.json")
    assert parsed.bbs_proof.hex() == expected["bbsProof"]
    assert parsed.mandatory_indexes == expected["mandatoryIndexes"]
    assert parsed.selective_indexes == expected["adjSelectedIndexes"]
    assert parsed.label_map == dict(expected["labelMap"])
    data = create_derived_verify_data(document, proof, parsed, ctx)
    mandatory = [quad for i, quad in enumerate(relabelled) if i in parsed.mandatory_indexes]
    assert data.non_mandatory == [quad for i, quad in enumerate(relabelled) if i not in parsed.mandatory_indexes]
    assert data.mandatory_hash == sd.hash_nquads(mandatory)
    base_document, base_proof = _secured("prc", "addSignedSDBase.json")
    assert data.proof_hash == sd.proof_hash(base_proof, base_document, ctx)
    assert data.bbs_header == parse_proof_value(base_proof["proofValue"]).bbs_header


def test_windsurf_derived_statements_are_the_selected_base_statements(ctx):
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    data = create_derived_verify_data(document, proof, parsed, ctx)
    base_non_mandatory = list(_map_entries(_json(SUITE_DIR / "addBaseTransform.json")["nonMandatory"]).values())
    assert data.non_mandatory == [base_non_mandatory[i] for i in parsed.selective_indexes]
    assert data.proof_hash.hex() == _json(SUITE_DIR / "addHashData.json")["proofHash"]
    assert data.mandatory_hash.hex() == _json(SUITE_DIR / "addHashData.json")["mandatoryHash"]


@pytest.mark.parametrize("name", SETS)
def test_derived_proof_verifies(name, suite, ctx, issuer_key):
    document, proof = _secured(name, "derivedRevealDocument.json")
    suite.verify_proof(document, proof, issuer_key, ctx)


def test_required_presentation_header(ctx, issuer_key):
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    suite = get_suite("bbs-2023")
    required = SuiteContext(loader=ctx.loader, options={PRESENTATION_HEADER_OPTION: bytes.fromhex("113377aa")})
    suite.verify_proof(document, proof, issuer_key, required)
    other = SuiteContext(loader=ctx.loader, options={PRESENTATION_HEADER_OPTION: b"nonce"})
    assert _failure(suite, document, proof, issuer_key, other).code == "presentation_header_mismatch"


# --- tampering ---------------------------------------------------------------------------------

PROOF_FILES = ["addSignedSDBase.json", "derivedRevealDocument.json"]
CHANGED_CLAIMS = {
    "windsurf": lambda document: document["credentialSubject"]["sails"][0].update(sailName="Kanaha"),
    "prc": lambda document: document["credentialSubject"].update(birthCountry="Atlantis"),
}


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_claim_fails_with_invalid_signature(name, file, suite, ctx, issuer_key):
    document, proof = _secured(name, file)
    CHANGED_CLAIMS[name](document)
    assert _failure(suite, document, proof, issuer_key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_mandatory_claim_fails_with_invalid_signature(file, suite, ctx, issuer_key):
    document, proof = _secured("windsurf", file)
    document["credentialSubject"]["sailNumber"] = "Mars202"
    assert _failure(suite, document, proof, issuer_key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_proof_option_fails_with_invalid_signature(file, ctx, issuer_key):
    document, proof = _secured("windsurf", file)
    proof["created"] = "2024-01-01T00:00:00Z"
    assert _failure(get_suite("bbs-2023"), document, proof, issuer_key, ctx).code == "invalid_signature"


def test_added_and_removed_statements_fail(ctx, issuer_key):
    suite = get_suite("bbs-2023")
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    document["credentialSubject"]["boards"][0]["color"] = "red"
    assert _failure(suite, document, proof, issuer_key, ctx).code == "invalid_signature"
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    del document["credentialSubject"]["sails"][0]
    assert _failure(suite, document, proof, issuer_key, ctx).code == "invalid_signature"


def _with_byte_changed(proof: dict, offset: int) -> dict:
    data = bytearray(multibase_decode(proof["proofValue"]))
    data[offset] ^= 0x01
    return {**proof, "proofValue": multibase_encode(bytes(data), "u")}


def test_changed_base_signature_byte_fails(suite, ctx, issuer_key):
    document, proof = _secured("windsurf", "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    data = multibase_decode(proof["proofValue"])
    # The last byte of the signature is in its scalar part: still well formed, no longer valid.
    changed = _with_byte_changed(proof, data.index(parsed.bbs_signature) + 79)
    assert _failure(suite, document, changed, issuer_key, ctx).code == "invalid_signature"
    # A byte of the G1 point makes it undecodable (or another point): malformed or invalid.
    changed = _with_byte_changed(proof, data.index(parsed.bbs_signature) + 20)
    assert _failure(suite, document, changed, issuer_key, ctx).code in {"malformed_proof_value", "invalid_signature"}


def test_changed_header_hmac_key_or_embedded_key_fails(ctx, issuer_key):
    suite = get_suite("bbs-2023")
    document, proof = _secured("windsurf", "addSignedSDBase.json")
    parsed = parse_proof_value(proof["proofValue"])
    data = multibase_decode(proof["proofValue"])
    for component in (parsed.bbs_header, parsed.hmac_key, parsed.public_key):
        changed = _with_byte_changed(proof, data.index(component) + 5)
        assert _failure(suite, document, changed, issuer_key, ctx).code == "invalid_signature"


def test_changed_derived_proof_bytes_fail(suite, ctx, issuer_key):
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    data = multibase_decode(proof["proofValue"])
    start = data.index(parsed.bbs_proof)
    # Offsets past the three G1 points land in scalars: well formed, wrong.
    for offset in (3 * 48 + 1, len(parsed.bbs_proof) - 1):
        changed = _with_byte_changed(proof, start + offset)
        assert _failure(suite, document, changed, issuer_key, ctx).code == "invalid_signature"
    for offset in (0, 10, 60):
        changed = _with_byte_changed(proof, start + offset)
        assert _failure(suite, document, changed, issuer_key, ctx).code in {
            "malformed_proof_value",
            "invalid_signature",
        }
    ph_offset = data.rindex(parsed.presentation_header)
    assert _failure(suite, document, _with_byte_changed(proof, ph_offset), issuer_key, ctx).code == (
        "invalid_signature"
    )


def _derived_components(parsed: DerivedProofValue) -> list:
    return [
        parsed.bbs_proof,
        {int(k[4:]): int(v[1:]) for k, v in parsed.label_map.items()},
        parsed.mandatory_indexes,
        parsed.selective_indexes,
        parsed.presentation_header,
    ]


def _encode(components, header: bytes = b"\xd9\x5d\x03") -> str:
    return multibase_encode(header + cbor2.dumps(components), "u")


def test_changed_label_map_or_indexes_fail_with_invalid_signature(ctx, issuer_key):
    suite = get_suite("bbs-2023")
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    parsed = parse_proof_value(proof["proofValue"])
    good = _derived_components(parsed)
    assert parse_proof_value(_encode(good)) == parsed
    label_map = dict(good[1])
    label_map[0], label_map[1] = label_map[1], label_map[0]
    selective = list(good[3])
    selective[-1] += 1
    mandatory = sorted({*good[2][1:], 3})
    for components in (
        [good[0], label_map, *good[2:]],
        [*good[:3], selective, good[4]],
        [*good[:2], mandatory, *good[3:]],
        [*good[:3], good[3][:-1], good[4]],
        [*good[:2], [*good[2], 99], *good[3:]],
    ):
        assert _failure(suite, document, {**proof, "proofValue": _encode(components)}, issuer_key, ctx).code == (
            "invalid_signature"
        ), components


def test_malformed_derived_components(ctx, issuer_key):
    suite = get_suite("bbs-2023")
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    good = _derived_components(parse_proof_value(proof["proofValue"]))
    variants = [
        good[:4],
        [*good, b""],
        [good[0][:100], *good[1:]],
        [good[0] + b"\x00" * 32, *good[1:]],
        ["proof", *good[1:]],
        [good[0], {"c14n0": 1}, *good[2:]],
        [good[0], {0: "b1"}, *good[2:]],
        [good[0], {0: 1, 1: 1}, *good[2:]],
        [*good[:2], [0, 0], *good[3:]],
        [*good[:3], [-1], good[4]],
        [*good[:4], "113377aa"],
        [*good[:4], cbor2.CBORTag(24, good[4])],
    ]
    for components in variants:
        assert _failure(suite, document, {**proof, "proofValue": _encode(components)}, issuer_key, ctx).code == (
            "malformed_proof_value"
        ), components


@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("file", PROOF_FILES)
def test_changed_header_or_structure_byte_fails_as_malformed(file, offset, ctx, issuer_key):
    document, proof = _secured("windsurf", file)
    changed = _with_byte_changed(proof, offset)
    assert _failure(get_suite("bbs-2023"), document, changed, issuer_key, ctx).code in {
        "malformed_proof_value",
        "unsupported_feature",
    }


@pytest.mark.parametrize("file", PROOF_FILES)
def test_another_key_fails_with_invalid_signature(file, suite, ctx):
    other = bbs.sk_to_pk(bytes.fromhex("1" * 64))
    key = VerificationKey(id="did:key:x#x", controller="did:key:x", key_type="Bls12381G2", public_key=other)
    document, proof = _secured("windsurf", file)
    assert _failure(suite, document, proof, key, ctx).code == "invalid_signature"


@pytest.mark.parametrize("file", PROOF_FILES)
@pytest.mark.parametrize(
    "public_key",
    [b"\x00" * 96, b"\xc0" + bytes(95), bytes(range(96)), b"\xa4" * 48],
    ids=["not-compressed", "identity", "not-on-curve", "short"],
)
def test_invalid_key_bytes_are_refused(file, public_key, suite, ctx):
    key = VerificationKey(id="k", controller="c", key_type="Bls12381G2", public_key=public_key)
    document, proof = _secured("windsurf", file)
    assert _failure(suite, document, proof, key, ctx).code == "invalid_public_key"


def test_key_of_another_type_is_refused(ctx):
    key = VerificationKey(id="k", controller="c", key_type="P-256", public_key=b"\x02" + bytes(32))
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    assert _failure(get_suite("bbs-2023"), document, proof, key, ctx).code == "unsupported_key_type"


@pytest.mark.parametrize("feature", ["HolderBinding", "Pseudonym", "PseudonymHB"])
@pytest.mark.parametrize("file", PROOF_FILES)
def test_optional_features_are_refused_clearly(feature, file, ctx):
    document = _json(SUITE_DIR / feature / file)
    proof = document.pop("proof")
    public_key = bytes.fromhex(_json(SUITE_DIR / "BBSKeyMaterial.json")["publicKeyHex"])
    key = VerificationKey(id="k", controller="c", key_type="Bls12381G2", public_key=public_key)
    failure = _failure(get_suite("bbs-2023"), document, proof, key, ctx)
    assert failure.code == "unsupported_feature"
    assert "not supported" in failure.detail


@pytest.mark.parametrize("proof_value", [None, 42, "", "u", "zabc", "u2V0", "u2V0D", "u2V0DhQ", "u2V0Dh@@"])
def test_undecodable_proof_values_are_malformed(proof_value, ctx, issuer_key):
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    changed = {**proof, "proofValue": proof_value}
    assert _failure(get_suite("bbs-2023"), document, changed, issuer_key, ctx).code == "malformed_proof_value"


def test_derived_proof_over_too_many_messages_is_refused_before_curve_work(ctx, issuer_key):
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    good = _derived_components(parse_proof_value(proof["proofValue"]))
    assert len(good[0]) == 272 + 32 * (14 - len(good[3]))
    padded = [good[0] + bytes(32 * MAX_BBS_MESSAGES), *good[1:]]
    changed = {**proof, "proofValue": _encode(padded)}
    assert _failure(get_suite("bbs-2023"), document, changed, issuer_key, ctx).code == "proof_too_large"


def test_base_proof_over_too_many_statements_is_refused(ctx, issuer_key, monkeypatch):
    # The windsurf base signature covers 14 statements; lowering the bound keeps the test fast.
    monkeypatch.setattr("app.credentials.cryptosuites.bbs_2023.MAX_BBS_MESSAGES", 13)
    document, proof = _secured("windsurf", "addSignedSDBase.json")
    assert _failure(get_suite("bbs-2023"), document, proof, issuer_key, ctx).code == "proof_too_large"


# --- issuing and deriving (the issuer's and holder's side, checked against the vectors) --------


def _secret_key() -> bytes:
    return bytes.fromhex(_json(SUITE_DIR / "BBSKeyMaterial.json")["privateKeyHex"])


def _hmac_key() -> bytes:
    return bytes.fromhex(_json(SUITE_DIR / "BBSKeyMaterial.json")["hmacKeyString"])


def _presentation_header() -> bytes:
    return bytes.fromhex(_json(SUITE_DIR / "BBSDeriveMaterial.json")["presentationHeaderHex"])


@pytest.mark.parametrize("name", SETS)
def test_base_proof_is_reproduced_byte_for_byte(name, ctx):
    document, proof = _secured(name, "addSignedSDBase.json")
    options = {key: value for key, value in proof.items() if key != "proofValue"}
    made = create_base_proof(document, options, _pointers(name)[0], _secret_key(), ctx, hmac_key=_hmac_key())
    assert made == proof


@pytest.mark.parametrize("name", SETS)
def test_derived_proof_matches_the_vector_but_for_bbs_randomness(name, suite, ctx, issuer_key):
    document, proof = _secured(name, "addSignedSDBase.json")
    derived = derive_proof(
        document, proof, _pointers(name)[1], ctx, presentation_header=_presentation_header(), backend=suite.backend
    )
    expected = _json(_dir(name) / "derivedRevealDocument.json")
    assert {k: v for k, v in derived.items() if k != "proof"} == {k: v for k, v in expected.items() if k != "proof"}
    ours = parse_proof_value(derived["proof"]["proofValue"])
    theirs = parse_proof_value(expected["proof"]["proofValue"])
    assert (ours.label_map, ours.mandatory_indexes, ours.selective_indexes, ours.presentation_header) == (
        theirs.label_map,
        theirs.mandatory_indexes,
        theirs.selective_indexes,
        theirs.presentation_header,
    )
    assert len(ours.bbs_proof) == len(theirs.bbs_proof)
    reveal = dict(derived)
    suite.verify_proof(reveal, reveal.pop("proof"), issuer_key, ctx)


TRICKY_CREDENTIAL = {
    "@context": ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"],
    "id": "urn:uuid:5b3a9c1e-0000-4000-8000-000000000001",
    "type": ["VerifiableCredential", "ExampleCredential"],
    "issuer": "did:example:issuer",
    "validFrom": "2026-01-01T00:00:00Z",
    "credentialSubject": {
        "id": "did:example:subject",
        "name": 'Zoë "_:c14n0" <not an IRI>',
        "age": 42,
        "height": 1.85,
        "member": True,
        "addresses": [
            {"type": "PostalAddress", "city": "Genève", "lines": ["1 rue", "CH-1200"]},
            {"city": "Zürich", "lines": ["Bahnhofstrasse 1"]},
            {"id": "https://example.org/places/3", "city": "Bern"},
        ],
        "nested": {"level": {"deeper": {"value": "x"}}},
    },
}
TRICKY_MANDATORY = ["/issuer", "/validFrom", "/credentialSubject/age"]
TRICKY_SELECTIONS = [
    ["/credentialSubject/name"],
    ["/credentialSubject/addresses/1", "/credentialSubject/nested/level/deeper/value"],
    ["/credentialSubject/addresses/0/lines/1", "/credentialSubject/addresses/2/city", "/credentialSubject/member"],
    ["/credentialSubject/addresses"],
    ["/credentialSubject/height"],
]


@pytest.mark.parametrize("selective", TRICKY_SELECTIONS, ids=range(len(TRICKY_SELECTIONS)))
def test_issue_check_derive_verify_round_trip(selective, suite, ctx):
    secret_key = bytes(range(1, 33))
    public_key = bbs.sk_to_pk(secret_key)
    key = VerificationKey(
        id="did:example:issuer#bbs", controller="did:example:issuer", key_type="Bls12381G2", public_key=public_key
    )
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": "bbs-2023",
        "created": "2026-01-01T00:00:00Z",
        "verificationMethod": key.id,
        "proofPurpose": "assertionMethod",
    }
    proof = create_base_proof(TRICKY_CREDENTIAL, options, TRICKY_MANDATORY, secret_key, ctx, backend=suite.backend)
    suite.verify_proof(TRICKY_CREDENTIAL, proof, key, ctx)
    derived = derive_proof(
        TRICKY_CREDENTIAL, proof, selective, ctx, presentation_header=b"nonce", backend=suite.backend
    )
    derived_proof = derived.pop("proof")
    suite.verify_proof(derived, derived_proof, key, ctx)
    assert derived["issuer"] == "did:example:issuer" and derived["credentialSubject"]["age"] == 42

    tampered = json.loads(json.dumps(derived))
    tampered["credentialSubject"]["age"] = 43
    assert _failure(suite, tampered, derived_proof, key, ctx).code == "invalid_signature"
    other = VerificationKey(
        id=key.id, controller=key.controller, key_type="Bls12381G2", public_key=bbs.sk_to_pk(bytes(range(2, 34)))
    )
    assert _failure(suite, derived, derived_proof, other, ctx).code == "invalid_signature"
    assert _failure(suite, TRICKY_CREDENTIAL, proof, other, ctx).code == "invalid_signature"


def test_deriving_from_a_derived_proof_is_refused(ctx):
    document, proof = _secured("windsurf", "derivedRevealDocument.json")
    with pytest.raises(ProofCheckFailed) as caught:
        derive_proof(document, proof, ["/credentialSubject/sailNumber"], ctx)
    assert caught.value.code == "malformed_proof_value"
