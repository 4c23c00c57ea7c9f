"""The W3C Data Integrity test suites' issuer assertions, in Python, against POST /credentials/issue.

Each test names the suite tests it mirrors (w3c/vc-di-eddsa-test-suite, w3c/vc-di-ecdsa-test-suite,
w3c/vc-di-bbs-test-suite and their shared w3c-ccg/data-integrity-test-suite-assertion, "DITA"):
the suites drive a VC API issuer with the key's did:key as `issuer` and `options` naming the key
and the suite, exactly as `tests/support/w3c_di_suites.py` configures them for the real run (docs/credentials.md,
"W3C Data Integrity test suites"). Issued credentials are checked with independent code
(tests/support/independent.py), not with Tessera's verifier only.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlparse

import cbor2
import pytest

from tests.support import independent as ind
from tests.support.issuer import SUITES, create_key, verify
from tests.support.problems import assert_problem

SUITE_IDS = [f"{suite}-{key_type}" for suite, key_type in SUITES]
JSON_LD_SUITES = [(suite, key_type) for suite, key_type in SUITES if "jcs" not in suite]
SD_HEADERS = {"ecdsa-sd-2023": b"\xd9\x5d\x00", "bbs-2023": b"\xd9\x5d\x02"}
# DITA assertions.js `dateRegex`: an XML Schema 1.1 dateTimeStamp.
DATE_TIME_STAMP = re.compile(
    r"-?([1-9][0-9]{3,}|0[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?|(24:00:00(\.0+)?))"
    r"(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))"
)
# vc-di-ecdsa suite config/runner.json `proofLengths`; Ed25519 signatures are 64 bytes too.
SIGNATURE_LENGTHS = {"Ed25519": 64, "P-256": 64, "P-384": 96}
# Multicodec header + key: vc-di-eddsa/ecdsa "Data Model - Verification Methods", vc-di-bbs 98 bytes.
MULTIKEY_LENGTHS = {"Ed25519": 34, "P-256": 35, "P-384": 51, "Bls12381G2": 98}
V1 = "https://www.w3.org/2018/credentials/v1"
V2 = "https://www.w3.org/ns/credentials/v2"


def _credential(version: str, issuer: str) -> dict:
    """The suites' minimal credentials: DITA validVc.json (1.1) and the ecdsa suite's generateCredential (2.0)."""
    credential: dict = {
        "@context": [V1] if version == "1.1" else [V2],
        "id": f"urn:uuid:{uuid.uuid4()}",
        "type": ["VerifiableCredential"],
        "issuer": issuer,
        "credentialSubject": {"id": "did:example:alice"},
    }
    if version == "1.1":
        credential["issuanceDate"] = "2020-03-16T22:37:26.544Z"
    else:
        credential["@context"].append("https://www.w3.org/ns/credentials/examples/v2")
        credential["credentialSubject"]["name"] = "Alice"
    return credential


def _post(client, headers: dict, credential: dict, key: dict, suite: str, **options):
    body = {"credential": credential, "options": {"keyId": key["id"], "cryptosuite": suite, **options}}
    return client.post("/credentials/issue", json=body, headers=headers)


def _issue(client, headers: dict, credential: dict, key: dict, suite: str, **options) -> dict:
    response = _post(client, headers, credential, key, suite, **options)
    assert response.status_code == 201, response.get_data(as_text=True)
    assert list(response.json) == ["verifiableCredential"]
    return response.json["verifiableCredential"]


def _sd_components(suite: str, proof_value: str) -> list:
    """The base proof's CBOR components after the 3-byte header; refuses any CBOR tag."""
    assert proof_value.startswith("u")
    raw = ind.b64url_decode(proof_value[1:])
    assert raw[:3] == SD_HEADERS[suite], raw[:3].hex()

    def untagged(tag_decoder, tag):
        raise AssertionError(f"CBOR tag {tag.tag} used in a component")

    return cbor2.loads(raw[3:], tag_hook=untagged)


