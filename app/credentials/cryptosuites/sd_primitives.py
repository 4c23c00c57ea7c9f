"""Selective-disclosure building blocks shared by ecdsa-sd-2023 and bbs-2023 (pure, no Flask).

These follow the "Selective Disclosure Functions" of W3C vc-di-ecdsa (section 3.3) and vc-di-bbs:
proof-value decoding (multibase base64url + CBOR behind a 3-byte header), blank-node label maps
(HMAC ids, HMAC-shuffled ids, decompressed maps sent by a holder), JSON-pointer selection,
skolemization, `canonicalize_and_group`, and the hashing that both suites share.

Every failure is a `ProofCheckFailed`: `malformed_proof_value` for undecodable proof values,
`invalid_signature` when the proof does not fit the document, `pointer_not_found` when a JSON
pointer given to sign or disclose selects nothing, and the JSON-LD codes of
`app.credentials.jsonld.canon` for documents that cannot be processed.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2
from pyld.context_resolver import ContextResolver
from pyld.jsonld import JsonLdError, JsonLdProcessor

from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.cryptosuites.data_integrity import check_proof_context, check_proof_options
from app.dids.verification_methods import VerificationKey
from app.multiformats import MultiformatError, multibase_decode, multibase_encode

MAX_PROOF_VALUE_BYTES = 4 * 1024 * 1024
_MAX_CBOR_DEPTH = 8
# One token of an N-Quad: an IRI, a literal (quotes escaped inside), or a blank-node label. IRIs and
# literals are matched whole so that "_:" inside them is never taken for a blank node.
_NQUAD_TOKEN = re.compile(r'<[^>]*>|"(?:[^"\\]|\\.)*"|_:(\S+)')
_SKOLEM_PREFIX = "urn:custom-scheme:"
_SKOLEM_IRI = re.compile(r"<urn:custom-scheme:([^>]+)>")

LabelMapFactory = Callable[[Mapping[str, str]], dict[str, str]]


def check_proof_and_key(
    document_without_proof: Any, proof: Any, key: VerificationKey, suite_name: str, key_type: str, key_name: str
) -> None:
    """The first checks of a selective-disclosure proof: its options, its `@context` against the
    document's, and a `key_type` key (`key_name` in the message); raise `ProofCheckFailed`."""
    check_proof_options(proof, suite_name)
    if isinstance(document_without_proof, dict):
        check_proof_context(document_without_proof, proof)
    if key.key_type != key_type:
        raise ProofCheckFailed("unsupported_key_type", f"{suite_name} needs a {key_name} key, not {key.key_type}")


def malformed(detail: str) -> ProofCheckFailed:
    """A `malformed_proof_value` failure with `detail`."""
    return ProofCheckFailed("malformed_proof_value", detail)


# --- proof values --------------------------------------------------------------------------------


def decode_base64url_multibase(value: Any) -> bytes:
    """The bytes of a multibase base64url-no-pad string (`u...`); raises `malformed_proof_value`."""
    if not isinstance(value, str) or not value.startswith("u"):
        raise malformed("proofValue must be a multibase base64url string starting with 'u'")
    if len(value) > MAX_PROOF_VALUE_BYTES * 4 // 3 + 4:
        raise malformed("proofValue is too large")
    try:
        decoded = multibase_decode(value, allowed="u")
    except MultiformatError as error:
        raise malformed(f"proofValue is not base64url without padding ({error})") from None
    # A second spelling of the same bytes (non-zero padding bits) would make proofs malleable.
    if multibase_encode(decoded, "u") != value:
        raise malformed("proofValue has non-canonical base64url padding bits")
    return decoded


