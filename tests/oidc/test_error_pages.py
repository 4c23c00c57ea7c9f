"""Error pages help the developer too; browsers get HTML 404/405 while API clients keep problem+json."""

from __future__ import annotations

import re

import pytest

from tests.support.oidc import authorize_query

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def _details(html: str) -> tuple[str, str]:
    code = re.search(r'<code id="error-code">([^<]+)</code>', html).group(1)
    detail = re.search(r'<span id="error-detail">([^<]+)</span>', html).group(1)
    return code, detail


def test_unregistered_redirect_uri_names_the_parameter_and_never_redirects(client, tenant):
    answer = client.get(authorize_query(tenant, redirect_uri="https://elsewhere.example/cb"))
    assert answer.status_code == 400 and "Location" not in answer.headers
    html = answer.get_data(as_text=True)
    assert "elsewhere.example" not in html
    assert _details(html) == (
        "invalid_request",
        "redirect_uri is not registered for this client (it must equal one registered URI exactly).",
    )


@pytest.mark.parametrize(
    ("overrides", "code", "detail"),
    [
        ({"client_id": "987654321"}, "invalid_client", "client_id is missing or names no active client."),
        ({"redirect_uri": ""}, "invalid_request", "redirect_uri is missing."),
    ],
)
def test_other_page_errors_carry_a_code_and_the_parameter(client, tenant, overrides, code, detail):
    answer = client.get(authorize_query(tenant, **overrides))
    assert answer.status_code == 400 and "Location" not in answer.headers
    assert _details(answer.get_data(as_text=True)) == (code, detail)


def test_expired_sign_in_page_says_why(client):
    answer = client.get("/v1/openidc/login?request=nothing-like-this")
    assert _details(answer.get_data(as_text=True))[0] == "request_expired"


def test_browsers_get_an_html_404_and_405(client):
    missing = client.get("/no/such/page", headers={"Accept": BROWSER_ACCEPT})
    assert missing.status_code == 404 and missing.mimetype == "text/html"
    assert _details(missing.get_data(as_text=True)) == ("not_found", "No page or endpoint answers /no/such/page.")
    assert "default-src 'none'" in missing.headers["Content-Security-Policy"]
    wrong = client.delete("/v1/openidc/authorize", headers={"Accept": BROWSER_ACCEPT})
    assert wrong.status_code == 405 and wrong.mimetype == "text/html"
    assert "GET" in wrong.headers["Allow"]
    assert _details(wrong.get_data(as_text=True))[0] == "method_not_allowed"


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "application/problem+json"])
def test_api_clients_keep_problem_json(client, accept):
    headers = {"Accept": accept} if accept else {}
    assert client.get("/no/such/page", headers=headers).mimetype == "application/problem+json"
    assert client.delete("/v1/openidc/authorize", headers=headers).mimetype == "application/problem+json"
