"""``pausemesh gateway`` refuses to start on a bad config or a lock that does not match."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gateway import GatewayCase

# Each test starts several Python processes (gateway, upstream); on a loaded machine that is slow.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_a_bad_config_is_refused_with_every_error_listed(tmp_path: Path) -> None:
    case = GatewayCase(tmp_path)
    case.jobs[0]["business_key"] = "k:{a:>3}"
    case.jobs[0]["timeout_seconds"] = 1000
    case.write()
    done = case.cli("gateway", "--stdio", check=False)
    assert done.returncode == 2
    assert "GATEWAY_CONFIG_INVALID" in done.stderr
    assert "jobs[0].business_key: placeholder {a} takes no format or conversion" in done.stderr
    assert "jobs[0].timeout_seconds: must be between 0.1 and 300.0" in done.stderr


def test_the_gateway_refuses_to_start_without_a_lock_or_with_a_stale_one(tmp_path: Path) -> None:
    case = GatewayCase(tmp_path)
    case.write()
    missing = case.cli("gateway", "--stdio", check=False)
    pinned = case.cli("gateway", "pin")
    case.jobs[0]["tool"] = "lookup_invoice"
    case.write()
    stale = case.cli("gateway", "--stdio", check=False)
    assert pinned.stdout.splitlines()[0].startswith(
        "pinned create_invoice: invoices/create_invoice sha256:"
    )
    assert pinned.stdout.splitlines()[1] == f"wrote {tmp_path / 'gateway.lock.json'}"
    assert missing.returncode == 2
    assert "GATEWAY_LOCK_MISSING" in missing.stderr
    assert stale.returncode == 2
    assert "GATEWAY_LOCK_MISMATCH" in stale.stderr
    assert "job create_invoice is pinned to another upstream tool" in stale.stderr