@pytest.mark.parametrize("version", ["1.1", "2.0"])
@pytest.mark.parametrize(("suite", "key_type"), SUITES, ids=SUITE_IDS)
def test_the_issued_proof_has_the_suites_data_model(client, master, suite, key_type, version):
    """DITA "Data Integrity (<suite> issuers)": a proof property, a single object, `proof.id` a URL
    when present, "The type property MUST contain the string DataIntegrityProof.", "If the proof type
    is DataIntegrityProof, cryptosuite MUST be specified", "A verification method ... MUST be a
    string that maps to a [URL]", "The reason the proof was created ("proof.proofPurpose") MUST be
    specified", "("proof.proofValue") ... MUST use a header and encoding as described in ...
    Multibase", `created` an XMLSCHEMA11-2 dateTimeStamp; eddsa/ecdsa "Data Model - Verification
    Methods" (publicKeyMultibase starts with z, the key type's multicodec header, any other encoding
    MUST NOT be allowed) and "Data Model - Proof Representations"; bbs-2023 (create) for VC 1.1 and
    2.0 ("The verificationMethod property of the proof MUST be a URL.", "publicKeyMultibase ...
    two-byte prefix 0xeb01 followed by the 96-byte compressed public key").
    """
    key = create_key(client, master.headers, key_type)
    credential = _credential(version, key["didKey"])
    vc = _issue(client, master.headers, credential, key, suite)

    if version == "1.1":  # the VC 1.1 context does not define DataIntegrityProof
        credential["@context"].append("https://w3id.org/security/data-integrity/v2")
    assert {name: vc[name] for name in credential} == credential
    proof = vc["proof"]
    assert isinstance(proof, dict)
    if "id" in proof:
        assert urlparse(proof["id"]).scheme
    assert proof["type"] == "DataIntegrityProof"
    assert proof["cryptosuite"] == suite
    assert proof["proofPurpose"] == "assertionMethod"
    if "created" in proof:
        assert DATE_TIME_STAMP.fullmatch(proof["created"]), proof["created"]
    controller, _, fragment = proof["verificationMethod"].partition("#")
    assert controller == key["didKey"] and urlparse(proof["verificationMethod"]).scheme == "did"
    assert fragment == controller.removeprefix("did:key:") and fragment.startswith("z")
    raw_key = ind.b58decode(fragment[1:])
    assert raw_key[:2] == ind.MULTICODEC[key_type] and len(raw_key) == MULTIKEY_LENGTHS[key_type]
    if suite in SD_HEADERS:
        assert proof["proofValue"].startswith("u")
    else:
        assert proof["proofValue"].startswith("z")
        assert len(ind.b58decode(proof["proofValue"][1:])) == SIGNATURE_LENGTHS[key_type]


@pytest.mark.parametrize("version", ["1.1", "2.0"])
@pytest.mark.parametrize(("suite", "key_type"), SUITES, ids=SUITE_IDS)
def test_the_issued_credential_verifies_with_an_independent_implementation(client, master, suite, key_type, version):
    """bbs-2023 (create) "A conforming proof is any concrete expression of the data model that
    complies with the normative statements" (the suite verifies with Digital Bazaar's library);
    the eddsa/ecdsa interop tests verify the issuer's credential with another implementation.
    Here: `cryptography` for eddsa/ecdsa, py-arkworks-bls12381 for bbs-2023, the ecdsa-sd-2023
    base proof through a derived proof checked from its parts. RDFC with P-384 needs SHA-384
    inside RDFC-1.0, which pyld lacks: that one is checked by Tessera's verifier only.
    """
    key = create_key(client, master.headers, key_type)
    # The independent checks take base proofs without mandatory pointers, as the suites send them.
    pointers = {"mandatoryPointers": []} if suite in SD_HEADERS else {}
    vc = _issue(client, master.headers, _credential(version, key["didKey"]), key, suite, **pointers)
    assert verify(client, master.headers, vc)["verified"] is True
    _, public_key = ind.public_key_from_multikey(key["publicKeyMultibase"])
    if suite == "bbs-2023":
        assert ind.verify_bbs_base(vc, public_key) is True
    elif suite == "ecdsa-sd-2023":
        derived = client.post(
            "/credentials/derive",
            json={"verifiableCredential": vc, "options": {"selectivePointers": ["/credentialSubject"]}},
            headers=master.headers,
        )
        assert derived.status_code == 201, derived.get_data(as_text=True)
        assert ind.verify_ecdsa_sd_derived(derived.json, public_key) is True
    elif not (suite == "ecdsa-rdfc-2019" and key_type == "P-384"):
        assert ind.verify_signature_suite(vc, key_type, public_key) is True
        vc["credentialSubject"]["id"] = "did:example:mallory"
        assert ind.verify_signature_suite(vc, key_type, public_key) is False


@pytest.mark.parametrize(("suite", "key_type"), [s for s in SUITES if "jcs" in s[0]], ids=lambda v: str(v))
def test_jcs_proofs_carry_the_documents_context(client, master, suite, key_type):
    """vc-di-ecdsa suite "Algorithms - Create Proof (ecdsa-jcs-2019)": "If unsecuredDocument.@context
    is present, set proof.@context to unsecuredDocument.@context." (vc-di-eddsa says the same for
    eddsa-jcs-2022). Tessera left it out before the suite's run found it.
    """
    key = create_key(client, master.headers, key_type)
    vc = _issue(client, master.headers, _credential("2.0", key["didKey"]), key, suite)
    assert vc["proof"]["@context"] == vc["@context"]
    _, public_key = ind.public_key_from_multikey(key["publicKeyMultibase"])
    assert ind.verify_signature_suite(vc, key_type, public_key) is True
    assert verify(client, master.headers, vc)["verified"] is True


