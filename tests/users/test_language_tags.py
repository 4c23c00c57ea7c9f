"""Offline BCP 47 and ISO 3166-1 checks (pure module)."""

from __future__ import annotations

import pytest

from app.profile.formats import canonical_language_tag, is_country_code


@pytest.mark.parametrize(
    ("tag", "canonical"),
    [
        ("en", "en"), ("EN-us", "en-US"), ("zh-hant-tw", "zh-Hant-TW"), ("sr-Latn-RS", "sr-Latn-RS"),
        ("es-419", "es-419"), ("de-CH-1996", "de-CH-1996"), ("sl-rozaj-biske", "sl-rozaj-biske"),
        ("en-US-u-ca-gregory", "en-US-u-ca-gregory"), ("en-a-bbb-x-a-ccc", "en-a-bbb-x-a-ccc"),
        ("x-whatever", "x-whatever"), ("qaa", "qaa"), ("zh-yue-HK", "zh-yue-HK"), ("ast", "ast"),
        ("i-klingon", "i-klingon"), ("en-gb-oed", "en-GB-oed"), ("fr-Latn-FR-x-mine", "fr-Latn-FR-x-mine"),
        ("en-QM", "en-QM"),
    ],
)  # fmt: skip
def test_valid_tags_are_canonicalised(tag, canonical):
    assert canonical_language_tag(tag) == canonical


@pytest.mark.parametrize(
    "tag",
    ["", "e", "xx", "english", "abcd", "en-", "-en", "en--US", "en_US", "en-Xyzw", "en-US-US", "de-419-DE",
     "en-a", "en-a-bb-a-cc", "x", "x-", "en-x-toolongvalue", "sl-rozaj-rozaj", "en-999", "en-ZX", "ünï",
     "en-US " , "a" * 65, None, 5],
)  # fmt: skip
def test_invalid_tags_are_refused(tag):
    assert canonical_language_tag(tag) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("US", True),
        ("FR", True),
        ("fr", False),
        ("Fr", False),
        ("FR ", False),
        ("XX", False),
        ("USA", False),
        ("", False),
    ],  # fmt: skip
)
def test_countries(value, expected):
    assert is_country_code(value) is expected
