"""Where the vendored W3C/IETF test vectors live (tests/vectors/, see its README) and lazy access.

Nothing here reads a file at import: the paths are plain values and the loader is built on first use.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
CONTEXTS = VECTORS / "contexts"


@cache
def contexts_loader():
    """One offline loader over the vendored contexts, built at first use."""
    from app.credentials.jsonld.loader import make_document_loader

    return make_document_loader(CONTEXTS)


def suite_context():
    """A cryptosuite context over the vendored contexts (the loader is built at first use)."""
    from app.credentials.cryptosuites.base import SuiteContext

    return SuiteContext(loader=contexts_loader())
