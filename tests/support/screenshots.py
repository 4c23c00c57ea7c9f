"""Screenshots of the hosted pages in headless Chromium, with layout and contrast checks.

Each page is shown at desktop and phone width, in light and dark colour schemes (emulated with
the DevTools `Emulation.setEmulatedMedia` command). Images go to `$TESSERA_ARTIFACTS_DIR` (CI keeps
it as an artefact) or `tests/artifacts/screenshots` (ignored by git).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VIEWPORTS = {"desktop": (1280, 900), "phone": (390, 844)}
SCHEMES = ("light", "dark")
MIN_TEXT_CONTRAST = 4.5

# The colour of an element and of the first opaque background behind it, as rgb() strings.
_COLOURS_JS = """
const element = arguments[0];
function opaque(colour) { return !/rgba\\(.*,\\s*0\\)$/.test(colour) && colour !== 'transparent'; }
let node = element, background = null;
while (node && node.nodeType === 1) {
  const colour = getComputedStyle(node).backgroundColor;
  if (opaque(colour)) { background = colour; break; }
  node = node.parentElement;
}
return [getComputedStyle(element).color, background || 'rgb(255, 255, 255)'];
"""


def artifacts_dir() -> Path:
    """Where screenshots are written; created on first use."""
    directory = Path(os.environ.get("TESSERA_ARTIFACTS_DIR") or REPO_ROOT / "tests" / "artifacts") / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def start_chromium():
    """A headless Chromium WebDriver for screenshots; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM_BINARY") or shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless", "--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage",
                     "--disable-gpu", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(
        service=Service(
            executable_path=os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
        ),  # fmt: skip
        options=options,
    )
    driver.set_page_load_timeout(30)
    return driver


def _channels(colour: str) -> tuple[float, float, float]:
    numbers = [float(part) for part in re.findall(r"[\d.]+", colour)[:3]]
    return numbers[0], numbers[1], numbers[2]


def _luminance(colour: str) -> float:
    def linear(channel: float) -> float:
        value = channel / 255
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    red, green, blue = _channels(colour)
    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two CSS rgb() colours."""
    lighter, darker = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def set_view(driver, viewport: str, scheme: str) -> None:
    width, height = VIEWPORTS[viewport]
    mobile = viewport == "phone"
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    )


def check_page(driver, name: str, viewport: str, scheme: str) -> Path:
    """Assert the layout (no horizontal overflow, readable text and errors) and save a screenshot."""
    from selenium.webdriver.common.by import By

    assert driver.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches") == (scheme == "dark")
    assert driver.execute_script("return document.readyState") == "complete"
    overflow = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert overflow[0] <= overflow[1], f"{name} {viewport} {scheme}: horizontal overflow {overflow}"
    card = driver.find_element(By.CSS_SELECTOR, "main.card")
    right = driver.execute_script("return arguments[0].getBoundingClientRect().right", card)
    assert right <= overflow[1], f"{name} {viewport} {scheme}: the card leaves the screen"
    checked = driver.find_elements(By.CSS_SELECTOR, ".error, h1, main p, #error-code")
    assert checked, f"{name}: nothing to check"
    for element in checked:
        foreground, background = driver.execute_script(_COLOURS_JS, element)
        ratio = contrast(foreground, background)
        assert ratio >= MIN_TEXT_CONTRAST, (
            f"{name} {viewport} {scheme}: {element.tag_name}.{element.get_attribute('class')} "
            f"{foreground} on {background} has contrast {ratio:.2f} < {MIN_TEXT_CONTRAST}"
        )
    path = artifacts_dir() / f"{name}-{viewport}-{scheme}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 0
    return path


def shoot_everywhere(driver, name: str, open_page: Callable[[], None]) -> list[Path]:
    """Open the page (fresh each time) at every viewport and scheme, check it and keep its images."""
    paths = []
    for viewport in VIEWPORTS:
        for scheme in SCHEMES:
            set_view(driver, viewport, scheme)
            open_page()
            paths.append(check_page(driver, name, viewport, scheme))
    print(f"screenshots of {name} in {artifacts_dir()}")
    return paths
