"""The real browser of the page tests: Debian's Chromium driven by Playwright (Playwright
never downloads a browser here)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


def browser_or_skip() -> Any:
    """Playwright's sync API with Debian's Chromium; under CI both must be there."""
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the playwright package is not installed (pip install -e '.[dev]')"
    if problem is None and not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        problem = f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser test must run under CI: {problem}")
        pytest.skip(problem)
    return sync_playwright


def chromium_path() -> str | None:
    """Where Chromium is: Debian's path, or the first on PATH."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
