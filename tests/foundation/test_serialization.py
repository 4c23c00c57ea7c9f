"""A `PlannedSchema` (app/serialization.py) dumps what marshmallow dumps: the same members, values,
types and order, for every kind of field and value, hooks and options included."""

from __future__ import annotations

import decimal
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import marshmallow as ma
import pytest

from app.serialization import PlannedSchema


class Shouting(ma.fields.String):
    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else str(value).upper()


class Inner(PlannedSchema):
    code = ma.fields.String()
    size = ma.fields.Integer()


class Everything(PlannedSchema):
    text = ma.fields.String()
    number = ma.fields.Integer()
    ratio = ma.fields.Float()
    flag = ma.fields.Boolean()
    amount = ma.fields.Decimal()
    counted = ma.fields.Integer(as_string=True)
    when = ma.fields.DateTime()
    loud = Shouting()
    renamed = ma.fields.String(data_key="renamedKey")
    elsewhere = ma.fields.String(attribute="other")
    defaulted = ma.fields.String(dump_default="fallback")
    made = ma.fields.Integer(dump_default=lambda: 7)
    tags = ma.fields.List(ma.fields.String())
    mapping = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer())
    raw = ma.fields.Dict()
    labels = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String())
    inner = ma.fields.Nested(Inner)
    inners = ma.fields.List(ma.fields.Nested(Inner))
    computed = ma.fields.Function(lambda obj: f"{getattr(obj, 'text', '')}!")
    method = ma.fields.Method("describe")
    constant = ma.fields.Constant("always")

    def describe(self, obj: Any) -> str:
        return type(obj).__name__

    @ma.pre_dump
    def _seen(self, obj: Any, **_kwargs: Any) -> Any:
        return obj

    @ma.post_dump(pass_original=True)
    def _original(self, data: dict, original: Any, **_kwargs: Any) -> dict:
        data["original_type"] = type(original).__name__
        return data

    @ma.post_dump(pass_collection=True)
    def _collection(self, data: Any, many: bool, **_kwargs: Any) -> Any:
        return {"items": data} if many else data


class ByAttribute(Everything):
    by_attribute = True


def _marshmallow(schema_class: type[ma.Schema], **options: Any) -> ma.Schema:
    """The same schema, serialised by marshmallow's own `Schema._serialize`."""
    reference = type(f"Reference{schema_class.__name__}", (schema_class,), {"_serialize": ma.Schema._serialize})
    return reference(**options)


FULL = {
    "text": "plain",
    "number": 3,
    "ratio": 0.5,
    "flag": True,
    "amount": decimal.Decimal("1.25"),
    "counted": 12,
    "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    "loud": "quiet",
    "renamed": "r",
    "other": "o",
    "defaulted": "given",
    "made": 1,
    "tags": ["a", 1],
    "mapping": {"k": "5"},
    "raw": {"nested": [1, {"x": None}]},
    "inner": {"code": 9, "size": "4"},
    "inners": [{"code": "c", "size": 2}, SimpleNamespace(code="d", size=3.0)],
}
ODD = {  # values of other types than their fields', which the fields convert
    "text": 12,
    "number": True,
    "ratio": 2,
    "flag": "yes",
    "amount": 3,
    "counted": "4",
    "when": None,
    "loud": None,
    "tags": ("x", "y"),
    "mapping": None,
}
SHAPED = {  # lists and dicts whose members their fields keep: copied, not converted one by one
    "tags": ["a", "b"],
    "mapping": {"k": 5, "j": None},
    "raw": {"any": ["thing"]},
    "labels": {"edu_username": "user_name"},
}
NULLS = {name: None for name in FULL}
OBJECTS = [FULL, ODD, SHAPED, NULLS, {}, {"text": "only"}]


@pytest.mark.parametrize("schema_class", [Everything, ByAttribute])
@pytest.mark.parametrize("options", [{}, {"only": ("text", "made", "inner")}, {"exclude": ("computed", "when")}])
def test_a_planned_dump_is_marshmallows(schema_class, options):
    planned, reference = schema_class(**options), _marshmallow(schema_class, **options)
    for values in OBJECTS:
        for obj in (values, SimpleNamespace(**values)):
            if schema_class is ByAttribute and isinstance(obj, dict):
                continue  # read by attribute only: a dict has none of them
            dumped, expected = planned.dump(obj), reference.dump(obj)
            assert dumped == expected
            assert list(dumped) == list(expected)
            assert [type(value) for value in dumped.values()] == [type(value) for value in expected.values()]
    objects = [SimpleNamespace(**values) for values in OBJECTS]
    assert planned.dump(objects, many=True) == reference.dump(objects, many=True)


def test_kept_values_are_those_their_fields_return_unchanged():
    planned, reference = Everything(), _marshmallow(Everything)
    obj = SimpleNamespace(number=True, ratio=1, text=b"bytes", flag=0)
    assert planned.dump(obj) == reference.dump(obj)
    assert planned.dump(obj)["number"] == 1 and type(planned.dump(obj)["number"]) is int
    assert type(planned.dump(obj)["ratio"]) is float


def test_a_kept_list_or_dict_is_copied():
    dumped = Everything().dump(SHAPED)
    for name in ("tags", "mapping", "raw", "labels"):
        assert dumped[name] == SHAPED[name] and dumped[name] is not SHAPED[name]
