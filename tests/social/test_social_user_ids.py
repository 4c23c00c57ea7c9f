"""User ids in social paths that cannot name a user are refused as 422 before any query."""

from __future__ import annotations

import pytest

IMPOSSIBLE_USER_IDS = ["0", "-1", "abc", str(2**31), str(10**20)]


def social_request(client, master, method: str, path: str):
    if method == "POST":
        return client.post(path, json={"return_to": "https://tenant.example/back"}, headers=master.headers)
    return client.open(path, method=method, headers=master.headers)


@pytest.mark.parametrize("user_id", IMPOSSIBLE_USER_IDS)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/user/{user_id}/social"),
        ("GET", "/v1/user/{user_id}/social_data"),
        ("DELETE", "/v1/user/{user_id}/social/platform_a"),
        ("POST", "/v1/user/{user_id}/social/platform_b/link"),
    ],
)
def test_impossible_user_id_is_a_422_naming_the_field(client, master, method: str, path: str, user_id: str) -> None:
    answer = social_request(client, master, method, path.format(user_id=user_id))

    assert answer.status_code == 422, answer.get_data(as_text=True)
    assert answer.mimetype == "application/problem+json"
    assert answer.json["code"] == "validation_failed"
    assert "user_id" in answer.json["errors"]


def test_largest_possible_user_id_is_an_ordinary_404(client, master) -> None:
    answer = client.get(f"/v1/user/{2**31 - 1}/social", headers=master.headers)

    assert answer.status_code == 404
    assert answer.mimetype == "application/problem+json"


def test_user_id_parameter_is_documented_as_a_bounded_integer(client) -> None:
    paths = client.get("/openapi.json").json["paths"]
    for path in (
        "/v1/user/{user_id}/social",
        "/v1/user/{user_id}/social_data",
        "/v1/user/{user_id}/social/{platform}",
        "/v1/user/{user_id}/social/{platform}/link",
    ):
        parameters = [p for p in paths[path]["parameters"] if p["name"] == "user_id"]
        assert parameters and parameters[0]["schema"] == {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
