"""The standard JSON-LD contexts ship in the package: a default install verifies every suite."""

from __future__ import annotations

import json
import shutil

import pytest

from app.credentials.jsonld import loader as loader_module
from app.credentials.jsonld.loader import ContextIntegrityError, ContextNotAllowed, make_document_loader
from tests.support.config import set_settings, setting_of
from tests.support.vectors import EXPIRED_VECTORS, UNVERIFIABLE_VECTORS, VECTORS, VERIFIED_VECTORS

# One W3C vector per suite the service verifies.
SUITE_VECTORS = {
    "eddsa-rdfc-2022": "eddsa/eddsa-rdfc-2022/signedDataInt.json",
    "eddsa-jcs-2022": "eddsa/eddsa-jcs-2022/signedJCS.json",
    "ecdsa-rdfc-2019": "ecdsa/ecdsa-rdfc-2019-p384/employ/signedECDSAP384.json",
    "ecdsa-jcs-2019": "ecdsa/ecdsa-jcs-2019-p256/signedJCSECDSAP256.json",
    "ecdsa-sd-2023": "ecdsa/ecdsa-sd-2023/employ/derivedRevealDocument.json",
    "bbs-2023": "bbs-2023/derivedRevealDocument.json",
}
REQUIRED_URLS = {
    "https://www.w3.org/2018/credentials/v1",
    "https://www.w3.org/ns/credentials/v2",
    "https://www.w3.org/ns/credentials/examples/v2",
    "https://www.w3.org/2018/credentials/examples/v1",
    "https://w3id.org/security/data-integrity/v1",
    "https://w3id.org/security/data-integrity/v2",
    "https://w3id.org/security/multikey/v1",
    "https://w3id.org/security/v1",
    "https://w3id.org/security/v2",
    "https://www.w3.org/ns/credentials/status/v1",
    "https://w3id.org/security/suites/ed25519-2020/v1",
    "https://w3id.org/vdl/v1",
    "https://w3id.org/vdl/aamva/v1",
    "https://w3id.org/citizenship/v4rc1",
}


SIX_SUITES = set(SUITE_VECTORS)
UNBOUND = {"issuerMustControlKeys": False}


def _cryptosuites(vc: dict) -> set[str]:
    proofs = vc["proof"] if isinstance(vc["proof"], list) else [vc["proof"]]
    return {proof.get("cryptosuite") or proof.get("type") for proof in proofs}


def _vendored_signed_vectors() -> dict[str, dict]:
    found = {}
    for path in sorted(VECTORS.rglob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(document, dict) and isinstance(document.get("proof"), dict | list):
            found[path.relative_to(VECTORS).as_posix()] = document
    return found


@pytest.fixture(scope="module")
def fresh_client(app):
    """A new application built with no `JSONLD_CONTEXTS_DIR` anywhere, as a fresh install has."""
    from app import create_app
    from app.extensions import celery

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("JSONLD_CONTEXTS_DIR", raising=False)
        # The rate limiter is one shared extension that every create_app reconfigures: keep it as the
        # session app has it (disabling it here would disable it for every later test).
        fresh = create_app(
            {"TESTING": True, "VC_VERIFY_OPEN": "1", "RATELIMIT_KEY_PREFIX": app.config["RATELIMIT_KEY_PREFIX"]}
        )
    celery.flask_app = app  # create_app rebinds the shared Celery app; the session app stays its owner
    assert setting_of(fresh, "JSONLD_CONTEXTS_DIR") == ""
    return fresh.test_client()


def test_every_vendored_vector_of_the_six_suites_is_checked():
    by_suite: dict[str, set[str]] = {}
    for name, vc in _vendored_signed_vectors().items():
        suites = _cryptosuites(vc)
        if suites <= SIX_SUITES:
            for suite in suites:
                by_suite.setdefault(suite, set()).add(name)
            assert name in {*VERIFIED_VECTORS, *EXPIRED_VECTORS, *UNVERIFIABLE_VECTORS}, name
    assert set(by_suite) == SIX_SUITES
    verified_suites = {suite for name in VERIFIED_VECTORS for suite in _cryptosuites(_vendored_signed_vectors()[name])}
    assert verified_suites == SIX_SUITES


@pytest.mark.parametrize("name", VERIFIED_VECTORS)
def test_a_fresh_install_with_no_setting_verifies_the_w3c_vector(fresh_client, name):
    vc = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    response = fresh_client.post("/credentials/verify", json={"verifiableCredential": vc, "options": UNBOUND})
    assert response.status_code == 200, response.json
    assert response.json["verified"] is True


@pytest.mark.parametrize("name", EXPIRED_VECTORS)
def test_a_fresh_install_with_no_setting_verifies_the_proofs_of_an_expired_w3c_vector(fresh_client, name):
    vc = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    response = fresh_client.post("/credentials/verify", json={"verifiableCredential": vc, "options": UNBOUND})
    assert [error["code"] for error in response.json["errors"]] == ["expired"]


def test_the_package_ships_the_standard_contexts_pinned():
    manifest = json.loads((loader_module.BUILTIN_CONTEXTS_DIR / "manifest.json").read_text())
    assert set(manifest) >= REQUIRED_URLS
    assert all(len(entry["sha256"]) == 64 for entry in manifest.values())
    assert make_document_loader(None, builtin=True).urls >= REQUIRED_URLS


def test_a_changed_builtin_context_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / "contexts"
    shutil.copytree(loader_module.BUILTIN_CONTEXTS_DIR, copy)
    target = copy / "credentials-v2.jsonld"
    target.write_text(target.read_text().replace('"VerifiableCredential"', '"VerifiableCredentiaI"'))
    monkeypatch.setattr(loader_module, "BUILTIN_CONTEXTS_DIR", copy)
    with pytest.raises(ContextIntegrityError, match="credentials-v2.jsonld"):
        make_document_loader(None, builtin=True)


def test_contexts_dir_adds_to_the_builtin_set(tmp_path):
    extra_url = "https://contexts.example/extra/v1"
    (tmp_path / "extra.jsonld").write_text(json.dumps({"@context": {"extra": "https://contexts.example/#extra"}}))
    (tmp_path / "urlmap.json").write_text(json.dumps({extra_url: "extra.jsonld"}))
    loader = make_document_loader(tmp_path, builtin=True)
    assert extra_url in loader.urls
    assert "https://www.w3.org/ns/credentials/v2" in loader.urls
    with pytest.raises(ContextNotAllowed):
        loader("https://contexts.example/other/v1")


def test_the_service_allows_an_operators_context_beside_the_builtin_ones(app, client, master, tmp_path):
    extra_url = "https://contexts.example/extra/v1"
    (tmp_path / "extra.jsonld").write_text(json.dumps({"@context": {"extra": "https://contexts.example/#extra"}}))
    (tmp_path / "urlmap.json").write_text(json.dumps({extra_url: "extra.jsonld"}))
    from app.credentials.engine import current_engine

    previous = setting_of(app, "JSONLD_CONTEXTS_DIR")
    set_settings(app, JSONLD_CONTEXTS_DIR=str(tmp_path))
    try:
        with app.app_context():
            urls = current_engine().loader.urls
        vc = json.loads((VECTORS / SUITE_VECTORS["eddsa-rdfc-2022"]).read_text())
        response = client.post(
            "/v1/vc/verify",
            json={"verifiableCredential": vc, "options": {"issuerMustControlKeys": False}},
            headers=master.headers,
        )
    finally:
        set_settings(app, JSONLD_CONTEXTS_DIR=previous)
    assert extra_url in urls and "https://w3id.org/security/data-integrity/v2" in urls
    assert response.json["verified"] is True
