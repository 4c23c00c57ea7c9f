"""web3 costs about a second of CPU to import: the database backend (the default) never loads it, so
no web process, worker or operator command pays for it unless a chain is used."""

from __future__ import annotations

import subprocess
import sys


def test_the_application_starts_without_web3():
    probe = "import sys; from app import create_app; create_app(); print('web3' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.split()[-1] == "False", result.stdout
