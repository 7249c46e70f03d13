"""What the commands share: their error and exit codes, the server, store and gateway config
flags, and the settings a command line names."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Final

from pausemesh.core.errors import GatewayError, PauseMeshError, StoreError
from pausemesh.settings import Settings, load_settings

__all__ = (
    "EXIT_INTERRUPTED",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "CliError",
    "add_config_arguments",
    "add_server_arguments",
    "add_store_arguments",
    "ledger_storage",
    "refusal",
    "run_refusing",
    "settings_from",
)

# The command ran and was refused, or found nothing to show.
EXIT_REFUSED: Final = 1
# Usage, settings, configuration or a store the user must fix first.
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130


class CliError(Exception):
    """A startup problem the user can fix; printed without a traceback."""


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the commands serving the HTTP API (``serve``, ``demo``)."""
    parser.add_argument("--host", help="bind address (PAUSEMESH_HOST, default 127.0.0.1)")
    parser.add_argument("--port", help="TCP port (PAUSEMESH_PORT, default 8787)")
    parser.add_argument(
        "--database-path",
        help="SQLite file (PAUSEMESH_DATABASE_PATH, default ./data/pausemesh.db)",
    )
    parser.add_argument(
        "--database-url", help="PostgreSQL URL; wins over --database-path (PAUSEMESH_DATABASE_URL)"
    )
    parser.add_argument(
        "--database-schema",
        help="PostgreSQL schema (PAUSEMESH_DATABASE_SCHEMA, default pausemesh)",
    )
    parser.add_argument("--log-level", help="critical|error|warning|info|debug")
    parser.add_argument(
        "--principal-resolver",
        help="'module:function' resolving the caller's principal (PAUSEMESH_PRINCIPAL_RESOLVER)",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        default=None,
        help="allow a non-loopback bind without a principal resolver (anyone can call the API)",
    )
    for flag, help_text in _IDENTITY_AND_LIMIT_FLAGS:
        parser.add_argument(flag, help=f"{help_text} ({_env_name(flag)})")
    parser.add_argument(
        "--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from (default .env)"
    )


# Identity, browser and limit settings a deployment most often sets per process; each flag is
# the setting's field name with dashes (``--auth-issuer`` -> ``auth_issuer``, PAUSEMESH_AUTH_ISSUER).
_IDENTITY_AND_LIMIT_FLAGS: Final = (
    ("--auth-jwks-url", "JWT bearer: the identity provider's JWKS, https:// or file://"),
    ("--auth-issuer", "JWT bearer: the tokens' exact iss"),
    ("--auth-audience", "JWT bearer: the audience the tokens must name"),
    ("--auth-principal-claim", "JWT bearer: the claim naming the principal (default sub)"),
    ("--auth-roles-claim", "JWT bearer: the claim holding roles (a dotted path reaches in)"),
    ("--auth-api-keys-file", "API keys: the file `pausemesh keys create` writes"),
    ("--cors-origins", "comma-separated browser origins allowed cross-site"),
    ("--allowed-hosts", "comma-separated Host names answered besides loopback (* any)"),
    ("--rate-limit", "runs started per principal, such as 120/minute"),
    ("--run-timeout-seconds", "the longest an agent run may take"),
    ("--shutdown-grace-seconds", "how long in-flight runs may go on after SIGTERM"),
)


