"""Helpers of the presentation tests: holders that sign presentations, verifying them over HTTP, and
Digital Bazaar's VC libraries (tests/credentials/vc_node) as a holder and a verifier."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.credentials.cryptosuites import get_suite
from tests.support.environment import TMP_DIR
from tests.support.issuing import Issuer
from tests.support.vectors import suite_context

VC_NODE_DIR = Path(__file__).resolve().parent.parent / "credentials" / "vc_node"
CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"


def unsigned_presentation(credentials: list[dict], holder: str | None = None) -> dict:
    presentation: dict[str, Any] = {
        "@context": [CREDENTIALS_V2],
        "type": ["VerifiablePresentation"],
        "verifiableCredential": credentials,
    }
    if holder is not None:
        presentation["holder"] = holder
    return presentation


def sign_presentation(
    key: Issuer,
    presentation: dict,
    *,
    challenge: str | None = None,
    domain: str | None = None,
    cryptosuite: str = "eddsa-rdfc-2022",
) -> dict:
    """`presentation` with an authentication proof made with `key` (its holder is whatever it says)."""
    return get_suite(cryptosuite).sign(
        presentation,
        private_key=key.private_key,
        verification_method=key.verification_method,
        proof_purpose="authentication",
        ctx=suite_context(),
        challenge=challenge,
        domain=domain,
    )


def verify_presentation(client, headers: dict, vp: dict, options: dict | None = None, *, member: str | None = None):
    """The answer of `POST /presentations/verify` (200 or 400) as JSON."""
    body = {member or "verifiablePresentation": vp, "options": options or {}}
    response = client.post("/presentations/verify", json=body, headers=headers)
    assert response.status_code in (200, 400), response.get_data(as_text=True)
    answer = response.json
    assert answer["verified"] is (response.status_code == 200)
    return answer


def codes(answer: dict) -> list[str]:
    return [error["code"] for error in answer["errors"]]


def present(client, headers: dict, presentation: dict, status: int = 201, **options: Any):
    response = client.post("/presentations", json={"presentation": presentation, "options": options}, headers=headers)
    assert response.status_code == status, response.get_data(as_text=True)
    return response


class DigitalBazaar:
    """tests/credentials/vc_node/vc.mjs: `run(step, data)` gives Digital Bazaar's answer as JSON.

    `npm ci` installs the pinned packages there on first use; the contexts Tessera ships are handed
    to it in a file, and `documents` (DID -> document) are the did:web documents it may read.
    """

    def __init__(self) -> None:
        if shutil.which("node") is None or shutil.which("npm") is None:
            pytest.skip("node and npm are needed to run Digital Bazaar's VC libraries")
        if not (VC_NODE_DIR / "node_modules" / "@digitalbazaar" / "vc" / "package.json").exists():
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"], cwd=VC_NODE_DIR, check=True, timeout=300, capture_output=True
            )
        from app.credentials.jsonld.loader import make_document_loader

        builtin = make_document_loader(None, builtin=True)
        self.contexts = TMP_DIR / "vc-node-contexts.json"
        self.contexts.write_text(json.dumps({url: builtin(url)["document"] for url in builtin.urls}))
        self.documents: dict[str, dict] = {}

    def run(self, step: str, data: dict) -> Any:
        payload = json.dumps({"contexts": str(self.contexts), "documents": self.documents, **data})
        completed = subprocess.run(
            ["node", "vc.mjs", step], cwd=VC_NODE_DIR, input=payload, capture_output=True, text=True, timeout=120
        )
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout)
