"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.native_client import build_client
from playwright.sync_api import Browser

from tests.support.browser import chromium


@pytest.fixture(name="browser", scope="module")
def browser_fixture() -> Iterator[Browser]:
    """Debian's headless Chromium, one per test module."""
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def client_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bench/lifecycle_client.c``, built with the machine's C compiler (the bench tests skip
    where there is none)."""
    return build_client(tmp_path_factory.mktemp("bench-client"))
