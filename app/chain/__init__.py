"""The agent registry on an EVM chain (see docs/chain.md).

py_ecc, which eth-account (and so web3) imports, raises the interpreter's recursion limit to 100,000
when it is first imported. With that limit a deeply nested JSON body overflows the C stack and kills
the process instead of being refused as too deep (`app.http`). It is imported here, before any module
of this package reaches web3, and the limit is put back: to what it was, or to CPython's own when
py_ecc came in before this package (a test importing web3 first).
"""

import importlib as _importlib
import sys as _sys

_CPYTHON_LIMIT = 1000
_limit = _CPYTHON_LIMIT if "py_ecc" in _sys.modules else _sys.getrecursionlimit()
_importlib.import_module("py_ecc")
_sys.setrecursionlimit(_limit)
