"""One cache module: outside `app/cache.py` no code keeps a cache of its own.

A hand-written cache shows as an `OrderedDict`, a dict subclass with its own `get` or item
assignment (or named a cache), a dict named a cache or memo or held by a class so named, a
module-level dict that functions fill, or `functools.cache`/`lru_cache` on a function whose
result depends on more than its arguments. The dicts of that kind that are registries, not
caches, the dict subclasses that adapt another library's mapping, and the functions `functools`
may remember because they are pure, are listed here with the reason; each entry must still be
found, so one that goes away leaves the list with it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE_MODULE = "app/cache.py"
_MEMO_DECORATORS = {"cache", "lru_cache", "cached_property"}
_CACHE_NAME = re.compile(r"cache|memo", re.I)
_DICTS = {"dict", "OrderedDict", "UserDict", "defaultdict"}
_FILLING_METHODS = ("setdefault", "update", "__setitem__")
# A dict subclass that changes how entries are found or kept (an LRU bookkeeping `get`, say).
_LOOKUPS = {"get", "__getitem__", "__setitem__", "__missing__", "setdefault"}

# Pure functions of their (hashable) arguments: the same arguments give the same value for the
# life of the process.
PURE_FUNCTIONS = {
    "app/credentials/bbs/scheme.py:_decode_public_key": "a G2 point decoded from the key's bytes",
    "app/credentials/cryptosuites/bbs_2023.py:_public_key_problem": "what is wrong with the key's bytes, if anything",
    "app/oidc/service.py:_redeem_statements": "statements built per dialect and shape of the redemption",
    "app/profile/formats.py:_language_codes": "pycountry's tables, fixed for the installation",
    "app/profile/formats.py:_script_codes": "pycountry's tables, fixed for the installation",
    "app/profile/formats.py:_country_codes": "pycountry's tables, fixed for the installation",
    "app/profile/formats.py:_region_codes": "pycountry's tables, fixed for the installation",
    "app/social/connectors/http.py:tls_context": "the one TLS context of the process (system trust store)",
    "app/tenancy/routes.py:_plain_page_args": "a list's page arguments, loaded from its query string",
    "app/tenancy/service.py:_active_token_statement": "a statement built per number of hash keys",
    "app/tenancy/validation.py:time_zones": "tzdata's zone names, fixed for the installation",
    "app/web/hot.py:_parsed_limit": "a rate-limit string parsed",
}
# Module-level dicts functions fill, and dicts of classes named a cache, that hold no computed
# values to forget: registries, and one shared object per name whose identity matters (its state
# is shared by every caller).
REGISTRIES = {
    "app/credentials/bbs/curve.py:_backends": "one shared curve backend per name",
    "app/credentials/bbs/scheme.py:_series": "one generator series per backend, suite and kind (pure, at most 8)",
    "app/credentials/cryptosuites/__init__.py:_import_errors": "suite modules that failed to import",
    "app/credentials/cryptosuites/base.py:_registry": "the registered cryptosuites",
    "app/jobs/service.py:_failure_handlers": "the registered failure handlers",
    "app/ops/routes.py:_probes": "the readiness probe in flight per dependency",
    "app/social/service.py:_shared": "one call budget / claim store per configuration, shared by threads",
    "app/oidc/client_auth.py:_JwksCache.fetching": "one lock per jwks_uri fetched (held locks are never dropped)",
    "app/ops/database.py:_servers": "one record per PostgreSQL server of whether it answers, shared by every engine",
}
# Dict subclasses with a lookup of their own that keep nothing computed: another library's mapping, read its way.
ADAPTED_DICTS = {
    "app/serving.py:_RespawnTimes": "granian's record of worker respawns, answered per exit for its crash-loop rule",
}
_DICT_SUBCLASS = re.compile(r"^\d+: class (\w+) is a dict that keeps entries its own way$")


def _is_dict(value: ast.expr | None) -> bool:
    """`{}`, `dict(...)`, `defaultdict(...)`, `OrderedDict(...)` or `field(default_factory=dict)`."""
    if isinstance(value, ast.Dict):
        return True
    if not isinstance(value, ast.Call):
        return False
    name = value.func.id if isinstance(value.func, ast.Name) else getattr(value.func, "attr", "")
    if name in ("dict", "defaultdict", "OrderedDict"):
        return True
    return name == "field" and any(
        keyword.arg == "default_factory" and isinstance(keyword.value, ast.Name) and keyword.value.id == "dict"
        for keyword in value.keywords
    )


def _target_name(target: ast.expr) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _assignments(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield node, target, node.value
        elif isinstance(node, ast.AnnAssign):
            yield node, node.target, node.value


def _memo_decorator(decorator: ast.expr, from_functools: set[str]) -> str | None:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "functools":
        return func.attr if func.attr in _MEMO_DECORATORS else None
    if isinstance(func, ast.Name) and func.id in from_functools:
        return func.id
    return None


def _qualified_functions(tree: ast.Module):
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                stack.append((child, f"{name}."))


def _findings(name: str, source: str) -> tuple[list[str], set[str], set[str]]:
    """What in `source` (the file `name`) looks like a cache: offences, memoised functions, and the
    module dicts functions fill with the dicts classes named a cache hold."""
    tree = ast.parse(source)
    offences: list[str] = []
    from_functools = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "functools"
        for alias in node.names
        if alias.name in _MEMO_DECORATORS
    }
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if (
            (isinstance(node, ast.Name) and node.id == "OrderedDict")
            or (isinstance(node, ast.Attribute) and node.attr == "OrderedDict")
            or (isinstance(node, ast.ImportFrom) and any(alias.name == "OrderedDict" for alias in node.names))
        ):
            offences.append(f"{line}: OrderedDict")
        if isinstance(node, ast.ClassDef) and {_target_name(base) for base in node.bases} & _DICTS:
            methods = {child.name for child in node.body if isinstance(child, ast.FunctionDef)}
            if _CACHE_NAME.search(node.name) or methods & _LOOKUPS:
                offences.append(f"{line}: class {node.name} is a dict that keeps entries its own way")
    for _node, target, value in _assignments(tree):
        target_name = _target_name(target)
        if target_name and _CACHE_NAME.search(target_name) and _is_dict(value):
            offences.append(f"{target.lineno}: a dict named {target_name}")
    memoised = {
        f"{name}:{qualname}"
        for qualname, function in _qualified_functions(tree)
        if any(_memo_decorator(decorator, from_functools) for decorator in function.decorator_list)
    }
    module_dicts = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for _node, target, value in _assignments(node)
        if isinstance(target, ast.Name) and _is_dict(value)
    }
    filled = {
        f"{name}:{cls.name}.{_target_name(target)}"
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and _CACHE_NAME.search(cls.name)
        for _node, target, value in _assignments(cls)
        if _is_dict(value)
    }
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            written = None
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                written = node.value
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in _FILLING_METHODS:
                written = node.func.value
            if isinstance(written, ast.Name) and written.id in module_dicts:
                filled.add(f"{name}:{written.id}")
    return sorted(offences, key=lambda offence: int(offence.split(":")[0])), memoised, filled


def _sources() -> list[Path]:
    return sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("worker/**/*.py")])


def test_no_code_keeps_a_cache_of_its_own():
    offenders: dict[str, list[str]] = {}
    memoised: set[str] = set()
    filled: set[str] = set()
    adapted: set[str] = set()
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name == CACHE_MODULE:
            continue
        offences, file_memoised, file_filled = _findings(name, path.read_text(encoding="utf-8"))
        for offence in list(offences):
            subclass = _DICT_SUBCLASS.match(offence)
            if subclass and f"{name}:{subclass.group(1)}" in ADAPTED_DICTS:
                offences.remove(offence)
                adapted.add(f"{name}:{subclass.group(1)}")
        if offences:
            offenders[name] = offences
        memoised |= file_memoised
        filled |= file_filled
    assert offenders == {}
    assert memoised - PURE_FUNCTIONS.keys() == set(), "memoised functions not listed as pure (use app.cache.Cache)"
    assert filled - REGISTRIES.keys() == set(), "dicts filled at run time (a cache: use app.cache.Cache)"
    assert PURE_FUNCTIONS.keys() - memoised == set() and REGISTRIES.keys() - filled == set(), "stale entries"
    assert ADAPTED_DICTS.keys() - adapted == set(), "stale entries"


def test_the_scan_finds_each_kind_of_hand_written_cache():
    source = """
import functools
from collections import OrderedDict
from functools import lru_cache as remember

_documents = {}

class Seen(dict):
    def get(self, key, default=None):
        return super().get(key, default)

class Sparse(dict):  # not a cache: a dict by another name
    pass

class Resolver:
    def __init__(self):
        self._cache = {}

class KeyCache:
    def __init__(self):
        self.signing = {}

@remember(maxsize=8)
def load(key):
    return key

@functools.cache
def read(key):
    return key

def keep(key, value):
    _documents[key] = value
"""
    offences, memoised, filled = _findings("x.py", source)
    assert [offence.split(": ", 1)[1] for offence in offences] == [
        "OrderedDict",
        "class Seen is a dict that keeps entries its own way",
        "a dict named _cache",
    ]
    assert memoised == {"x.py:load", "x.py:read"}
    assert filled == {"x.py:_documents", "x.py:KeyCache.signing"}
