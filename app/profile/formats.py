"""Offline checks of profile formats: BCP 47 language tags and ISO 3166-1 alpha-2 countries.

Pure module (no Flask). Language, script and country subtags are checked against the ISO
tables shipped with `pycountry`, so no network is needed. Each `canonical_*` function returns the
value in its canonical letter case, or None when the value is not valid.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pycountry

GENDERS = ("male", "female", "non_binary", "other", "prefer_not_to_say")
EMPLOYMENT_STATUSES = (
    "employed",
    "self_employed",
    "unemployed",
    "student",
    "retired",
    "homemaker",
    "unable_to_work",
    "prefer_not_to_say",
)
MARITAL_STATUSES = (
    "single",
    "married",
    "domestic_partnership",
    "separated",
    "divorced",
    "widowed",
    "prefer_not_to_say",
)
EDUCATION_LEVELS = (
    "none",
    "primary",
    "secondary",
    "high_school",
    "vocational",
    "associate",
    "bachelor",
    "master",
    "doctorate",
    "prefer_not_to_say",
)
HOUSEHOLD_INCOMES = (
    "0-24999",
    "25000-49999",
    "50000-74999",
    "75000-99999",
    "100000-149999",
    "150000-199999",
    "200000-",
)

# RFC 5646 section 2.2.8: tags registered before the current syntax, valid as whole tags.
_GRANDFATHERED = {
    tag.lower(): tag
    for tag in (
        "en-GB-oed",
        "i-ami",
        "i-bnn",
        "i-default",
        "i-enochian",
        "i-hak",
        "i-klingon",
        "i-lux",
        "i-mingo",
        "i-navajo",
        "i-pwn",
        "i-tao",
        "i-tay",
        "i-tsu",
        "sgn-BE-FR",
        "sgn-BE-NL",
        "sgn-CH-DE",
        "art-lojban",
        "cel-gaulish",
        "no-bok",
        "no-nyn",
        "zh-guoyu",
        "zh-hakka",
        "zh-min",
        "zh-min-nan",
        "zh-xiang",
    )
}
# UN M.49 area codes that the IANA language subtag registry lists as regions.
_M49_REGIONS = frozenset(
    {
        "001",
        "002",
        "003",
        "005",
        "009",
        "011",
        "013",
        "014",
        "015",
        "017",
        "018",
        "019",
        "021",
        "029",
        "030",
        "034",
        "035",
        "039",
        "053",
        "054",
        "057",
        "061",
        "142",
        "143",
        "145",
        "150",
        "151",
        "154",
        "155",
        "202",
        "419",
    }
)
_ALPHA = re.compile(r"^[a-z]+$")
_ALNUM = re.compile(r"^[a-z0-9]+$")
_DIGITS = re.compile(r"^[0-9]+$")


@lru_cache(maxsize=1)
def _language_codes() -> frozenset[str]:
    codes: set[str] = set()
    for language in pycountry.languages:
        for attribute in ("alpha_2", "alpha_3", "bibliographic"):
            value = getattr(language, attribute, None)
            if value:
                codes.add(value.lower())
    for family in pycountry.language_families:
        codes.add(family.alpha_3.lower())
    return frozenset(codes)


@lru_cache(maxsize=1)
def _script_codes() -> frozenset[str]:
    return frozenset(script.alpha_4.lower() for script in pycountry.scripts)


@lru_cache(maxsize=1)
def _country_codes() -> frozenset[str]:
    return frozenset(country.alpha_2 for country in pycountry.countries)


@lru_cache(maxsize=1)
def _region_codes() -> frozenset[str]:
    historic = {country.alpha_2 for country in pycountry.historic_countries if len(country.alpha_2) == 2}
    return _country_codes() | frozenset(historic)


def _is_private_language(subtag: str) -> bool:
    return len(subtag) == 3 and "qaa" <= subtag <= "qtz"


def _is_private_region(subtag: str) -> bool:
    upper = subtag.upper()
    return upper in {"AA", "ZZ"} or "QM" <= upper <= "QZ" or "XA" <= upper <= "XZ"


def _is_private_script(subtag: str) -> bool:
    return "qaaa" <= subtag <= "qabx"


def country_codes() -> list[str]:
    """Every ISO 3166-1 alpha-2 code, upper case, sorted."""
    return sorted(_country_codes())


def is_country_code(value: str) -> bool:
    """Whether `value` is exactly an ISO 3166-1 alpha-2 code in upper case (no other spelling)."""
    return value in _country_codes()


def canonical_language_tag(value: str) -> str | None:
    """The BCP 47 (RFC 5646) tag in canonical case, or None if it is malformed or unregistered.

    Language, extended language, script and region subtags must exist in the ISO tables;
    variants, extensions and private use subtags are checked for syntax and duplicates only.
    """
    if not isinstance(value, str) or not 1 <= len(value) <= 64 or not value.isascii():
        return None
    lowered = value.lower()
    if lowered in _GRANDFATHERED:
        return _GRANDFATHERED[lowered]
    subtags = lowered.split("-")
    if any(not subtag or not _ALNUM.fullmatch(subtag) for subtag in subtags):
        return None
    if subtags[0] == "x":
        return lowered if _private_use_ok(subtags[1:]) else None
    return _parse_langtag(subtags)


def _private_use_ok(rest: list[str]) -> bool:
    return bool(rest) and all(1 <= len(subtag) <= 8 for subtag in rest)


def _parse_langtag(subtags: list[str]) -> str | None:
    out: list[str] = []
    index = 0
    language = subtags[0]
    if not _ALPHA.fullmatch(language) or not (2 <= len(language) <= 3):
        # 4-letter subtags are reserved and 5-8 letter languages are not in use.
        return None
    if language not in _language_codes() and not _is_private_language(language):
        return None
    out.append(language)
    index = 1
    extlangs = 0
    while index < len(subtags) and len(subtags[index]) == 3 and _ALPHA.fullmatch(subtags[index]):
        if extlangs == 3 or subtags[index] not in _language_codes():
            return None
        out.append(subtags[index])
        extlangs += 1
        index += 1
    if index < len(subtags) and len(subtags[index]) == 4 and _ALPHA.fullmatch(subtags[index]):
        script = subtags[index]
        if script not in _script_codes() and not _is_private_script(script):
            return None
        out.append(script.title())
        index += 1
    if index < len(subtags):
        region = subtags[index]
        if len(region) == 2 and _ALPHA.fullmatch(region):
            if region.upper() not in _region_codes() and not _is_private_region(region):
                return None
            out.append(region.upper())
            index += 1
        elif len(region) == 3 and _DIGITS.fullmatch(region):
            if region not in _M49_REGIONS:
                return None
            out.append(region)
            index += 1
    variants: set[str] = set()
    while index < len(subtags) and _is_variant(subtags[index]):
        if subtags[index] in variants:
            return None
        variants.add(subtags[index])
        out.append(subtags[index])
        index += 1
    singletons: set[str] = set()
    while index < len(subtags) and len(subtags[index]) == 1 and subtags[index] != "x":
        singleton = subtags[index]
        if singleton in singletons:
            return None
        singletons.add(singleton)
        out.append(singleton)
        index += 1
        start = index
        while index < len(subtags) and 2 <= len(subtags[index]) <= 8:
            out.append(subtags[index])
            index += 1
        if index == start:
            return None
    if index < len(subtags) and subtags[index] == "x":
        if not _private_use_ok(subtags[index + 1 :]):
            return None
        out.extend(subtags[index:])
        index = len(subtags)
    if index != len(subtags):
        return None
    return "-".join(out)


def _is_variant(subtag: str) -> bool:
    return (5 <= len(subtag) <= 8) or (len(subtag) == 4 and subtag[0].isdigit())
