"""Waiting on a real browser without racing its navigation."""

from __future__ import annotations

from collections.abc import Callable

from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.remote.webelement import WebElement


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
