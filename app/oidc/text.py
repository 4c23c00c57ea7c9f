"""Text that no database column can hold (pure: no Flask)."""

from __future__ import annotations

import re

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def has_unstorable(value: str | None) -> bool:
    """Whether `value` holds a NUL byte or an unpaired surrogate.

    PostgreSQL refuses NUL in text, and an unpaired surrogate cannot be encoded as UTF-8 at all,
    so such input must be refused before it reaches a query, a hash or a redirect URL.
    """
    return bool(value) and _UNSTORABLE.search(value) is not None
