"""The compiled contracts: ABI and bytecode from artifacts/, which `node build.mjs` rebuilds byte for byte.

Pure module (no Flask).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
REGISTRY = "TesseraRegistry"
IDENTITY_REGISTRY = "IdentityRegistry"


@dataclass(frozen=True)
class Artifact:
    """One compiled contract."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: str


def load_artifact(name: str) -> Artifact:
    """The committed artifact of contract `name` (`REGISTRY` or `IDENTITY_REGISTRY`)."""
    data = json.loads((ARTIFACTS / f"{name}.json").read_text(encoding="utf-8"))
    return Artifact(data["contractName"], data["abi"], data["bytecode"])
