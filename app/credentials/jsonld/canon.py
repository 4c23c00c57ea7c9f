"""JSON-LD expansion and RDFC-1.0 canonicalization (pyld) in safe mode and under limits.

Everything here raises `ProofCheckFailed` and nothing else:
- `context_not_allowed`: a context URL outside the loader's allow-list;
- `undefined_term`: expansion dropped a property (undefined term) or left a relative IRI as a
  type or node id (the "safe mode" of the Data Integrity specifications);
- `canonicalization_limit`: the document is too deep or too large, expansion or the blank-node
  labelling does too much work, or the time limit passes (JSON-LD bombs, poison graphs);
- `verification_time_limit`: the whole verification's `deadline` passed;
- `invalid_jsonld`: anything else pyld rejects.

RDFC-1.0 is run with SHA-256 by default; `hash_name="sha384"` gives the variant ecdsa-rdfc-2019
uses with P-384 (the internal blank-node hashes change, so labels may differ).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyld.canon import URDNA2015
from pyld.context_resolver import ContextResolver
from pyld.identifier_issuer import IdentifierIssuer
from pyld.jsonld import JsonLdError, JsonLdProcessor
from pyld.nquads import ParserError, parse_nquads, serialize_nquad

from app.credentials.failures import ProofCheckFailed
from app.credentials.jsonld.loader import DocumentLoader

T = TypeVar("T")

HASH_NAMES = frozenset({"sha256", "sha384"})
_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_MEMO_IRI_LENGTH = 200


@dataclass(frozen=True)
class CanonicalizationLimits:
    """Bounds on one JSON-LD operation.

    `time_limit` (seconds) covers expansion, RDF conversion and canonicalization of one call.
    `max_depth`/`max_values` bound the input JSON; `max_steps` bounds expansion work (one step per
    expanded element or node-map entry); `max_quads` bounds the dataset; `max_hash_steps` bounds
    the n-degree blank-node hashing of RDFC-1.0, which is exponential on poison graphs.
    `deadline` (a `time.monotonic()` instant) ends every operation of one verification at once:
    the credential's budget across all its proofs; passing it is `verification_time_limit`.
    """

    time_limit: float = 1.0
    deadline: float | None = None
    max_depth: int = 40
    max_values: int = 20_000
    max_steps: int = 100_000
    max_quads: int = 20_000
    max_hash_steps: int = 10_000


@dataclass(frozen=True)
class CanonicalResult:
    """Canonical N-Quads (sorted, each ending in newline) and the blank-node relabelling.

    `label_map` maps each input blank-node id (without `_:`) to its canonical label (without `_:`,
    e.g. `c14n0`).
    """

    nquads: list[str]
    label_map: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The canonical N-Quads as one string."""
        return "".join(self.nquads)


