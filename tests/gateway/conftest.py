from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.gateway import GatewayCase
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres


@pytest.fixture(name="case", params=["sqlite", "postgres"])
async def case_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[GatewayCase]:
    """A gateway deployment on SQLite or on a fresh, migrated PostgreSQL schema."""
    if request.param == "sqlite":
        yield GatewayCase(tmp_path)
        return
    await require_postgres()
    schema = fresh_schema("pm_gateway")
    case = GatewayCase(tmp_path, database_url=DATABASE_URL, database_schema=schema)
    try:
        yield case
    finally:
        await drop_schema(schema)