class _CborReader:
    """A strict decoder for the CBOR subset proof values use: integers, byte and text strings,
    arrays and maps, definite or indefinite length. Tags, floats and simple values are refused
    (the specifications forbid tagging inside the components)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, count: int) -> bytes:
        end = self.position + count
        if count < 0 or end > len(self.data):
            raise malformed("CBOR data ends early")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def _argument(self, info: int) -> int | None:
        if info < 24:
            return info
        if info in (24, 25, 26, 27):
            return int.from_bytes(self._take(1 << (info - 24)), "big")
        if info == 31:
            return None
        raise malformed("CBOR item has a reserved length encoding")

    def _is_break(self) -> bool:
        if self.position < len(self.data) and self.data[self.position] == 0xFF:
            self.position += 1
            return True
        return False

    def read(self, depth: int = 0) -> Any:
        if depth > _MAX_CBOR_DEPTH:
            raise malformed("CBOR data is nested too deeply")
        initial = self._take(1)[0]
        major, info = initial >> 5, initial & 0x1F
        argument = self._argument(info)
        if major == 0 and argument is not None:
            return argument
        if major == 1 and argument is not None:
            return -1 - argument
        if major in (2, 3):
            if argument is None:
                chunks = []
                while not self._is_break():
                    chunk = self.read(depth + 1)
                    if type(chunk) is not (bytes if major == 2 else str):
                        raise malformed("CBOR indefinite string has a chunk of another type")
                    chunks.append(chunk)
                return b"".join(chunks) if major == 2 else "".join(chunks)
            raw = self._take(argument)
            if major == 2:
                return raw
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                raise malformed("CBOR text string is not UTF-8") from None
        if major == 4:
            items = []
            while (len(items) < argument) if argument is not None else not self._is_break():
                items.append(self.read(depth + 1))
            return items
        if major == 5:
            mapping: dict[Any, Any] = {}
            while (len(mapping) < argument) if argument is not None else not self._is_break():
                key = self.read(depth + 1)
                if isinstance(key, (list, dict)) or key in mapping:
                    raise malformed("CBOR map has a duplicate or non-scalar key")
                mapping[key] = self.read(depth + 1)
            return mapping
        if major == 6:
            raise malformed("CBOR tags must not be used inside a proof value")
        raise malformed("CBOR proof value contains an unsupported item (float, simple value or break)")


def decode_cbor(data: bytes) -> Any:
    """Decode one CBOR item that must span `data` exactly; raises `malformed_proof_value`."""
    reader = _CborReader(data)
    item = reader.read()
    if reader.position != len(data):
        raise malformed("trailing bytes after the CBOR proof value")
    return item


def split_proof_value(proof_value: Any, headers: Mapping[bytes, str]) -> tuple[str, bytes]:
    """The kind of a proof value (looked up by its 3-byte header) and the bytes after the header.

    `headers` maps each accepted header (e.g. `b"\\xd9\\x5d\\x00"`) to a name; any other header
    raises `malformed_proof_value`.
    """
    data = decode_base64url_multibase(proof_value)
    kind = headers.get(data[:3])
    if kind is None:
        raise malformed(f"unexpected proof value header {data[:3].hex() or '(empty)'}")
    return kind, data[3:]


def decode_components(payload: bytes, count: int) -> list:
    """The CBOR array of `count` proof-value components; else `malformed_proof_value`."""
    components = decode_cbor(payload)
    if not isinstance(components, list) or len(components) != count:
        raise malformed(f"the proof value must be a CBOR array of {count} components")
    return components


def require_bytes(value: Any, name: str, length: int | None = None) -> bytes:
    """`value` if it is a byte string (of `length`, when given); else `malformed_proof_value`."""
    if type(value) is not bytes or (length is not None and len(value) != length):
        size = f" of {length} bytes" if length is not None else ""
        raise malformed(f"{name} must be a byte string{size}")
    return value


def require_index_list(value: Any, name: str) -> list[int]:
    """`value` as a list of distinct non-negative integers; else `malformed_proof_value`."""
    if not isinstance(value, list) or not all(type(i) is int and i >= 0 for i in value):
        raise malformed(f"{name} must be an array of non-negative integers")
    if len(set(value)) != len(value):
        raise malformed(f"{name} has repeated entries")
    return value


def require_pointer_list(value: Any, name: str = "mandatoryPointers") -> list[str]:
    """`value` as a list of JSON pointers (strings starting with '/'); else `malformed_proof_value`."""
    if not isinstance(value, list) or not all(isinstance(p, str) and p.startswith("/") for p in value):
        raise malformed(f"{name} must be an array of JSON pointers")
    return value


# --- label maps ----------------------------------------------------------------------------------


def _hmac_labels(hmac_key: bytes, canonical_id_map: Mapping[str, str], digest: str) -> dict[str, str]:
    return {
        input_label: multibase_encode(hmac.new(hmac_key, canonical.encode("utf-8"), digest).digest(), "u")
        for input_label, canonical in canonical_id_map.items()
    }


def hmac_id_label_map_factory(hmac_key: bytes, digest: str = "sha256") -> LabelMapFactory:
    """createHmacIdLabelMapFunction: each canonical label becomes `u` + base64url(HMAC(label))."""

    def factory(canonical_id_map: Mapping[str, str]) -> dict[str, str]:
        return _hmac_labels(hmac_key, canonical_id_map, digest)

    return factory


def shuffled_id_label_map_factory(hmac_key: bytes) -> LabelMapFactory:
    """createShuffledIdLabelMapFunction (bbs-2023): labels `b<i>`, i the rank of the HMAC label."""

    def factory(canonical_id_map: Mapping[str, str]) -> dict[str, str]:
        hmac_ids = _hmac_labels(hmac_key, canonical_id_map, "sha256")
        rank = {hmac_id: index for index, hmac_id in enumerate(sorted(hmac_ids.values()))}
        return {input_label: f"b{rank[hmac_id]}" for input_label, hmac_id in hmac_ids.items()}

    return factory


def decompress_hmac_label_map(compressed: Any) -> dict[str, str]:
    """decompressLabelMap of ecdsa-sd-2023: `{i: 32-byte digest}` -> `{"c14n<i>": "u" + base64url}`."""
    return _decompress_label_map(compressed, bytes, lambda digest: multibase_encode(digest, "u"))


def decompress_shuffled_label_map(compressed: Any) -> dict[str, str]:
    """decompressLabelMap of bbs-2023: `{i: j}` -> `{"c14n<i>": "b<j>"}`."""
    return _decompress_label_map(compressed, int, lambda rank: f"b{rank}")


def _decompress_label_map(compressed: Any, value_type: type, render: Callable[[Any], str]) -> dict[str, str]:
    if not isinstance(compressed, dict):
        raise malformed("the label map must be a CBOR map")
    label_map = {}
    for key, value in compressed.items():
        if type(key) is not int or key < 0 or type(value) is not value_type:
            raise malformed(f"the label map must map non-negative integers to {value_type.__name__}")
        if value_type is bytes and len(value) != 32:
            raise malformed("label map values must be 32-byte HMAC digests")
        if value_type is int and value < 0:
            raise malformed("label map values must be non-negative")
        label_map[f"c14n{key}"] = render(value)
    if len(set(label_map.values())) != len(label_map):
        raise malformed("the label map assigns one label twice")
    return label_map


def relabel_nquads(nquads: Iterable[str], label_map: Mapping[str, str], *, strict: bool = True) -> list[str]:
    """relabelBlankNodes: every blank node `_:x` becomes `_:label_map[x]` (literals untouched).

    With `strict`, a label missing from the map raises `invalid_signature` (the proof does not
    cover that node); otherwise it is kept as it is.
    """

    def replace(match: re.Match) -> str:
        label = match.group(1)
        if label is None:
            return match.group(0)
        new_label = label_map.get(label)
        if new_label is None:
            if strict:
                raise ProofCheckFailed("invalid_signature", f"no label for blank node _:{label}")
            return match.group(0)
        return "_:" + new_label

    return [_NQUAD_TOKEN.sub(replace, line) for line in nquads]


def label_replaced_canonical_nquads(
    canonical_nquads: Sequence[str], canonical_id_map: Mapping[str, str], factory: LabelMapFactory
) -> tuple[list[str], dict[str, str]]:
    """labelReplacementCanonicalizeNQuads from a canonicalization result.

    Returns the canonical quads relabelled by `factory(canonical_id_map)`, sorted again, and that
    label map (input label -> new label).
    """
    label_map = factory(canonical_id_map)
    by_canonical = {canonical_id_map[label]: new for label, new in label_map.items()}
    return sorted(relabel_nquads(canonical_nquads, by_canonical)), label_map


def relabelled_canonical_nquads(document: dict, label_map: Mapping[str, str], ctx: SuiteContext) -> list[str]:
    """The verifier's labelReplacementCanonicalizeJsonLd: canonicalize `document`, then replace
    each canonical label (`c14n<i>`) with the holder's label from `label_map` and sort again.

    A canonical blank node the map does not cover raises `invalid_signature`.
    """
    return sorted(relabel_nquads(ctx.canonicalize_with_labels(document).nquads, label_map))


# --- JSON pointers and selection -----------------------------------------------------------------


def json_pointer_to_paths(pointer: str) -> list[str | int]:
    """jsonPointerToPaths: RFC 6901 pointer to path segments (decimal segments become ints)."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise malformed(f"{pointer!r} is not a JSON pointer")
    paths: list[str | int] = []
    for segment in pointer.split("/")[1:]:
        if "~" in segment:
            if re.search(r"~(?![01])", segment):
                raise malformed(f"{pointer!r} has an invalid escape")
            paths.append(segment.replace("~1", "/").replace("~0", "~"))
        elif segment.isascii() and segment.isdigit() and (segment == "0" or not segment.startswith("0")):
            paths.append(int(segment))
        else:
            paths.append(segment)
    return paths


