"""Point the W3C Data Integrity test suites' issuer tests at a running Tessera.

Creates one issuer key per key type for the client of `--token` (POST /v1/issuer/keys) and writes
a `localConfig.cjs` into each suite checkout given, so that the suites (w3c/vc-di-eddsa-test-suite,
w3c/vc-di-ecdsa-test-suite, w3c/vc-di-bbs-test-suite) drive `POST /credentials/issue` with the
key's did:key as issuer. Standard library only; see docs/credentials.md ("W3C Data Integrity test suites").

    python tests/support/w3c_di_suites.py --base-url http://127.0.0.1:5077 --token "$TOKEN" \
        --eddsa /tmp/w3c/eddsa --ecdsa /tmp/w3c/ecdsa --bbs /tmp/w3c/bbs
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from pathlib import Path

BOTH_VERSIONS = {"vc": ["1.1", "2.0"]}


def create_key(base_url: str, token: str, key_type: str) -> dict:
    """A new issuer key of the token's client."""
    request = urllib.request.Request(
        f"{base_url}/v1/issuer/keys",
        data=json.dumps({"type": key_type}).encode(),
        headers={"content-type": "application/json", "x-api-token": token},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["data"]


def issuer_entry(base_url: str, token: str, key: dict, cryptosuite: str, **settings: object) -> dict:
    """One issuer endpoint of an implementation: the key's did:key, signing with `cryptosuite`."""
    return {
        "id": key["didKey"],
        "endpoint": f"{base_url}/credentials/issue",
        "headers": {"x-api-token": token},
        "options": {"keyId": key["id"], "cryptosuite": cryptosuite},
        "supports": BOTH_VERSIONS,
        "tags": [cryptosuite],
        **settings,
    }


def implementation(name: str, issuers: list[dict], verifiers: bool) -> dict:
    """An implementation column; with `verifiers`, `POST /credentials/verify` for each issuer's suite too."""
    found: dict = {"name": name, "implementation": "Tessera", "issuers": issuers}
    if verifiers:
        found["verifiers"] = [
            {**issuer, "id": f"{issuer['id']}#verifier", "endpoint": issuer["endpoint"].replace("/issue", "/verify")}
            for issuer in issuers
        ]
        for verifier in found["verifiers"]:
            verifier.pop("options")
    return found


def write_config(directory: Path, implementations: list[dict]) -> None:
    config = {
        "settings": {"enableInteropTests": False, "testAllImplementations": False},
        "implementations": implementations,
    }
    (directory / "localConfig.cjs").write_text("module.exports = " + json.dumps(config, indent=2) + ";\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token", required=True, help="An API token of the issuing client.")
    parser.add_argument("--eddsa", type=Path, help="Checkout of w3c/vc-di-eddsa-test-suite.")
    parser.add_argument("--ecdsa", type=Path, help="Checkout of w3c/vc-di-ecdsa-test-suite.")
    parser.add_argument("--bbs", type=Path, help="Checkout of w3c/vc-di-bbs-test-suite.")
    parser.add_argument(
        "--verifiers",
        action="store_true",
        help="Also configure POST /credentials/verify (the ecdsa suite's 95-functions-sd.js needs a verifier).",
    )
    args = parser.parse_args()
    base, token = args.base_url.rstrip("/"), args.token
    if args.eddsa:
        ed25519 = create_key(base, token, "Ed25519")
        issuers = [issuer_entry(base, token, ed25519, suite) for suite in ("eddsa-rdfc-2022", "eddsa-jcs-2022")]
        write_config(args.eddsa, [implementation("Tessera", issuers, args.verifiers)])
    if args.ecdsa:
        implementations = []
        for curve in ("P-256", "P-384"):
            key = create_key(base, token, curve)
            suites = ["ecdsa-rdfc-2019", "ecdsa-jcs-2019"] + (["ecdsa-sd-2023"] if curve == "P-256" else [])
            issuers = [issuer_entry(base, token, key, suite, supportedEcdsaKeyTypes=[curve]) for suite in suites]
            implementations.append(implementation(f"Tessera {curve}", issuers, args.verifiers))
        write_config(args.ecdsa, implementations)
    if args.bbs:
        bls = create_key(base, token, "Bls12381G2")
        write_config(
            args.bbs, [implementation("Tessera", [issuer_entry(base, token, bls, "bbs-2023")], args.verifiers)]
        )


if __name__ == "__main__":
    main()
