"""The interpreter's recursion limit stays where Python sets it once the chain libraries are loaded:
`app.http` refuses JSON nested deeper than that limit (400), and a raised one (py_ecc sets 100,000)
lets such a body overflow the C stack and kill the process instead."""

from __future__ import annotations

import subprocess
import sys


def test_the_chain_libraries_leave_the_recursion_limit_alone():
    for first in ("app.chain", "web3"):  # the application's order, and a test's that imports web3 first
        probe = (
            f"import sys; before = sys.getrecursionlimit(); import {first}; import app.chain, web3, eth_account; "
            "from app.chain import registry, transactions, typed_data; print(before, sys.getrecursionlimit())"
        )
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
        before, after = result.stdout.split()
        assert after == before, (first, result.stdout)


def test_a_deeply_nested_body_is_refused_after_the_chain_libraries_are_loaded():
    probe = (
        "import json, app.chain, web3; from app.http import parse_json_body\n"
        "try:\n"
        "    parse_json_body(b'[' * 200000 + b']' * 200000)\n"
        "except json.JSONDecodeError as refused:\n"
        "    print('refused', refused.msg)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "refused JSON nested too deeply", result.stdout