def _field_name(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _env_name(flag: str) -> str:
    return f"PAUSEMESH_{_field_name(flag).upper()}"


# The settings a command's flags may name, by field name; a command without the flag leaves
# the setting to the environment, the env file and the default.
_SETTING_FLAGS: Final = (
    "host",
    "port",
    "database_path",
    "database_url",
    "database_schema",
    "log_level",
    "principal_resolver",
    "insecure_no_auth",
    "agent",
    "workers",
    *(_field_name(flag) for flag, _ in _IDENTITY_AND_LIMIT_FLAGS),
)


def settings_from(args: argparse.Namespace, *, require_key: bool = True) -> Settings:
    """The settings with the command's flags over ``--env-file`` and the environment."""
    overrides = {name: getattr(args, name, None) for name in _SETTING_FLAGS}
    return load_settings(env_file=args.env_file, overrides=overrides, require_key=require_key)


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """The store flags every offline command takes (``inspect``, ``stats``, ``purge``)."""
    parser.add_argument(
        "--database-path",
        help="SQLite file (PAUSEMESH_DATABASE_PATH, default ./data/pausemesh.db)",
    )
    parser.add_argument(
        "--database-url", help="PostgreSQL URL; wins over --database-path (PAUSEMESH_DATABASE_URL)"
    )
    parser.add_argument(
        "--database-schema",
        help="PostgreSQL schema (PAUSEMESH_DATABASE_SCHEMA, default pausemesh)",
    )
    parser.add_argument(
        "--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from (default .env)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every ``gateway`` and ``ops`` command: the gateway config and the store."""
    parser.add_argument(
        "--config", default="gateway.toml", help="gateway TOML (default gateway.toml)"
    )
    parser.add_argument("--database-path", help="SQLite file (PAUSEMESH_DATABASE_PATH)")
    parser.add_argument("--database-url", help="PostgreSQL URL; wins over --database-path")
    parser.add_argument("--database-schema", help="PostgreSQL schema (default pausemesh)")
    parser.add_argument("--log-level", help="critical|error|warning|info|debug")
    parser.add_argument("--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from")


def refusal(error: PauseMeshError) -> SystemExit:
    """``error`` printed with its code; the exit says whether the config or the action is wrong."""
    listed = error.details.get("errors", []) if error.code == "GATEWAY_CONFIG_INVALID" else []
    if listed:
        # The message joins the errors; listed one per line instead, each is said once.
        path = error.details.get("path")
        where = f" {path}" if path else ""
        print(f"pausemesh: {error.code}: the gateway config{where} is invalid:", file=sys.stderr)
    else:
        print(f"pausemesh: {error.code}: {error.message}", file=sys.stderr)
    for line in listed:
        print(f"  - {line}", file=sys.stderr)
    usage = error.code in {
        "GATEWAY_CONFIG_INVALID",
        "GATEWAY_LOCK_MISSING",
        "GATEWAY_LOCK_MISMATCH",
    }
    return SystemExit(EXIT_USAGE if usage else EXIT_REFUSED)


# A store that cannot be opened is a start-up failure (``pausemesh.cli.failures``, exit 2),
# not the command's refusal: the same line as every other command's.
_STORE_NOT_OPEN: Final = frozenset(
    {
        "STORE_UNAVAILABLE",
        "STORE_PERMISSION_DENIED",
        "MIGRATION_REQUIRED",
        "MIGRATION_CHECKSUM_MISMATCH",
        "MIGRATION_VERSION_AHEAD",
        "SCHEMA_INCOMPLETE",
    }
)


def run_refusing(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``main``; a ``PauseMeshError`` it raises ends the command (``refusal``), a store
    that does not open ends it as a start-up failure (``pausemesh.cli.main``)."""
    try:
        asyncio.run(main())
    except StoreError as error:
        if error.code in _STORE_NOT_OPEN:
            raise
        raise refusal(error) from None
    except PauseMeshError as error:
        raise refusal(error) from None


@asynccontextmanager
async def ledger_storage(settings: Settings) -> AsyncIterator[Any]:
    """The stores, which must have the operation ledger and worker fencing (the gateway's)."""
    from pausemesh.bootstrap import open_storage  # noqa: PLC0415 - the stores load only when opened

    storage = await open_storage(settings)
    try:
        if storage.operations is None or storage.fencing is None:
            msg = "these stores have no operation ledger or worker fencing"
            raise GatewayError(msg, code="STORE_UNAVAILABLE")
        yield storage
    finally:
        await storage.close()
