"""The home page at `/`: what this instance is and where to go next, for a person with a browser."""

from __future__ import annotations

from flask import Blueprint, Response, render_template, request

from app.agents.settings import AgentSettings
from app.db import read_only
from app.oidc.account import ACCOUNT_PAGES, find_account
from app.oidc.pages import SESSION_COOKIE
from app.oidc.settings import OidcSettings
from app.settings import current
from app.web.pages import page_security_headers

blp = Blueprint("home", __name__, template_folder="templates")

_HEADERS = page_security_headers(
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


@blp.get("/")
@read_only
def home() -> Response:
    """A sign-in link, or the signed-in person's account pages; then the API documentation, OpenID
    discovery, the signing keys, the claim page and health."""
    issuer = current(OidcSettings).issuer.rstrip("/")
    agents = current(AgentSettings)
    signed_in = find_account(request.cookies.get(SESSION_COOKIE))
    html = render_template(
        "home/home.html",
        discovery_url=f"{issuer}/.well-known/openid-configuration",
        issuer=issuer,
        testnet=agents.is_testnet,
        network_url=agents.network_url,
        signed_in_as=signed_in.user.email_address if signed_in is not None else None,
        account_pages=ACCOUNT_PAGES,
    )
    response = Response(html, mimetype="text/html")
    response.headers.update(_HEADERS)
    # Whether the browser is signed in is part of the answer: never kept by a cache.
    response.headers["Cache-Control"] = "no-store"
    return response
