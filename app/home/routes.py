"""The home page at `/`: what this instance is and where to go next, for a person with a browser."""

from __future__ import annotations

from flask import Blueprint, Response, render_template

from app.agents.settings import AgentSettings
from app.oidc.settings import OidcSettings
from app.settings import current
from app.web.pages import page_security_headers

blp = Blueprint("home", __name__, template_folder="templates")

_HEADERS = page_security_headers(
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


@blp.get("/")
def home() -> Response:
    """Links to the API documentation, OpenID discovery, the signing keys, the claim page and health."""
    issuer = current(OidcSettings).issuer.rstrip("/")
    agents = current(AgentSettings)
    html = render_template(
        "home/home.html",
        discovery_url=f"{issuer}/.well-known/openid-configuration",
        issuer=issuer,
        testnet=agents.is_testnet,
        network_url=agents.network_url,
    )
    response = Response(html, mimetype="text/html")
    response.headers.update(_HEADERS)
    return response
