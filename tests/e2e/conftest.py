"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests.support.browser import chromium


@pytest.fixture(name="browser", scope="module")
def browser_fixture() -> Iterator[Browser]:
    """Debian's headless Chromium, one per test module."""
    with chromium() as browser:
        yield browser