class _Budget:
    """Counts work and watches the clock for one operation; raises `canonicalization_limit`."""

    __slots__ = ("deadline", "limits", "steps", "hash_steps")

    def __init__(self, limits: CanonicalizationLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.time_limit
        self.steps = 0
        self.hash_steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.limits.max_steps:
            raise ProofCheckFailed("canonicalization_limit", "JSON-LD expansion exceeds the work limit")
        if self.steps & 63 == 0:
            self.check_clock()

    def hash_step(self) -> None:
        self.hash_steps += 1
        if self.hash_steps > self.limits.max_hash_steps:
            raise ProofCheckFailed("canonicalization_limit", "blank-node canonicalization exceeds the work limit")
        self.check_clock()

    def check_clock(self) -> None:
        now = time.monotonic()
        if self.limits.deadline is not None and now > self.limits.deadline:
            raise ProofCheckFailed("verification_time_limit", "the credential's proofs exceed its verification time")
        if now > self.deadline:
            raise ProofCheckFailed("canonicalization_limit", f"JSON-LD processing exceeds {self.limits.time_limit:g} s")


def _drop_is_undefined_term(expanded_property: str | None) -> None:
    raise ProofCheckFailed(
        "undefined_term",
        f"a property is not defined by the document's contexts (expands to {expanded_property!r})",
    )


class _GuardedProcessor(JsonLdProcessor):
    """pyld's processor with safe mode (dropped properties fail) and work accounting."""

    def __init__(self, budget: _Budget, loader: DocumentLoader) -> None:
        super().__init__(on_property_dropped=_drop_is_undefined_term)
        self._budget = budget
        self._processed = loader.processed_contexts
        self._iri_contexts = loader.iri_contexts
        self._expanded_iris = loader.expanded_iris

    def _expand(self, *args: Any, **kwargs: Any) -> Any:
        self._budget.step()
        return super()._expand(*args, **kwargs)

    def _process_context(
        self,
        active_ctx: dict,
        local_ctx: Any,
        options: dict,
        override_protected: bool = False,
        propagate: bool = True,
        validate_scoped: bool = True,
        cycles: set | None = None,
    ) -> dict:
        # pyld clones the active context before applying a non-propagating (type-scoped) context,
        # so its own processed-context cache misses on every node. Memoise on the active context's
        # identity and the local context's value (URLs) or identity (objects) instead: contexts
        # are never mutated once processed, the loader's documents are loaded once, and the
        # caller's document is deep-copied by pyld on every expansion, so an identity match means
        # identical content. Entries keep their inputs alive, so an id is not reused meanwhile.
        by_value = isinstance(local_ctx, str) or (
            isinstance(local_ctx, list) and all(isinstance(item, str) for item in local_ctx)
        )
        memoise = cycles is None and (by_value or isinstance(local_ctx, dict))
        if memoise:
            local_key = (tuple(local_ctx) if isinstance(local_ctx, list) else local_ctx) if by_value else id(local_ctx)
            key = (id(active_ctx), local_key, override_protected, propagate, validate_scoped)
            entry = self._processed.peek(key)
            if entry is not None and entry[0] is active_ctx and (by_value or entry[1] is local_ctx):
                self._keep_iri_context(entry[2])
                return entry[2]
        processed = super()._process_context(
            active_ctx, local_ctx, options, override_protected, propagate, validate_scoped, cycles
        )
        if memoise:
            self._processed.put(key, (active_ctx, local_ctx, processed))
            self._keep_iri_context(processed)
        return processed

    def _keep_iri_context(self, processed: dict) -> None:
        """Let IRIs expanded against a processed context be kept."""
        if self._iri_contexts.peek(id(processed)) is not processed:
            self._iri_contexts.put(id(processed), processed)

    def _expand_iri(
        self,
        active_ctx: dict,
        value: Any,
        base: str | None = None,
        vocab: bool = False,
        local_ctx: Any = None,
        defined: Any = None,
    ) -> Any:
        # Outside context processing (no `local_ctx`), expanding a string against a processed
        # context, which is never mutated again, always gives the same IRI: a verification
        # expands the same hundred keys and types against the same few contexts every time.
        if local_ctx is None and isinstance(value, str) and len(value) <= _MEMO_IRI_LENGTH:
            # An entry keeps its context alive, so a kept id is that context's; only contexts
            # `_process_context` finished (`iri_contexts`) get entries.
            key = (id(active_ctx), value, base, vocab)
            known = self._expanded_iris.peek(key)
            if known is not None and known[0] is active_ctx:
                return known[1]
            if self._iri_contexts.peek(id(active_ctx)) is active_ctx:
                expanded = super()._expand_iri(active_ctx, value, base, vocab)
                self._expanded_iris.put(key, (active_ctx, expanded))
                return expanded
        return super()._expand_iri(active_ctx, value, base, vocab, local_ctx, defined)

    def _create_term_definition(self, *args: Any, **kwargs: Any) -> Any:
        self._budget.step()
        return super()._create_term_definition(*args, **kwargs)

    def _create_node_map(self, *args: Any, **kwargs: Any) -> Any:
        self._budget.step()
        return super()._create_node_map(*args, **kwargs)


class _BoundedRdfc(URDNA2015):
    """RDFC-1.0 (URDNA2015) with a chosen hash function and a work/time budget."""

    def __init__(self, hash_name: str, budget: _Budget) -> None:
        super().__init__()
        self._hash_name = hash_name
        self._budget = budget

    def create_hash(self) -> Any:
        return hashlib.new(self._hash_name)

    def hash_n_degree_quads(self, id_: str, issuer: IdentifierIssuer) -> Any:
        self._budget.hash_step()
        return super().hash_n_degree_quads(id_, issuer)

    def hash_related_blank_node(self, *args: Any, **kwargs: Any) -> Any:
        self._budget.hash_step()
        return super().hash_related_blank_node(*args, **kwargs)

    def modify_first_degree_component(self, id_: str, component: dict, key: str) -> dict:
        # pyld's own deep-copies the component, a flat dict of strings: a tenth of a verification.
        if component["type"] != "blank node":
            return component
        return {**component, "value": "_:a" if component["value"] == id_ else "_:z"}


def check_document_shape(document: Any, limits: CanonicalizationLimits) -> None:
    """Raise `canonicalization_limit`/`invalid_jsonld` for a document too deep, too big or not JSON."""
    if not isinstance(document, dict):
        raise ProofCheckFailed("invalid_jsonld", "a JSON-LD document must be a JSON object")
    values = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        values += 1
        if values > limits.max_values:
            raise ProofCheckFailed("canonicalization_limit", f"document has more than {limits.max_values} values")
        if depth > limits.max_depth:
            raise ProofCheckFailed("canonicalization_limit", f"document is nested deeper than {limits.max_depth}")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ProofCheckFailed("invalid_jsonld", "object keys must be strings")
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif not (value is None or isinstance(value, (str, bool, int, float))):
            raise ProofCheckFailed("invalid_jsonld", f"unexpected value of type {type(value).__name__}")


def _check_no_relative_iris(expanded: Any) -> None:
    stack = [expanded]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
            continue
        if not isinstance(value, dict):
            continue
        types = value.get("@type")
        if types is not None and "@value" not in value:
            for iri in types if isinstance(types, list) else [types]:
                if isinstance(iri, str) and not (iri.startswith("_:") or _ABSOLUTE_IRI.match(iri)):
                    raise ProofCheckFailed("undefined_term", f"type {iri!r} is not defined by the contexts")
        elif isinstance(types, str) and types != "@json" and not _ABSOLUTE_IRI.match(types):
            raise ProofCheckFailed("undefined_term", f"value type {types!r} is not defined by the contexts")
        node_id = value.get("@id")
        if isinstance(node_id, str) and not (node_id.startswith("_:") or _ABSOLUTE_IRI.match(node_id)):
            raise ProofCheckFailed("undefined_term", f"relative IRI {node_id!r} used as an identifier")
        for key, item in value.items():
            if key != "@value" and isinstance(item, (list, dict)):
                stack.append(item)


def _cause_chain(error: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _as_proof_failure(error: Exception) -> ProofCheckFailed:
    for cause in _cause_chain(error):
        if isinstance(cause, ProofCheckFailed):
            return cause
        if isinstance(cause, RecursionError):
            return ProofCheckFailed("canonicalization_limit", "JSON-LD structure is nested too deeply")
    if isinstance(error, JsonLdError):
        detail = f"{error.type}: {error.message}" if getattr(error, "message", None) else str(error)
        return ProofCheckFailed("invalid_jsonld", detail[:300])
    return ProofCheckFailed("invalid_jsonld", f"{type(error).__name__}: {str(error)[:200]}")


def _options(loader: DocumentLoader) -> dict[str, Any]:
    return {
        "documentLoader": loader,
        "contextResolver": ContextResolver(loader.resolved_contexts, loader),
        "base": None,
        "processingMode": "json-ld-1.1",
        "isFrame": False,
        "keepFreeFloatingNodes": False,
        "extractAllScripts": False,
        "produceGeneralizedRdf": False,
    }


def _expand(processor: _GuardedProcessor, document: dict, loader: DocumentLoader) -> list:
    expanded = processor.expand(document, _options(loader))
    _check_no_relative_iris(expanded)
    return expanded


def _dataset(document: dict, loader: DocumentLoader, budget: _Budget) -> dict[str, list]:
    processor = _GuardedProcessor(budget, loader)
    expanded = _expand(processor, document, loader)
    options = _options(loader)
    issuer = IdentifierIssuer("_:b")
    node_map: dict[str, dict] = {"@default": {}}
    processor._create_node_map(expanded, node_map, "@default", issuer)
    dataset: dict[str, list] = {}
    quads = 0
    for graph_name, graph in sorted(node_map.items()):
        if graph_name == "@default" or _ABSOLUTE_IRI.match(graph_name) or graph_name.startswith("_:"):
            triples = processor._graph_to_rdf(graph, issuer, options)
            quads += len(triples)
            if quads > budget.limits.max_quads:
                raise ProofCheckFailed(
                    "canonicalization_limit", f"document has more than {budget.limits.max_quads} quads"
                )
            dataset[graph_name] = triples
            budget.check_clock()
    return dataset


def _run_guarded(operation: Any) -> Any:
    try:
        return operation()
    except ProofCheckFailed:
        raise
    except (
        JsonLdError,
        RecursionError,
        ParserError,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
    ) as error:
        raise _as_proof_failure(error) from error


def _check_hash_name(hash_name: str) -> None:
    if hash_name not in HASH_NAMES:
        raise ValueError(f"unsupported RDFC hash {hash_name!r}")


def _canonicalize_dataset(dataset: dict[str, list], hash_name: str, budget: _Budget) -> CanonicalResult:
    rdfc = _BoundedRdfc(hash_name, budget)
    text = rdfc.main(dataset, {"format": "application/n-quads"})
    budget.check_clock()
    prefix_length = len("_:")
    label_map = {old[prefix_length:]: new[prefix_length:] for old, new in rdfc.canonical_issuer.existing.items()}
    return CanonicalResult(nquads=text.splitlines(keepends=True), label_map=label_map)


def _on_document(document: dict, limits: CanonicalizationLimits | None, work: Callable[[_Budget], T]) -> T:
    """`work(budget)` on a document whose shape is checked first, under `limits` (default
    `CanonicalizationLimits()`); every failure raises `ProofCheckFailed`."""
    limits = limits or CanonicalizationLimits()
    budget = _Budget(limits)

    def operation() -> T:
        check_document_shape(document, limits)
        return work(budget)

    return _run_guarded(operation)


def expand(document: dict, loader: DocumentLoader, *, limits: CanonicalizationLimits | None = None) -> list:
    """The JSON-LD expansion of `document` (safe mode, limits); raises `ProofCheckFailed`."""
    return _on_document(document, limits, lambda budget: _expand(_GuardedProcessor(budget, loader), document, loader))


def to_nquads(document: dict, loader: DocumentLoader, *, limits: CanonicalizationLimits | None = None) -> list[str]:
    """The document's RDF quads serialized as N-Quads lines (blank nodes `_:b0`...), not sorted."""

    def serialize(budget: _Budget) -> list[str]:
        lines = []
        for graph_name, triples in _dataset(document, loader, budget).items():
            name = None if graph_name == "@default" else graph_name
            lines.extend(serialize_nquad(triple, name) for triple in triples)
        return lines

    return _on_document(document, limits, serialize)


def canonicalize_with_labels(
    document: dict,
    loader: DocumentLoader,
    *,
    hash_name: str = "sha256",
    limits: CanonicalizationLimits | None = None,
) -> CanonicalResult:
    """RDFC-1.0 canonical form of a JSON-LD document with its blank-node label map."""
    _check_hash_name(hash_name)
    return _on_document(
        document, limits, lambda budget: _canonicalize_dataset(_dataset(document, loader, budget), hash_name, budget)
    )


def canonicalize(
    document: dict,
    loader: DocumentLoader,
    *,
    hash_name: str = "sha256",
    limits: CanonicalizationLimits | None = None,
    time_limit: float | None = None,
) -> str:
    """RDFC-1.0 canonical N-Quads of a JSON-LD document, as one string.

    `time_limit` overrides `limits.time_limit`. Raises `ProofCheckFailed` (see module docs).
    """
    limits = limits or CanonicalizationLimits()
    if time_limit is not None:
        limits = CanonicalizationLimits(**{**limits.__dict__, "time_limit": time_limit})
    return canonicalize_with_labels(document, loader, hash_name=hash_name, limits=limits).text


def canonicalize_nquads(
    nquads: list[str] | str,
    *,
    hash_name: str = "sha256",
    limits: CanonicalizationLimits | None = None,
) -> CanonicalResult:
    """RDFC-1.0 canonical form of N-Quads text (or lines), with the blank-node label map."""
    _check_hash_name(hash_name)
    limits = limits or CanonicalizationLimits()
    budget = _Budget(limits)
    text = nquads if isinstance(nquads, str) else "".join(nquads)

    def operation() -> CanonicalResult:
        dataset = parse_nquads(text)
        if sum(len(triples) for triples in dataset.values()) > limits.max_quads:
            raise ProofCheckFailed("canonicalization_limit", f"more than {limits.max_quads} quads")
        return _canonicalize_dataset(dataset, hash_name, budget)

    return _run_guarded(operation)


def relabel_blank_nodes(nquads: Iterable[str], label_map: dict[str, str]) -> list[str]:
    """Rewrite blank-node labels `_:x` to `_:label_map[x]` in N-Quads lines (unmapped ones kept).

    Lines are parsed, so text inside literals is never touched. Raises `ProofCheckFailed`
    (`invalid_jsonld`) for a line that is not one N-Quad.
    """
    relabelled = []
    for line in nquads:
        try:
            dataset = parse_nquads(line if line.endswith("\n") else line + "\n")
        except (ParserError, ValueError, KeyError) as error:
            raise ProofCheckFailed("invalid_jsonld", f"not an N-Quad: {line[:80]!r}") from error
        for graph_name, triples in dataset.items():
            for triple in triples:
                for position in ("subject", "object", "name"):
                    term = triple.get(position)
                    if term and term["type"] == "blank node":
                        label = term["value"][2:]
                        term["value"] = "_:" + label_map.get(label, label)
                name = None if graph_name == "@default" else graph_name
                if name is not None and name.startswith("_:"):
                    name = "_:" + label_map.get(name[2:], name[2:])
                relabelled.append(serialize_nquad(triple, name))
    return relabelled
