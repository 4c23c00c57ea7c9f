"""The API browser's (Swagger UI) assets, served by the service itself so `/docs` works offline.

They come from the pinned `swagger-ui-bundle` package, never from a CDN.
"""

from __future__ import annotations

from flask import Blueprint, Response, send_from_directory
from swagger_ui_bundle import swagger_ui_path

ASSETS_URL = "/docs/assets/"
# The browser may keep them: a new package version is a new deployment, not a changed file.
_ASSETS_MAX_AGE = 24 * 3600

blp = Blueprint("docs_assets", __name__)


@blp.get(f"{ASSETS_URL}<path:filename>")
def swagger_ui_asset(filename: str) -> Response:
    """A file of the Swagger UI distribution (404 for anything else)."""
    return send_from_directory(swagger_ui_path, filename, max_age=_ASSETS_MAX_AGE)
