"""``pausemesh keys``: create, list and revoke the API keys of ``PAUSEMESH_AUTH_API_KEYS_FILE``.

``create`` prints the new key once, alone on stdout (``KEY=$(pausemesh keys create ...)``);
the file keeps only its hash. ``revoke`` takes the key id, ``pmk_<id>`` or the key itself; a
running server refuses the key from its next request on. A key calls as ``key:<principal>``
unless ``--exact-principal`` maps it to the principal itself; a reserved principal id
(``role:``, ``operation:``, ``key:``) is refused with a one-line error.
"""

from __future__ import annotations

import argparse
import sys

from pausemesh.core.errors import SettingsError
from pausemesh.credentials.api_keys import (
    KEY_PREFIX,
    ApiKeyRecord,
    create_api_key,
    list_api_keys,
    revoke_api_key,
)
from pausemesh.settings import load_settings

__all__ = ("add_keys_arguments", "run_keys")


def add_keys_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a key for a principal (printed once)")
    create.add_argument(
        "--principal",
        required=True,
        help="who the key identifies; its caller is key:PRINCIPAL (API keys' own namespace)",
    )
    create.add_argument(
        "--exact-principal",
        action="store_true",
        help=(
            "call as PRINCIPAL itself, the principal an identity provider token with that"
            " subject names too (an explicit mapping; default: key:PRINCIPAL)"
        ),
    )
    create.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="ROLE",
        help="a role the key carries (repeatable); agents see them as ctx.roles",
    )
    create.add_argument("--label", help="a note kept beside the hash (e.g. where the key is used)")
    revoke = actions.add_parser("revoke", help="revoke a key by its id (or pmk_<id>, or the key)")
    revoke.add_argument("key", help="the key id, pmk_<id>, or the whole key")
    actions.add_parser("list", help="list the keys (ids, principals, roles; never a secret)")
    for action in (create, revoke, actions.choices["list"]):
        action.add_argument("--file", help="the API key file (PAUSEMESH_AUTH_API_KEYS_FILE)")
        action.add_argument(
            "--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from (default .env)"
        )


def _describe(record: ApiKeyRecord) -> str:
    roles = ",".join(record.roles) or "-"
    state = "revoked " + record.revoked_at.isoformat() if record.revoked_at else "active"
    return f"{KEY_PREFIX}{record.id}  principal={record.caller}  roles={roles}  {state}"


def run_keys(args: argparse.Namespace) -> None:
    path = args.file
    if path is None:
        path = load_settings(env_file=args.env_file).auth_api_keys_file
    if path is None:
        raise SettingsError("name the key file: --file PATH or PAUSEMESH_AUTH_API_KEYS_FILE")
    if args.keys_action == "create":
        key, record = create_api_key(
            path,
            principal=args.principal,
            roles=args.role,
            label=args.label,
            exact_principal=args.exact_principal,
        )
        print(key)
        print(f"created {_describe(record)}; the key is not stored, keep it now", file=sys.stderr)
    elif args.keys_action == "revoke":
        record = revoke_api_key(path, args.key)
        print(f"revoked {_describe(record)}")
    else:
        for record in list_api_keys(path):
            print(_describe(record))
