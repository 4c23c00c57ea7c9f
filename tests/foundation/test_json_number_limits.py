"""A JSON body holding an integer longer than Python converts (4300 digits) is malformed JSON (400),
on every endpoint that reads a JSON body, and never a server fault."""

from __future__ import annotations

import re
import sys

import pytest

from tests.support.problems import assert_problem

DIGITS = sys.get_int_max_str_digits() + 1
NUMBER = "7" * DIGITS
BODY = f'{{"address": {NUMBER}, "verifiableCredential": {NUMBER}, "delay_ms": 1}}'


@pytest.mark.parametrize(
    "path",
    ["/api/auth/challenge", "/api/auth/verify", "/v1/vc/verify", "/credentials/verify", "/v1/jobs/canary"],
)
def test_an_over_long_integer_is_malformed_json(client, master, path):
    response = client.post(path, data=BODY, content_type="application/json", headers=master.headers)

    body = assert_problem(response, 400, "malformed_json")
    assert f"more than {DIGITS - 1} digits" in body["detail"]


def test_no_endpoint_taking_a_body_answers_it_with_a_fault(app, client, master):
    writes = [
        (rule, method)
        for rule in app.url_map.iter_rules()
        for method in sorted((rule.methods or set()) & {"POST", "PUT", "PATCH"})
    ]
    assert len(writes) > 20
    for rule, method in writes:
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda match: "1", rule.rule)
        response = client.open(path, method=method, data=BODY, content_type="application/json", headers=master.headers)
        assert response.status_code < 500, (method, rule.rule, response.status_code, response.get_data()[:300])
