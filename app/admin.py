"""`tessera-admin`: the operator commands of `flask --app app`, always of the installed Tessera.

`flask --app app` imports `app` from the current directory first, so a local `app.py` would
answer instead; this entry point builds the application with `create_app` whatever the directory.
"""

from __future__ import annotations

from flask.cli import FlaskGroup

from app import create_app


def main() -> None:
    """Run Tessera's Flask command line (`tessera-admin db upgrade`, `tessera-admin clients ...`)."""
    group = FlaskGroup(
        name="tessera-admin",
        help="Operator commands of Tessera (the same as `flask --app app ...`, from any directory).",
        create_app=create_app,
        load_dotenv=False,
        set_debug_flag=False,
    )
    # Which application, .env files and debug mode are not the operator's to choose here.
    group.params = [param for param in group.params if param.name not in {"app", "env_file", "debug"}]
    group.main(prog_name="tessera-admin")
