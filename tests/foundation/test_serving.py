"""The web server's factory: the application, with its start-up objects out of the collector's sight."""

from __future__ import annotations

import gc

from app.serving import web_app


def test_the_server_factory_freezes_what_start_up_built():
    gc.unfreeze()
    try:
        application = web_app()
        assert gc.get_freeze_count() > 10_000
        assert application.test_client().get("/healthz").status_code == 200
    finally:
        gc.unfreeze()
