"""The home page at `/` says what the instance is and links where a newcomer goes next."""

from __future__ import annotations

import re


def test_the_home_page_links_docs_discovery_keys_claim_and_health(client):
    page = client.get("/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    html = page.get_data(as_text=True)
    links = dict(re.findall(r'<a href="([^"]+)" id="([a-z-]+)"', html))
    by_id = {link_id: href for href, link_id in links.items()}
    assert set(by_id) >= {"docs-link", "discovery-link", "jwks-link", "health-link"}
    issuer = re.search(r'<code id="issuer">([^<]+)</code>', html).group(1)
    assert by_id["discovery-link"] == f"{issuer}/.well-known/openid-configuration"
    for link_id in ("docs-link", "jwks-link", "health-link"):
        assert client.get(by_id[link_id]).status_code in (200, 503), link_id
    discovery = client.get("/.well-known/openid-configuration")
    assert discovery.get_json()["issuer"] == issuer
    if "claim-link" in by_id:
        assert client.get(by_id["claim-link"]).status_code == 200