class _SparseArray(dict):
    """A selected array under construction: index -> value, made dense at the end."""


_MISSING = object()


def _child(container: Any, path: str | int) -> Any:
    if isinstance(container, list):
        if isinstance(path, int) and path < len(container):
            return container[path]
        return _MISSING
    if isinstance(container, _SparseArray):
        return container.get(path, _MISSING) if isinstance(path, int) else _MISSING
    if isinstance(container, dict):
        return container.get(str(path), _MISSING)
    return _MISSING


def _set_child(container: Any, path: str | int, value: Any) -> None:
    if isinstance(container, _SparseArray):
        if not isinstance(path, int):
            raise malformed(f"JSON pointer segment {path!r} indexes an array")
        container[path] = value
    elif isinstance(container, list):
        # An array an earlier pointer selected whole; `_child` already checked the index.
        container[path] = value
    elif isinstance(container, dict):
        container[str(path)] = value
    else:
        raise malformed(f"JSON pointer segment {path!r} goes below a literal")


def _initial_selection(source: Any) -> dict:
    selection: dict[str, Any] = {}
    if isinstance(source, dict):
        node_id = source.get("id")
        if node_id is not None and not (isinstance(node_id, str) and node_id.startswith("_:")):
            selection["id"] = node_id
        if "type" in source:
            selection["type"] = source["type"]
    return selection


