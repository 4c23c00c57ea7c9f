"""`tessera-admin`: the operator commands of `flask --app app`, always of the installed Tessera.

`flask --app app` imports `app` from the current directory first, so a local `app.py` would
answer instead; this entry point builds the application with `create_app` whatever the directory.
It lists Tessera's commands only: Flask's development commands (`run`, `shell`, `routes`) and the
extensions' own groups (`limiter`, `openapi`) are not an operator's.
"""

from __future__ import annotations

import os
from importlib.metadata import version

import click
from flask.cli import FlaskGroup

from app import create_app
from app.config import adopt_served_address

# Groups the extensions add to `app.cli`; plugins of the `flask.commands` entry point are never loaded.
_EXTENSION_COMMANDS = frozenset({"openapi"})


class _AdminGroup(FlaskGroup):
    """Flask's command group without its own commands, plugins and options, and Tessera's version."""

    def _load_plugin_commands(self) -> None:
        self._loaded_plugin_commands = True

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in super().list_commands(ctx) if name not in _EXTENSION_COMMANDS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return None if name in _EXTENSION_COMMANDS else super().get_command(ctx, name)


def main() -> None:
    """Run Tessera's operator commands (`tessera-admin db upgrade`, `tessera-admin clients ...`).

    Without BASE_URL or PORT they name the address the instance's web process last started with.
    """
    adopt_served_address(os.environ)
    group = _AdminGroup(
        name="tessera-admin",
        help="Operator commands of Tessera (the same as `flask --app app ...`, from any directory).",
        create_app=create_app,
        add_default_commands=False,
        add_version_option=False,
        load_dotenv=False,
        set_debug_flag=False,
    )
    # Which application, .env files and debug mode are not the operator's to choose here.
    group.params = [param for param in group.params if param.name not in {"app", "env_file", "debug"}]
    click.version_option(version("tessera"), prog_name="tessera-admin", message="%(prog)s %(version)s")(group)
    group.main(prog_name="tessera-admin")
