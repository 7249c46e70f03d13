"""``pausemesh migrate``: apply the PostgreSQL schema explicitly, as a DDL-capable role.

The app never migrates on start; a deploy runs this once (concurrent runs are safe: one
applies, the others find the schema up to date). ``--grant-runtime-role`` also grants the
runtime role its least privileges. The URL is never printed (it may hold a password).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from pausemesh.cli.options import EXIT_REFUSED
from pausemesh.core.errors import SettingsError, StoreError
from pausemesh.stores.postgres.schema import DEFAULT_SCHEMA, POSTGRES_MIGRATIONS, quote_schema

__all__ = ("add_migrate_arguments", "run_migrate")


def add_migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url", help="PostgreSQL URL of a DDL-capable role (PAUSEMESH_DATABASE_URL)"
    )
    parser.add_argument(
        "--schema", help=f"schema name (PAUSEMESH_DATABASE_SCHEMA, default {DEFAULT_SCHEMA})"
    )
    parser.add_argument(
        "--grant-runtime-role",
        metavar="ROLE",
        help="also grant ROLE the runtime privileges (no DDL, DELETE or TRUNCATE)",
    )


def run_migrate(args: argparse.Namespace) -> None:
    url = args.database_url or os.environ.get("PAUSEMESH_DATABASE_URL")
    if not url:
        msg = "migrate needs --database-url or PAUSEMESH_DATABASE_URL"
        raise SettingsError(msg)
    schema = args.schema or os.environ.get("PAUSEMESH_DATABASE_SCHEMA") or DEFAULT_SCHEMA
    # Lower-cased like the app's settings do, so `migrate` and `serve` name the same schema.
    schema = schema.lower()
    try:
        quote_schema(schema)
    except ValueError as error:
        raise SettingsError(str(error)) from None
    from pausemesh.stores.postgres.migrate import grant_runtime_role, migrate  # noqa: PLC0415 - asyncpg loads only for this command

    try:
        report = asyncio.run(migrate(url, schema=schema))
        if args.grant_runtime_role:
            asyncio.run(grant_runtime_role(url, args.grant_runtime_role, schema=schema))
    except (StoreError, ValueError) as error:
        if isinstance(error, StoreError) and error.code == "STORE_UNAVAILABLE":
            raise  # cannot connect: a start-up failure, said by pausemesh.cli.failures (exit 2)
        code = getattr(error, "code", "INVALID_INPUT")
        print(f"pausemesh: migrate refused ({code}): {error}", file=sys.stderr)
        raise SystemExit(EXIT_REFUSED) from None
    latest = POSTGRES_MIGRATIONS[-1].version
    if report.applied:
        applied = ", ".join(str(v) for v in report.applied)
        print(f'schema "{schema}": applied migration(s) {applied}; now at version {latest}')
    else:
        print(f'schema "{schema}": already up to date at version {latest}')
    if args.grant_runtime_role:
        print(f'schema "{schema}": granted runtime privileges to {args.grant_runtime_role}')
