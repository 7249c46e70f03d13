"""``pausemesh conformance agui URL``: check any AG-UI server against the interrupt contract.

URL is the server's run endpoint (``POST``, ``RunAgentInput`` in, SSE out), e.g.
``http://127.0.0.1:8787/agui``. The scenario is a user message that makes the agent ask
(``--message``) and optionally the answers (``--answer``, ``--invalid-answer``; by default
made from each question's ``responseSchema``), or a JSON file with the same fields
(``--scenario``: ``message``, ``answer``, ``invalidAnswer``, ``followUp``, ``state``,
``forwardedProps``; flags win). One line per rule on stdout (``PASS``/``FAIL``/``N/A`` and
what was seen), then a summary. Exit 0 when every applicable rule passes, 1 when one fails,
2 when the check could not be made (no server, no question asked, a bad scenario).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pausemesh.cli.options import EXIT_REFUSED, CliError
from pausemesh.conformance import ConformanceError, Scenario, check_agui
from pausemesh.conformance.agui import Endpoints
from pausemesh.conformance.sse import Target

__all__ = ("add_conformance_arguments", "run_conformance")


def add_conformance_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="conformance_kind", metavar="PROTOCOL", required=True)
    agui = kinds.add_parser(
        "agui",
        help="the AG-UI interrupt contract and resumability, rule by rule",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agui.add_argument("url", metavar="URL", help="the run endpoint, e.g. http://host/agui")
    agui.add_argument("--scenario", type=Path, metavar="FILE", help="the scenario as JSON")
    agui.add_argument("--message", help="the user message that makes the agent ask")
    agui.add_argument("--answer", type=_json, metavar="JSON", help="the payload of every answer")
    agui.add_argument(
        "--invalid-answer", type=_json, metavar="JSON", help="a payload the schema refuses"
    )
    agui.add_argument(
        "--connect-url",
        metavar="URL",
        help="the restore route (default: URL/connect, PauseMesh's)",
    )
    agui.add_argument(
        "--events-url",
        metavar="URL",
        help="the event log route, {threadId} filled in"
        " (default: URL/threads/{threadId}/events, PauseMesh's)",
    )
    agui.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="a header for every request (e.g. authorization), repeatable",
    )
    agui.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (default 30)"
    )


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        msg = f"not JSON: {error}"
        raise argparse.ArgumentTypeError(msg) from None


def _scenario(args: argparse.Namespace) -> Scenario:
    fields: dict[str, Any] = {}
    if args.scenario is not None:
        try:
            read: Any = json.loads(args.scenario.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            msg = f"--scenario {args.scenario}: {error}"
            raise CliError(msg) from None
        if not isinstance(read, dict):
            msg = f"--scenario {args.scenario}: a JSON object is expected"
            raise CliError(msg)
        fields = read
    for flag, key in (("message", "message"), ("answer", "answer")):
        if getattr(args, flag) is not None:
            fields[key] = getattr(args, flag)
    if args.invalid_answer is not None:
        fields["invalidAnswer"] = args.invalid_answer
    try:
        return Scenario.from_json(fields)
    except (ConformanceError, TypeError) as error:
        raise CliError(str(error)) from None


def _headers(pairs: list[str]) -> dict[str, str]:
    headers = {}
    for pair in pairs:
        name, colon, value = pair.partition(":")
        if not colon or not name.strip():
            msg = f"--header {pair!r}: NAME:VALUE expected"
            raise CliError(msg)
        headers[name.strip()] = value.strip()
    return headers


def run_conformance(args: argparse.Namespace) -> None:
    scenario = _scenario(args)
    url = args.url.rstrip("/")
    endpoints = Endpoints(
        run=url,
        connect=args.connect_url or f"{url}/connect",
        events=args.events_url or f"{url}/threads/{{threadId}}/events",
    )
    target = Target(url, headers=_headers(args.header), timeout=args.timeout)
    try:
        verdicts = check_agui(target, endpoints, scenario)
    except ConformanceError as error:
        raise CliError(f"conformance agui {url}: {error}") from None
    finally:
        target.close()
    for verdict in verdicts:
        print(verdict.line())
    counts = {s: sum(v.status == s for v in verdicts) for s in ("PASS", "FAIL", "N/A")}
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['N/A']} not applicable")
    sys.stdout.flush()
    if counts["FAIL"]:
        raise SystemExit(EXIT_REFUSED)
