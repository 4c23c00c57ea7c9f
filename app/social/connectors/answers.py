"""Reading platform answers defensively: each expected member is checked for its JSON type.

A platform that answers out of its documented shape raises `MalformedAnswer` naming the member,
instead of a `KeyError`/`TypeError` deep in the mapping code.
"""

from __future__ import annotations

from typing import Any

from app.social.connectors.errors import MalformedAnswer

_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer", bool: "a boolean"}

_MISSING = object()


def expect(platform: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """`value` if it is of JSON type `kind` (a boolean is no integer); `MalformedAnswer` otherwise."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    expected = " or ".join(_NAMES.get(item, item.__name__) for item in kinds)
    found = "nothing" if value is _MISSING else type(value).__name__
    raise MalformedAnswer(f"{platform}: {what} should be {expected}, found {found}")


def member(
    platform: str, obj: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str, *, default: Any = _MISSING
) -> Any:
    """`obj[name]` checked with `expect`; `default` when absent (or null) and a default is given."""
    value = obj.get(name)
    if value is None:
        if default is not _MISSING:
            return default
        value = _MISSING
    return expect(platform, value, kind, f"{what}.{name}")


def objects(platform: str, value: Any, what: str) -> list[dict[str, Any]]:
    """An array whose items are all objects."""
    items = expect(platform, value, list, what)
    return [expect(platform, item, dict, f"{what}[{index}]") for index, item in enumerate(items)]
