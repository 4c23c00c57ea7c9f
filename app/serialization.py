"""Schemas whose dump is planned once: the same output as marshmallow's, in a fraction of its time.

Marshmallow serialises each member through several calls (the field's `serialize`, `get_value`,
the schema's accessor, the field's `_serialize`), some microseconds a member: a page of twenty
sub-clients of forty members each spent more CPU there than on the rest of its request. A
`PlannedSchema` walks its dump fields from a plan made at its first dump and keeps a value that
its field's conversion would return unchanged (a `str` or `None` for a `String`, an `int` or `None`
for an `Integer`, likewise for `Boolean` and `Float`), and copies a list or dict whose members its
`List` or `Dict` field would keep likewise (a list of `str` under `List(String())`); every other
value goes through the field's own `_serialize`, as marshmallow would send it. Hooks (`pre_dump`, `post_dump`), `only`,
`exclude`, `data_key`, `attribute`, `dump_default` and the schema's `get_attribute` behave as in
marshmallow; tests/foundation/test_serialization.py compares the two dumps. A schema whose objects
are read by attribute only (ORM objects and rows alike, never by key) says so with
`by_attribute = True` rather than with a `get_attribute` of its own: the plan then reads with the
builtin `getattr`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import marshmallow as ma
from marshmallow.utils import missing

_NONE = type(None)


class _Step(NamedTuple):
    key: str
    name: str
    attribute: str
    reads_attribute: bool
    kept: tuple[type, ...]
    field: ma.fields.Field
    convert: Callable[[Any, str, Any], Any]


def _kept_types(field: ma.fields.Field) -> tuple[type, ...]:
    """The types whose values `field._serialize` returns unchanged (of that very type), else ()."""
    convert = type(field)._serialize
    if convert is ma.fields.String._serialize:
        return (str, _NONE)
    if convert is ma.fields.Boolean._serialize:
        return (bool, _NONE)
    number = isinstance(field, ma.fields.Number) and not field.as_string
    if number and convert is ma.fields.Number._serialize and type(field)._format_num is ma.fields.Number._format_num:
        return (field.num_type, _NONE) if field.num_type in (int, float) else ()
    return ()


def _conversion(field: ma.fields.Field) -> Callable[[Any, str, Any], Any]:
    """`field._serialize`, or for a `List` or `Dict` whose member fields keep their values, a copy
    of a list or dict holding only such values (what `_serialize` would build), else `_serialize`."""
    convert = field._serialize
    if type(field)._serialize is ma.fields.List._serialize:
        members = _kept_types(field.inner)

        def copy_list(value: Any, name: str, obj: Any) -> Any:
            if type(value) is list and all(type(member) in members for member in value):
                return list(value)
            return convert(value, name, obj)

        return copy_list if members else convert
    if type(field)._serialize is ma.fields.Mapping._serialize and field.mapping_type is dict:
        keys = _kept_types(field.key_field) if field.key_field is not None else None
        values = _kept_types(field.value_field) if field.value_field is not None else None
        if keys == () or values == ():
            return convert

        def copy_dict(value: Any, name: str, obj: Any) -> Any:
            if type(value) is dict and all(
                (keys is None or type(key) in keys) and (values is None or type(member) in values)
                for key, member in value.items()
            ):
                return dict(value)
            return convert(value, name, obj)

        return copy_dict
    return convert


class PlannedSchema(ma.Schema):
    """A schema dumped from a plan of its fields (see the module); load and validation are marshmallow's."""

    by_attribute = False

    def get_attribute(self, obj: Any, attr: str, default: Any) -> Any:
        if self.by_attribute:
            return getattr(obj, attr, default)
        return super().get_attribute(obj, attr, default)

    def _serialize(self, obj: Any, *, many: bool = False) -> Any:
        if many and obj is not None:
            return [self._serialize(item) for item in obj]
        plan = self.__dict__.get("_dump_plan")
        if plan is None:
            plan = self.__dict__["_dump_plan"] = self._make_plan()
        get = getattr if self.by_attribute else self.get_attribute
        answer = self.dict_class()
        for key, name, attribute, reads_attribute, kept, field, convert in plan:
            if not reads_attribute:  # a `Function` or `Method` field computes its value from the object
                answer[key] = field._serialize(None, name, obj)
                continue
            value = get(obj, attribute, missing)
            if value is missing:
                default = field.dump_default
                value = default() if callable(default) else default
                if value is missing:
                    continue
            answer[key] = value if type(value) in kept else convert(value, name, obj)
        return answer

    def _make_plan(self) -> tuple[_Step, ...]:
        return tuple(
            _Step(
                key=field.data_key if field.data_key is not None else name,
                name=name,
                attribute=field.attribute if field.attribute is not None else name,
                reads_attribute=field._CHECK_ATTRIBUTE,
                kept=_kept_types(field),
                field=field,
                convert=_conversion(field),
            )
            for name, field in self.dump_fields.items()
        )
