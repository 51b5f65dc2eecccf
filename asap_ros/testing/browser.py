"""A real headless Chromium (Debian's ``chromium``, driven by Playwright) on ``asap-ros view``
pages, and the screenshot checks the browser tests make.

Playwright cannot download its own browsers here, so it drives the system's ``chromium``
(``scripts/setup`` installs it). WebGL runs on SwiftShader, Chromium's software renderer.
The page may load nothing from outside this machine: every request to another host fails the
check (:attr:`ViewBrowser.outside_requests`).
"""

from __future__ import annotations

import io
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from asap_ros.core.errors import AsapError

CHROMIUM_ARGS = ("--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist", "--no-sandbox")
VIEWPORT = {"width": 1100, "height": 700}
SCENE_CROP = (0, 0, 680, 620)
"""(left, top, right, bottom) of the 3D scene in a screenshot: the control panel is on the
right, the orientation gizmo bottom left."""
SATURATED = 40
DARK = 100
CHANGED = 24
"""Channel difference above which a pixel counts as changed."""


BROWSER_SCHEDULING = ("chrt", "--idle", "0")
"""The browser runs only on CPU time nothing else wants (SCHED_IDLE, no privilege needed): on
this 2-core machine it shares the cores with the simulator and the control stack, where an
operator's browser runs on another computer. At nice 10, SwiftShader rendering the page took
enough of both cores to hold the deploy node's steps back by up to 46 ms (p99)."""


def chromium_executable() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise AsapError("Debian's chromium is not installed (scripts/setup installs it with apt-get)")
    return path


def idle_chromium(folder: Path) -> Path:
    """An executable in ``folder`` that runs Debian's chromium under :data:`BROWSER_SCHEDULING`."""
    wrapper = folder / "chromium-idle"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(BROWSER_SCHEDULING)} {chromium_executable()} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


class ViewBrowser:
    """One Chromium page on a view URL; use as a context manager."""

    def __init__(self, url: str, folder: Path, viewport: dict[str, int] | None = None) -> None:
        """``folder``: where the browser's launcher is written (a test's tmp_path)."""
        from playwright.sync_api import sync_playwright

        self.url = url
        self.outside_requests: list[str] = []
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(executable_path=idle_chromium(folder), args=list(CHROMIUM_ARGS))
            self.page = self._browser.new_page(viewport=viewport or VIEWPORT)
            self.page.on("request", self._check_host)
            self.renderer = ""
            self.page.on("console", self._note_renderer)
        except BaseException:
            self._playwright.stop()
            raise

    def _check_host(self, request: Any) -> None:
        parsed = urlparse(request.url)
        if parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in ("127.0.0.1", "localhost"):
            self.outside_requests.append(request.url)

    def _note_renderer(self, message: Any) -> None:
        if "WebGL support" in message.text:
            self.renderer = message.text

    def __enter__(self) -> ViewBrowser:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._browser.close()
        self._playwright.stop()

    def open(self, timeout_s: float = 120.0) -> None:
        """Load the page and wait until the view's status panel has arrived over its websocket."""
        self.page.goto(self.url, timeout=timeout_s * 1e3)
        self.page.locator('[data-view="mode"]').first.wait_for(timeout=timeout_s * 1e3)
        close = self.page.locator("button.mantine-Notification-closeButton")
        for i in range(close.count()):  # "software WebGL rendering detected": true, and in the way
            close.nth(i).click()

    def text(self, selector: str) -> str:
        return self.page.locator(selector).first.inner_text()

    def wait_text(self, selector: str, predicate: Callable[[str], bool], timeout_s: float) -> str:
        """The element's text once ``predicate`` holds; ``AssertionError`` with the last text if never."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text(selector)
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{selector} never satisfied the condition; last text {text!r}")
            time.sleep(0.1)

    def screenshot(self, path: Path, settle_s: float = 1.5) -> np.ndarray:
        """Save a PNG at ``path`` (after ``settle_s`` for software rendering) and return it as RGB."""
        from PIL import Image

        time.sleep(settle_s)
        png = self.page.screenshot(path=str(path))
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def scene_pixels(image: np.ndarray) -> np.ndarray:
    left, top, right, bottom = SCENE_CROP
    return image[top:bottom, left:right].astype(np.int16)


def robot_mask(image: np.ndarray) -> np.ndarray:
    """Scene pixels of the robot or its ghost: coloured (the temperature tints, the blue ghost)
    or dark (the G1's black parts). The white background and the grey grid are neither."""
    scene = scene_pixels(image)
    saturation = scene.max(axis=2) - scene.min(axis=2)
    return (saturation > SATURATED) | (scene.max(axis=2) < DARK)


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) around the mask, ``None`` if it is empty."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not len(rows):
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def region_change(first: np.ndarray, second: np.ndarray, box: tuple[int, int, int, int]) -> float:
    """Fraction of pixels in ``box`` (scene coordinates) that differ between two screenshots."""
    top, bottom, left, right = box
    a, b = scene_pixels(first)[top:bottom, left:right], scene_pixels(second)[top:bottom, left:right]
    return float((np.abs(a - b).max(axis=2) > CHANGED).mean())


def robot_region_change(first: np.ndarray, second: np.ndarray) -> tuple[tuple[int, int, int, int], float]:
    """The box around the robot in either screenshot and the fraction of its pixels that differ;
    ``AssertionError`` if either shows no robot."""
    boxes = [mask_box(robot_mask(image)) for image in (first, second)]
    assert None not in boxes, "no robot in the 3D view"
    box = (min(b[0] for b in boxes), max(b[1] for b in boxes), min(b[2] for b in boxes), max(b[3] for b in boxes))
    return box, region_change(first, second, box)
