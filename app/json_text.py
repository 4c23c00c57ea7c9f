"""JSON text from outside (request bodies, fetched documents) parsed under one rule (pure: no Flask).

Whatever the parser cannot stand behind is malformed JSON, raised as `json.JSONDecodeError`:

- its own limits: nesting deeper than the interpreter's recursion limit, and an integer of more
  digits than `sys.get_int_max_str_digits()` (4300 by default), which `json` raises as bare
  `RecursionError` and `ValueError`;
- a string holding an unpaired surrogate (`UnpairedSurrogate`). JSON's `\\ud800` escape spells half
  of a UTF-16 pair, which no UTF-8 text can hold: Python's parser lets it into a `str`, and the
  first encoder it meets (a canonicalizer, a signature suite, the database driver) raises. RFC 8259
  §8.2 leaves such strings' behaviour unpredictable and I-JSON (RFC 7493 §2.1) forbids them; they
  are refused here, naming the string by its JSON Pointer, so no later step ever meets one.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

# A surrogate can only come in through a `\uD800`-`\uDFFF` escape (a raw one is not UTF-8), so the
# parsed value is searched only when its text holds such an escape; a UTF-16 or UTF-32 text (NUL
# bytes, which UTF-8 JSON never holds raw) is always searched.
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\x00")
_SURROGATE_ESCAPE_TEXT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class UnpairedSurrogate(json.JSONDecodeError):
    """A string of the JSON text holds an unpaired surrogate; `pointer` names it (RFC 6901)."""

    def __init__(self, pointer: str, what: str, document: str) -> None:
        self.pointer = pointer
        super().__init__(
            f"{what} at {pointer or '/'} holds an unpaired surrogate (a \\uD800-\\uDFFF escape without its other half)",
            document,
            0,
        )
        self.args = (self.msg,)  # no position: the string is named by its pointer


def parse_bounded(load: Callable[[], Any], text: str | bytes, document: str = "(request body)") -> Any:
    """`load()`, the parse of `text`, under the module's rule; `document` names the text in errors."""
    try:
        value = load()
    except json.JSONDecodeError:
        raise
    except RecursionError as exc:
        raise json.JSONDecodeError("JSON nested too deeply", document, 0) from exc
    except ValueError as exc:
        raise json.JSONDecodeError(
            f"a number has more than {sys.get_int_max_str_digits()} digits", document, 0
        ) from exc
    pattern = _SURROGATE_ESCAPE_BYTES if isinstance(text, bytes | bytearray) else _SURROGATE_ESCAPE_TEXT
    if pattern.search(text) is not None:  # type: ignore[arg-type]
        refuse_unpaired_surrogates(value, document)
    return value


def loads(text: str | bytes, document: str = "(document)") -> Any:
    """`json.loads(text)` under the module's rule."""
    return parse_bounded(lambda: json.loads(text), text, document)


def refuse_unpaired_surrogates(value: Any, document: str = "(document)") -> None:
    """Raise `UnpairedSurrogate` naming a string (a member name or a value) of the parsed `value`
    that holds an unpaired surrogate, if one does.

    Walks without recursion, so any depth the parser took is walked.
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        pointer, node = pending.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node) is not None:
                raise UnpairedSurrogate(pointer, "the string", document)
        elif isinstance(node, dict):
            members = []
            for name, member in node.items():
                if _SURROGATE.search(name) is not None:
                    raise UnpairedSurrogate(pointer, "a member name of the object", document)
                members.append((f"{pointer}/{name.replace('~', '~0').replace('/', '~1')}", member))
            pending.extend(reversed(members))
        elif isinstance(node, list):
            pending.extend(reversed([(f"{pointer}/{index}", item) for index, item in enumerate(node)]))