def _select_paths(paths: list[str | int], document: Any, selection: dict, pointer: str) -> None:
    value: Any = document
    selected_parent: Any = selection
    selected_value: Any = selection
    for path in paths:
        selected_parent = selected_value
        value = _child(value, path)
        if value is _MISSING:
            raise ProofCheckFailed("pointer_not_found", f"JSON pointer {pointer!r} does not match the document")
        selected_value = _child(selected_parent, path)
        if selected_value is _MISSING:
            selected_value = _SparseArray() if isinstance(value, list) else _initial_selection(value)
            _set_child(selected_parent, path, selected_value)
    if isinstance(value, list):
        selected_value = copy.deepcopy(value)
    elif isinstance(value, dict):
        selected_value = {**selected_value, **copy.deepcopy(value)}
    else:
        selected_value = value
    _set_child(selected_parent, paths[-1], selected_value)


def _densify(value: Any) -> Any:
    if isinstance(value, _SparseArray):
        return [_densify(value[index]) for index in sorted(value)]
    if isinstance(value, dict):
        return {key: _densify(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_densify(item) for item in value]
    return value


def select_json_ld(pointers: Sequence[str], document: dict) -> dict | None:
    """selectJsonLd: the fragment of a compact document that `pointers` select (None if none).

    The selection keeps the document's `@context` and the `id`/`type` of every object on the way.
    A pointer that does not resolve raises `pointer_not_found` (a base proof or a disclosure would
    name data that is not in the document).
    """
    if not pointers:
        return None
    selection = _initial_selection(document)
    selection["@context"] = copy.deepcopy(document.get("@context"))
    for pointer in pointers:
        paths = json_pointer_to_paths(pointer)
        if not paths:
            raise malformed("a JSON pointer must not select the whole document")
        _select_paths(paths, document, selection, pointer)
    return _densify(selection)


# --- skolemization and grouping ------------------------------------------------------------------


def skolemize_expanded(expanded: list, random_string: str) -> list:
    """skolemizeExpandedJsonLd: give every node an IRI (`urn:custom-scheme:...`), keeping labels.

    Unlabelled nodes get `urn:custom-scheme:_<random>_<n>`; `_:x` becomes `urn:custom-scheme:x`.
    """
    counter = [0]

    def skolemize(elements: list) -> list:
        result = []
        for element in elements:
            if not isinstance(element, dict) or "@value" in element:
                result.append(copy.deepcopy(element))
                continue
            node: dict[str, Any] = {}
            for key, value in element.items():
                node[key] = skolemize(value) if isinstance(value, list) else skolemize([value])[0]
            if "@list" in element or "@set" in element:
                result.append(node)
                continue
            node_id = node.get("@id")
            if node_id is None:
                node["@id"] = f"{_SKOLEM_PREFIX}_{random_string}_{counter[0]}"
                counter[0] += 1
            elif isinstance(node_id, str) and node_id.startswith("_:"):
                node["@id"] = _SKOLEM_PREFIX + node_id[2:]
            result.append(node)
        return result

    return skolemize(expanded)


def deskolemize_nquads(nquads: Iterable[str]) -> list[str]:
    """deskolemizeNQuads: `<urn:custom-scheme:x>` becomes the blank node `_:x`."""
    return [_SKOLEM_IRI.sub(lambda match: "_:" + match.group(1), line) for line in nquads]


class _BoundedCompactor(JsonLdProcessor):
    """pyld compaction that stops at the suite's time and work limits (`canonicalization_limit`)."""

    def __init__(self, time_limit: float, max_steps: int) -> None:
        super().__init__()
        self._deadline = time.monotonic() + time_limit
        self._steps_left = max_steps

    def _compact(self, *args: Any, **kwargs: Any) -> Any:
        self._steps_left -= 1
        if self._steps_left < 0 or time.monotonic() > self._deadline:
            raise ProofCheckFailed("canonicalization_limit", "JSON-LD compaction exceeds the work or time limit")
        return super()._compact(*args, **kwargs)


def _compact(expanded: list, context: Any, ctx: SuiteContext) -> dict:
    """JSON-LD compaction with the suite's loader (its processed-context cache)."""
    loader = ctx.loader
    options = {
        "documentLoader": loader,
        "contextResolver": ContextResolver(loader.resolved_contexts, loader),
        "base": "",
        "processingMode": "json-ld-1.1",
        "compactArrays": True,
        "graph": False,
        "skipExpansion": True,
    }
    time_limit = ctx.limits.time_limit
    if ctx.limits.deadline is not None:
        time_limit = min(time_limit, ctx.limits.deadline - time.monotonic())
    compactor = _BoundedCompactor(time_limit, ctx.limits.max_steps)
    try:
        return compactor.compact(expanded, {"@context": context}, options)
    except ProofCheckFailed:
        raise
    except (JsonLdError, RecursionError, ValueError, TypeError, KeyError) as error:
        raise ProofCheckFailed("invalid_jsonld", f"compaction failed: {str(error)[:200]}") from error


@dataclass(frozen=True)
class GroupedNQuads:
    """One group of canonicalizeAndGroup: quads (by index into all quads) inside and outside it,
    and the selection's own quads before relabelling (`deskolemized`, blank nodes as skolemized)."""

    matching: dict[int, str]
    non_matching: dict[int, str]
    deskolemized: list[str]


@dataclass(frozen=True)
class CanonicalGroups:
    """The result of `canonicalize_and_group`: all relabelled quads, the label map, the groups."""

    nquads: list[str]
    label_map: dict[str, str]
    groups: dict[str, GroupedNQuads]


def canonicalize_and_group(
    document: dict,
    factory: LabelMapFactory,
    group_definitions: Mapping[str, Sequence[str]],
    ctx: SuiteContext,
) -> CanonicalGroups:
    """canonicalizeAndGroup: relabelled canonical quads, split by JSON-pointer selections.

    The document is skolemized (expand, name every node, compact) so that quads produced from a
    selection can be matched against the whole document's quads by string equality.
    """
    if not isinstance(document.get("@context"), (str, list, dict)):
        raise ProofCheckFailed("invalid_jsonld", "the document has no @context")
    expanded = ctx.expand(document)
    skolemized_expanded = skolemize_expanded(expanded, secrets.token_hex(8))
    skolemized_compact = _compact(skolemized_expanded, document["@context"], ctx)
    # The whole document's quads come from the expanded form; wrapping it in "@graph" lets the
    # context-free expanded nodes go through the same guarded conversion as any document.
    deskolemized = deskolemize_nquads(ctx.to_nquads({"@graph": skolemized_expanded}))
    canonical = ctx.canonicalize_nquads(deskolemized)
    nquads, label_map = label_replaced_canonical_nquads(canonical.nquads, canonical.label_map, factory)

    groups = {}
    for name, pointers in group_definitions.items():
        selection = select_json_ld(pointers, skolemized_compact)
        selection_quads = [] if selection is None else deskolemize_nquads(ctx.to_nquads(selection))
        selected = set(relabel_nquads(selection_quads, label_map, strict=False))
        matching = {index: quad for index, quad in enumerate(nquads) if quad in selected}
        non_matching = {index: quad for index, quad in enumerate(nquads) if quad not in selected}
        groups[name] = GroupedNQuads(matching=matching, non_matching=non_matching, deskolemized=selection_quads)
    return CanonicalGroups(nquads=nquads, label_map=label_map, groups=groups)


def mandatory_group(
    document: dict, factory: LabelMapFactory, mandatory_pointers: Sequence[str], ctx: SuiteContext
) -> GroupedNQuads:
    """The statements of a base proof: the document's relabelled canonical quads, split into
    those the mandatory pointers select and the others (see `canonicalize_and_group`)."""
    return canonicalize_and_group(document, factory, {"mandatory": mandatory_pointers}, ctx).groups["mandatory"]


def split_by_indexes(nquads: Sequence[str], mandatory_indexes: Sequence[int]) -> tuple[list[str], list[str]]:
    """The quads at `mandatory_indexes` and the others, both in order.

    An index past the end means the document has fewer statements than the proof was made for:
    `invalid_signature`.
    """
    wanted = set(mandatory_indexes)
    if wanted and max(wanted) >= len(nquads):
        raise ProofCheckFailed("invalid_signature", "the proof's mandatory indexes exceed the document's statements")
    mandatory = [quad for index, quad in enumerate(nquads) if index in wanted]
    non_mandatory = [quad for index, quad in enumerate(nquads) if index not in wanted]
    return mandatory, non_mandatory


def hash_nquads(nquads: Iterable[str], digest: str = "sha256") -> bytes:
    """hashMandatoryNQuads: the hash of the UTF-8 bytes of the joined quads."""
    return hashlib.new(digest, "".join(nquads).encode("utf-8")).digest()


def proof_configuration(proof: Mapping[str, Any], document: Mapping[str, Any]) -> dict:
    """The proof options a proof hash covers: the proof without `proofValue`, in the document's context."""
    config = {key: value for key, value in proof.items() if key != "proofValue"}
    config["@context"] = document.get("@context")
    return config


def proof_hash(
    proof: Mapping[str, Any], document: Mapping[str, Any], ctx: SuiteContext, digest: str = "sha256"
) -> bytes:
    """The hash of the canonical proof configuration (RDFC-1.0 with SHA-256)."""
    canonical = ctx.canonicalize(proof_configuration(proof, document))
    return hashlib.new(digest, canonical.encode("utf-8")).digest()


def derived_statements(
    document: dict,
    proof: Mapping[str, Any],
    label_map: Mapping[str, str],
    mandatory_indexes: Sequence[int],
    ctx: SuiteContext,
) -> tuple[bytes, bytes, list[str]]:
    """The part of createVerifyData both suites share for a derived proof: (proof hash, hash of
    the mandatory statements, the other statements) of the revealed document, relabelled with the
    holder's label map."""
    configuration_hash = proof_hash(proof, document, ctx)
    nquads = relabelled_canonical_nquads(document, label_map, ctx)
    mandatory, non_mandatory = split_by_indexes(nquads, mandatory_indexes)
    return configuration_hash, hash_nquads(mandatory), non_mandatory


# --- issuing and deriving ------------------------------------------------------------------------


def encode_proof_value(header: bytes, components: list) -> str:
    """A proof value: `u` + base64url(header || CBOR(components)), no CBOR tags inside."""
    return multibase_encode(header + cbor2.dumps(components), "u")


def compress_label_map(label_map: Mapping[str, str], render: Callable[[str], Any]) -> dict[int, Any]:
    """compressLabelMap: `{"c14n<i>": label}` -> `{i: render(label)}`."""
    return {int(key.removeprefix("c14n")): render(value) for key, value in label_map.items()}


def verifier_label_map(
    reveal_deskolemized: Sequence[str], label_map: Mapping[str, str], ctx: SuiteContext
) -> dict[str, str]:
    """The holder's label map for a verifier: the canonical labels the verifier will compute for
    the revealed quads (`c14n<i>`) mapped to the labels the issuer signed."""
    canonical = ctx.canonicalize_nquads(list(reveal_deskolemized))
    return {canonical_label: label_map[label] for label, canonical_label in canonical.label_map.items()}


@dataclass(frozen=True)
class Disclosure:
    """What a holder computes to derive a proof (createDisclosureData, shared part).

    `mandatory_indexes` are relative to the combined (revealed) statements; `selective_indexes`
    to the non-mandatory ones (bbs-2023); `non_mandatory` are all non-mandatory statements in
    order, `reveal_document` the selected document and `label_map` the verifier's label map.
    """

    groups: dict[str, GroupedNQuads]
    mandatory_indexes: list[int]
    selective_indexes: list[int]
    non_mandatory: list[str]
    reveal_document: dict
    label_map: dict[str, str]


def create_disclosure(
    document: dict,
    factory: LabelMapFactory,
    mandatory_pointers: Sequence[str],
    selective_pointers: Sequence[str],
    ctx: SuiteContext,
) -> Disclosure:
    """Group the document for a derived proof revealing the mandatory and selected statements."""
    combined_pointers = [*mandatory_pointers, *selective_pointers]
    grouped = canonicalize_and_group(
        document,
        factory,
        {"mandatory": mandatory_pointers, "selective": selective_pointers, "combined": combined_pointers},
        ctx,
    )
    groups = grouped.groups
    combined = list(groups["combined"].matching)
    non_mandatory = list(groups["mandatory"].non_matching)
    reveal_document = select_json_ld(combined_pointers, document)
    if reveal_document is None:
        raise ProofCheckFailed("invalid_proof_configuration", "nothing is selected for disclosure")
    return Disclosure(
        groups=groups,
        mandatory_indexes=[combined.index(index) for index in groups["mandatory"].matching],
        selective_indexes=[
            non_mandatory.index(index)
            for index in groups["selective"].matching
            if index in groups["mandatory"].non_matching
        ],
        non_mandatory=list(groups["mandatory"].non_matching.values()),
        reveal_document=reveal_document,
        label_map=verifier_label_map(groups["combined"].deskolemized, grouped.label_map, ctx),
    )
