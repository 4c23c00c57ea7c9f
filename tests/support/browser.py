"""A real headless Chromium for the hosted pages, the application served to it over HTTP, and
waiting on the browser without racing its navigation."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webelement import WebElement
from werkzeug.serving import make_server

CHROMIUM = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def headless_chromium(window_size: str = "1024,900") -> webdriver.Chrome:
    """Debian's Chromium, headless, at `window_size` ("width,height"); the caller quits it."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={window_size}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


@contextmanager
def application_served(session_app, **config: object) -> Iterator[str]:
    """A second application on a loopback port, named `http://localhost:<port>` as the README names
    the service (its BASE_URL and issuer), with the sign-in and token limits out of reach and `config`
    on top; yields its URL. It shares the session application's rate-limit keys, and the Celery app
    stays the session's."""
    from app import create_app
    from app.extensions import celery

    holder: dict = {}
    server = make_server("127.0.0.1", 0, lambda environ, start: holder["app"](environ, start), threaded=True)
    url = f"http://localhost:{server.server_port}"
    holder["app"] = create_app(
        {
            "TESTING": True,
            "BASE_URL": url,
            "OIDC_ISSUER": url,
            "OIDC_LOGIN_RATE_LIMIT": "100000 per minute",
            "OIDC_TOKEN_RATE_LIMIT": "100000 per minute",
            "OIDC_KEY_CACHE_SECONDS": 0,
            "RATELIMIT_KEY_PREFIX": session_app.config["RATELIMIT_KEY_PREFIX"],
            **config,
        }
    )
    celery.flask_app = session_app  # create_app rebinds the shared Celery app; the session app stays its owner
    thread = threading.Thread(target=server.serve_forever, name=f"served-{server.server_port}", daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        thread.join(timeout=5)


def page_left(old_element: WebElement) -> Callable[[object], bool]:
    """A WebDriverWait condition: true once `old_element`'s document has been replaced.

    Selenium's `staleness_of` knows only StaleElementReferenceException, but Chromium may instead
    answer "Node with given id does not belong to the document" while the next page loads; both
    mean the old page is gone.
    """

    def left(_driver: object) -> bool:
        try:
            old_element.is_enabled()
        except (StaleElementReferenceException, WebDriverException):
            return True
        return False

    return left
