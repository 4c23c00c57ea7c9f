"""Direct row counts, to prove what a refused request did not write."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select


def row_count(app, model: Any, *criteria: Any) -> int:
    """How many rows of `model` match `criteria` (read in its own application context)."""
    from app.extensions import db

    with app.app_context():
        count = db.session.scalar(select(func.count()).select_from(model).where(*criteria))
        db.session.rollback()
        return count
