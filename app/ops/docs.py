"""The API browser's (Swagger UI) assets, served by the service itself so `/docs` works offline, and
the site's icon at the address every browser asks for (`/favicon.ico`).

The assets come from the pinned `swagger-ui-bundle` package, never from a CDN; `/docs` itself is
flask-smorest's page, its template `app/templates/swagger_ui.html` (a phone's viewport, `docs.css`).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, send_from_directory
from swagger_ui_bundle import swagger_ui_path

ASSETS_URL = "/docs/assets/"
# The browser may keep them: a new package version is a new deployment, not a changed file.
_ASSETS_MAX_AGE = 24 * 3600

blp = Blueprint("docs_assets", __name__)


@blp.get(f"{ASSETS_URL}<path:filename>")
def swagger_ui_asset(filename: str) -> Response:
    """A file of the Swagger UI distribution (404 for anything else)."""
    return send_from_directory(swagger_ui_path, filename, max_age=_ASSETS_MAX_AGE)


@blp.get("/favicon.ico")
def favicon() -> Response:
    """The site's icon (`app/static/favicon.ico`), which browsers ask for beside every page."""
    return send_from_directory(current_app.static_folder, "favicon.ico", max_age=_ASSETS_MAX_AGE,
                               mimetype="image/vnd.microsoft.icon")  # fmt: skip
