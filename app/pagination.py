"""Pagination of lists (design section 2): the query arguments, the envelope, and one page of a query."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import marshmallow as ma
from sqlalchemy import Select, func, select

from app.extensions import db

MAX_PAGE = 2**31 - 1


@dataclass(frozen=True)
class Page:
    """One page of a list, with the envelope members of design section 2."""

    data: Sequence[Any]
    per_page: int
    current_page: int
    total_pages: int


def paginate(statement: Select, page: int, per_page: int) -> Page:
    """Run `statement` (already ordered) for one page; `total_pages` is 0 for an empty list."""
    total = db.session.scalar(select(func.count()).select_from(statement.order_by(None).subquery())) or 0
    items = db.session.execute(statement.limit(per_page).offset((page - 1) * per_page)).scalars().all()
    return page_of(items, total, page, per_page)


def page_of(items: Sequence[Any], total: int, page: int, per_page: int) -> Page:
    """Page `page` of a list of `total` items, holding `items`; `total_pages` is 0 for an empty list."""
    return Page(data=items, per_page=per_page, current_page=page, total_pages=math.ceil(total / per_page))


class PageArgs(ma.Schema):
    """The `page` and `per_page` query arguments of every list."""

    page = ma.fields.Integer(
        load_default=1, validate=ma.validate.Range(min=1, max=MAX_PAGE), metadata={"description": "Page number, > 0."}
    )
    per_page = ma.fields.Integer(
        load_default=20,
        validate=ma.validate.Range(min=1, max=99),
        metadata={"description": "Items per page, 0 < per_page < 100."},
    )


class PageMeta(ma.Schema):
    """The envelope members of a page; a list schema adds its `data`."""

    per_page = ma.fields.Integer(required=True)
    current_page = ma.fields.Integer(required=True)
    total_pages = ma.fields.Integer(required=True, metadata={"description": "0 when the list is empty."})
