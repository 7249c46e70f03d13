"""The start-up advice of ``serve --workers N`` about connections queued at a dying worker."""

from __future__ import annotations

from pathlib import Path

from pausemesh.serving.workers import migration_advice


def test_workers_advise_turning_on_queue_migration_when_the_kernel_resets_queued_connections(
    tmp_path: Path,
) -> None:
    setting = tmp_path / "tcp_migrate_req"
    setting.write_text("0\n")
    advice = migration_advice(setting)
    assert advice is not None
    assert "sysctl -w net.ipv4.tcp_migrate_req=1" in advice


def test_no_advice_when_queue_migration_is_on_or_the_setting_is_not_there(tmp_path: Path) -> None:
    setting = tmp_path / "tcp_migrate_req"
    setting.write_text("1\n")
    assert migration_advice(setting) is None
    assert migration_advice(tmp_path / "absent") is None
