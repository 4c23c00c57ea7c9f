"""Agent keys kept per network (`--env`) in the user's config directory, readable by the owner only.

`$XDG_CONFIG_HOME/tessera/credentials.json` on Linux (`~/.config/...` without it), the
platform's application directory elsewhere (click's `get_app_dir`). The directory is made 0700 and
the file 0600, written whole (a temporary file renamed over it), so a crash never leaves half a key.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import click

FILE_NAME = "credentials.json"


def credentials_path() -> Path:
    """The credentials file of this user (it may not exist yet)."""
    return Path(click.get_app_dir("tessera")) / FILE_NAME


def _read(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{path}: unreadable ({exc}); remove it and log in again") from exc
    profiles = document.get("profiles") if isinstance(document, dict) else None
    return profiles if isinstance(profiles, dict) else {}


def _write(path: Path, profiles: dict) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    descriptor, temporary = tempfile.mkstemp(prefix=".credentials-", dir=path.parent)  # created 0600
    try:
        with os.fdopen(descriptor, "w") as file:
            json.dump({"profiles": profiles}, file, indent=2, sort_keys=True)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def stored_key(env: str) -> str | None:
    """The key stored for the network `env`, or None."""
    profile = _read(credentials_path()).get(env)
    key = profile.get("api_key") if isinstance(profile, dict) else None
    return key if isinstance(key, str) and key else None


def store_key(env: str, key: str) -> Path:
    """Keep `key` as the one of network `env` (replacing any); returns the file."""
    path = credentials_path()
    profiles = _read(path)
    profiles[env] = {"api_key": key}
    _write(path, profiles)
    return path


def remove_key(env: str) -> bool:
    """Forget the key of network `env`; False when none was stored. The file goes with its last key."""
    path = credentials_path()
    profiles = _read(path)
    if profiles.pop(env, None) is None:
        return False
    if profiles:
        _write(path, profiles)
    else:
        path.unlink(missing_ok=True)
    return True
