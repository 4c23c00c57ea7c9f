"""The offline JSON-LD loader and bounded RDFC-1.0 canonicalization: vectors, safe mode, limits."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.jsonld.canon import (
    CanonicalizationLimits,
    canonicalize,
    canonicalize_nquads,
    canonicalize_with_labels,
    expand,
    relabel_blank_nodes,
    to_nquads,
)
from app.credentials.jsonld.loader import ContextNotAllowed, make_document_loader
from tests.support.vectors import VECTORS

CONTEXTS = VECTORS / "contexts"
V2 = "https://www.w3.org/ns/credentials/v2"
EXAMPLES = "https://www.w3.org/ns/credentials/examples/v2"

RDFC_SETS = [
    ("eddsa/eddsa-rdfc-2022", "DataInt", "sha256"),
    ("eddsa/eddsa-rdfc-2022/employ", "DataInt", "sha256"),
    ("ecdsa/ecdsa-rdfc-2019-p256", "ECDSAP256", "sha256"),
    ("ecdsa/ecdsa-rdfc-2019-p256/employ", "ECDSAP256", "sha256"),
    ("ecdsa/ecdsa-rdfc-2019-p384", "ECDSAP384", "sha384"),
    ("ecdsa/ecdsa-rdfc-2019-p384/employ", "ECDSAP384", "sha384"),
]


@pytest.fixture(scope="module")
def loader():
    return make_document_loader(CONTEXTS)


def _failure(operation) -> ProofCheckFailed:
    with pytest.raises(ProofCheckFailed) as failure:
        operation()
    return failure.value


@pytest.mark.parametrize(("folder", "suffix", "hash_name"), RDFC_SETS, ids=[s[0] for s in RDFC_SETS])
def test_canonical_nquads_and_hashes_match_the_vectors(loader, folder: str, suffix: str, hash_name: str) -> None:
    base = VECTORS / folder
    document = json.loads((base / f"signed{suffix}.json").read_text())
    document.pop("proof")
    proof_config = json.loads((base / f"proofConfig{suffix}.json").read_text())
    canonical = canonicalize(document, loader, hash_name=hash_name)
    assert canonical == (base / f"canonDoc{suffix}.txt").read_text()
    assert hashlib.new(hash_name, canonical.encode()).hexdigest() == (base / f"docHash{suffix}.txt").read_text().strip()
    config_canonical = canonicalize(proof_config, loader, hash_name=hash_name)
    assert config_canonical.strip() == (base / f"proofCanon{suffix}.txt").read_text().strip()
    expected_proof_hash = (base / f"proofHash{suffix}.txt").read_text().strip()
    assert hashlib.new(hash_name, config_canonical.encode()).hexdigest() == expected_proof_hash


def test_sd_base_documents_canonicalize_like_the_vectors(loader) -> None:
    for folder in ("ecdsa/ecdsa-sd-2023/employ", "bbs-2023"):
        document = json.loads((VECTORS / folder / "addSignedSDBase.json").read_text())
        document.pop("proof")
        expected = json.loads((VECTORS / folder / "addBaseDocCanon.json").read_text())
        assert canonicalize_with_labels(document, loader).nquads == expected


def test_label_map_and_nquads_round_trip(loader) -> None:
    document = json.loads((VECTORS / "ecdsa/ecdsa-sd-2023/employ/addSignedSDBase.json").read_text())
    document.pop("proof")
    result = canonicalize_with_labels(document, loader)
    assert result.label_map and all(label.startswith("c14n") for label in result.label_map.values())
    quads = to_nquads(document, loader)
    assert sorted(relabel_blank_nodes(quads, result.label_map)) == result.nquads
    again = canonicalize_nquads(quads)
    assert again.nquads == result.nquads
    assert again.label_map == result.label_map


def test_relabel_leaves_literals_alone() -> None:
    line = '_:b0 <http://ex.org/p> "text with _:b0 inside" _:b1 .\n'
    assert relabel_blank_nodes([line], {"b0": "x", "b1": "g"}) == [
        '_:x <http://ex.org/p> "text with _:b0 inside" _:g .\n'
    ]


def test_context_not_on_the_allow_list_fails(loader) -> None:
    document = {"@context": [V2, "https://evil.example/context.jsonld"], "type": "VerifiableCredential"}
    failure = _failure(lambda: canonicalize(document, loader))
    assert isinstance(failure, ContextNotAllowed)
    assert failure.code == "context_not_allowed" and "evil.example" in failure.detail


def test_loader_refuses_unknown_urls_directly(loader) -> None:
    with pytest.raises(ContextNotAllowed):
        loader("https://www.w3.org/ns/credentials/v3", {})
    assert V2 in loader.urls and loader(V2, {})["document"]["@context"]


def test_allow_lists_do_not_leak_between_loaders(tmp_path: Path) -> None:
    extra_url = "https://contexts.example/extra/v1"
    context_file = tmp_path / "extra.jsonld"
    context_file.write_text(json.dumps({"@context": {"extraTerm": "https://contexts.example/vocab#extraTerm"}}))
    wide = make_document_loader(CONTEXTS, extra={extra_url: context_file})
    narrow = make_document_loader(CONTEXTS)
    document = {"@context": [V2, extra_url], "type": "VerifiableCredential", "extraTerm": "x"}
    assert "extraTerm" in canonicalize(document, wide)
    assert _failure(lambda: canonicalize(document, narrow)).code == "context_not_allowed"


def test_loaded_documents_cannot_be_changed_by_callers(loader) -> None:
    loader(V2, {})["document"]["@context"]["@protected"] = False
    loader.get_document(V2)["@context"].clear()
    assert loader.get_document(V2)["@context"]["@protected"] is True


def test_contexts_dir_needs_an_urlmap(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        make_document_loader(tmp_path)


@pytest.mark.parametrize(
    "document",
    [
        {"@context": [V2], "type": "VerifiableCredential", "undefinedClaim": "x"},
        {"@context": [V2], "credentialSubject": {"id": "did:example:1", "notATerm": 1}},
        {"@context": [V2], "type": ["VerifiableCredential", "UndefinedKind"]},
        {"@context": [V2], "type": "VerifiableCredential", "credentialSubject": {"id": "relative/id"}},
        {"@context": [V2, {"nothing": None}], "type": "VerifiableCredential", "nothing": "dropped"},
    ],
    ids=["property", "nested-property", "relative-type", "relative-id", "null-term"],
)
def test_safe_mode_rejects_what_expansion_would_drop(loader, document: dict) -> None:
    assert _failure(lambda: canonicalize(document, loader)).code == "undefined_term"
    assert _failure(lambda: expand(document, loader)).code == "undefined_term"


def test_deep_nesting_is_refused_before_processing(loader) -> None:
    document: dict = {"@context": [V2, EXAMPLES], "type": "VerifiableCredential"}
    inner = document
    for _ in range(5000):
        inner["credentialSubject"] = {}
        inner = inner["credentialSubject"]
    assert _failure(lambda: canonicalize(document, loader)).code == "canonicalization_limit"


def test_recursion_beyond_the_interpreter_limit_is_a_limit_failure(loader) -> None:
    document: dict = {"@context": {"next": "https://ex.org/next"}}
    inner = document
    for _ in range(3000):
        inner["next"] = {}
        inner = inner["next"]
    limits = CanonicalizationLimits(max_depth=10**6, max_values=10**6, max_steps=10**6, time_limit=30)
    assert _failure(lambda: canonicalize(document, loader, limits=limits)).code == "canonicalization_limit"


def test_huge_documents_are_refused(loader) -> None:
    document = {"@context": [V2, EXAMPLES], "type": "VerifiableCredential", "name": ["x"] * 50_000}
    assert _failure(lambda: canonicalize(document, loader)).code == "canonicalization_limit"


def test_scoped_context_bomb_hits_the_work_limit(loader) -> None:
    terms = {f"t{index}": f"https://ex.org/t{index}" for index in range(4000)}
    document: dict = {"@context": {"nest": {"@id": "https://ex.org/nest", "@context": terms}}}
    inner = document
    for _ in range(30):
        inner["nest"] = {"t1": "v"}
        inner = inner["nest"]
    assert _failure(lambda: canonicalize(document, loader)).code == "canonicalization_limit"


def _poison_graph(size: int) -> dict:
    """A complete graph of blank nodes: every node looks the same, so RDFC-1.0 must try permutations."""
    return {
        "@context": {"p": {"@id": "https://ex.org/p", "@type": "@id"}},
        "@graph": [{"@id": f"_:n{i}", "p": [f"_:n{j}" for j in range(size) if j != i]} for i in range(size)],
    }


def test_poison_graph_hits_the_work_limit(loader) -> None:
    failure = _failure(lambda: canonicalize(_poison_graph(7), loader))
    assert failure.code == "canonicalization_limit"


def test_poison_graph_hits_the_time_limit(loader) -> None:
    limits = CanonicalizationLimits(time_limit=0.3, max_hash_steps=10**9)
    failure = _failure(lambda: canonicalize(_poison_graph(9), loader, limits=limits))
    assert failure.code == "canonicalization_limit" and "0.3 s" in failure.detail


def test_small_symmetric_graphs_still_canonicalize(loader) -> None:
    assert canonicalize(_poison_graph(3), loader).count("_:c14n") == 12


def test_too_many_quads_are_refused(loader) -> None:
    document = {"@context": {"p": "https://ex.org/p"}, "p": [str(index) for index in range(300)]}
    limits = CanonicalizationLimits(max_quads=100)
    assert _failure(lambda: canonicalize(document, loader, limits=limits)).code == "canonicalization_limit"


@pytest.mark.parametrize(
    "document",
    [["not", "an", "object"], {"@context": 5}, {"@context": {"@version": 2.0}}, {"a": {1, 2}}],
    ids=["array", "context-number", "bad-version", "set-value"],
)
def test_invalid_json_ld_is_a_failure_not_an_exception(loader, document) -> None:
    assert _failure(lambda: canonicalize(document, loader)).code == "invalid_jsonld"


def test_unknown_hash_is_a_programming_error(loader) -> None:
    with pytest.raises(ValueError):
        canonicalize({"@context": [V2]}, loader, hash_name="md5")


def test_suite_context_binds_loader_and_limits(loader) -> None:
    document = {"@context": {"p": "https://ex.org/p"}, "p": [str(index) for index in range(50)]}
    ctx = SuiteContext(loader=loader, limits=CanonicalizationLimits(max_quads=10))
    assert _failure(lambda: ctx.canonicalize(document)).code == "canonicalization_limit"
    assert SuiteContext(loader=loader).canonicalize(document).count("\n") == 50


def test_cached_context_processing_never_serves_stale_results(loader) -> None:
    document = {"@context": [V2, {"p": "https://ex.org/p"}], "type": "VerifiableCredential", "p": "v"}
    first = canonicalize(document, loader)
    document["@context"][1]["p"] = "https://ex.org/q"
    second = canonicalize(document, loader)
    assert "<https://ex.org/p>" in first and "<https://ex.org/q>" in second and "<https://ex.org/p>" not in second
    employ = json.loads((VECTORS / "eddsa/eddsa-rdfc-2022/employ/signedDataInt.json").read_text())
    employ.pop("proof")
    expected = (VECTORS / "eddsa/eddsa-rdfc-2022/employ/canonDocDataInt.txt").read_text()
    assert all(canonicalize(employ, loader) == expected for _ in range(3))


def test_memoised_iri_expansions_follow_the_context_in_force(loader) -> None:
    def canonical(vocab: str, scoped: str) -> str:
        return canonicalize(
            {
                "@context": [
                    V2,
                    {"@vocab": vocab, "Thing": {"@id": "https://ex.org/Thing", "@context": {"q": scoped}}},
                ],
                "type": "VerifiableCredential",
                "colour": "n",
                "credentialSubject": {"type": "Thing", "q": "v", "colour": "m"},
            },
            loader,
        )

    first, second = (
        canonical("https://a.example/", "https://ex.org/q1"),
        canonical("https://b.example/", "https://ex.org/q2"),
    )
    assert "<https://a.example/colour>" in first and "<https://b.example/colour>" not in first
    assert "<https://b.example/colour>" in second and "<https://a.example/colour>" not in second
    assert "<https://ex.org/q1>" in first and "<https://ex.org/q2>" in second
    assert canonical("https://a.example/", "https://ex.org/q1") == first
