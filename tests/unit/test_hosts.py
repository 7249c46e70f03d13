"""The one loopback rule (core.hosts): the bind check and the MCP URL policy agree on it."""

from __future__ import annotations

import pytest

from pausemesh.core.hosts import is_loopback_host


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "foo.localhost",
        "127.0.0.1",
        "127.0.0.1.",
        "127.9.8.7",
        "::1",
        "[::1]",
    ],
)
def test_loopback_names_and_addresses_are_loopback(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com", "::ffff:127.0.0.1", ""],  # noqa: S104 - the wildcard is the point
)
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)