@pytest.mark.parametrize("suite", ["ecdsa-sd-2023", "bbs-2023"])
def test_base_proof_values_are_untagged_cbor_of_the_suites_components(client, master, suite):
    """bbs-2023 (create) "CBOR-encode components per [RFC8949] where CBOR tagging MUST NOT be used",
    "The transformation options MUST contain an array of mandatory JSON pointers", "the HMAC key MUST
    be the same length as the digest size", "Initialize components to an array ... five or six
    elements"; vc-di-ecdsa suite "Functions - ecdsa-sd-2023" ("CBOR-encode components ... CBOR tagging
    MUST NOT be used") and "ecdsa-sd-2023 (issuers)" base proof header 0xd9 0x5d 0x00.
    """
    key_type = "P-256" if suite == "ecdsa-sd-2023" else "Bls12381G2"
    key = create_key(client, master.headers, key_type)
    pointers = ["/issuer"]
    vc = _issue(client, master.headers, _credential("2.0", key["didKey"]), key, suite, mandatoryPointers=pointers)
    components = _sd_components(suite, vc["proof"]["proofValue"])
    assert len(components) == 5
    if suite == "ecdsa-sd-2023":
        base_signature, ephemeral_key, hmac_key, signatures, mandatory = components
        assert len(base_signature) == 64
        assert ephemeral_key[:2] == ind.MULTICODEC["P-256"] and len(ephemeral_key) == 35
        assert signatures and all(len(signature) == 64 for signature in signatures)
    else:
        signature, header, public_key, hmac_key, mandatory = components
        assert (len(signature), len(header)) == (80, 64)
        assert public_key == ind.public_key_from_multikey(key["publicKeyMultibase"])[1]
    assert len(hmac_key) == 32
    assert mandatory == pointers


@pytest.mark.parametrize(("suite", "key_type"), JSON_LD_SUITES, ids=lambda v: str(v))
def test_data_dropped_by_json_ld_is_refused(client, master, suite, key_type):
    """DITA "Implementations that use JSON-LD processing, such as RDF Dataset Canonicalization
    [RDF-CANON], MUST throw an error, which SHOULD be DATA_LOSS_DETECTION_ERROR, when data is
    dropped by a JSON-LD processor, such as when an undefined term is detected": an undefined type
    and an undefined subject term under the VC 1.1 context (which has no @vocab) are refused.
    """
    key = create_key(client, master.headers, key_type)
    undefined_type = _credential("1.1", key["didKey"])
    undefined_type["type"].append("InvalidType")
    assert_problem(_post(client, master.headers, undefined_type, key, suite), 422, "credential_not_issuable")
    undefined_term = _credential("1.1", key["didKey"])
    undefined_term["credentialSubject"]["invalidTerm"] = "invalidTerm"
    assert_problem(_post(client, master.headers, undefined_term, key, suite), 422, "credential_not_issuable")


@pytest.mark.parametrize(("suite", "key_type"), SUITES, ids=SUITE_IDS)
def test_a_credential_without_subject_is_an_error(client, master, suite, key_type):
    """DITA "If the algorithm produces an error, the error MUST be propagated and SHOULD convey the
    error type." (the suite sends a credential without credentialSubject and expects a failure)."""
    key = create_key(client, master.headers, key_type)
    credential = _credential("2.0", key["didKey"])
    del credential["credentialSubject"]
    assert_problem(_post(client, master.headers, credential, key, suite), 422, "credential_not_issuable")


@pytest.mark.parametrize("suite", ["ecdsa-sd-2023", "bbs-2023"])
def test_a_mandatory_pointer_to_nothing_is_an_error(client, master, suite):
    """vc-di-ecdsa suite "Functions - Selective Disclosure": "Set value to parentValue.path. If value is
    now undefined, an error MUST be raised and SHOULD convey an error type of PROOF_GENERATION_ERROR,
    indicating that the JSON pointer does not match the given document." """
    key = create_key(client, master.headers, "P-256" if suite == "ecdsa-sd-2023" else "Bls12381G2")
    response = _post(
        client,
        master.headers,
        _credential("2.0", key["didKey"]),
        key,
        suite,
        mandatoryPointers=["/credentialSubject/invalidPointer"],
    )
    problem = assert_problem(response, 422, "credential_not_issuable")
    assert "/credentialSubject/invalidPointer" in problem["detail"]
    assert problem["reason"] == "pointer_not_found"


def test_a_body_that_is_not_json_is_a_400(client, master):
    """The VC API issue endpoint answers bad input with a problem document (400 malformed, 422 invalid)."""
    response = client.post(
        "/credentials/issue", data='{"credential": ', content_type="application/json", headers=master.headers
    )
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
