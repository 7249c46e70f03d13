"""docs/approvals.md's receiver snippet runs: it accepts a delivery signed the way the server's
webhook sender signs it (outbox/webhook_sender.py), once; a retry is acknowledged and not
handled again; a forged or re-signed body is refused."""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from pausemesh.outbox.webhook_sender import sign_headers

DOC = Path(__file__).resolve().parents[2] / "docs" / "approvals.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_receiver_snippet_verifies_signed_deliveries_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    [block] = _BLOCK.findall(DOC.read_text())
    namespace: dict[str, Any] = {"__name__": "approvals_doc"}
    exec(compile(block, "docs/approvals.md python block", "exec"), namespace)  # noqa: S102 - the docs' own code
    receive = namespace["receive"]
    secret, old = ("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode() for _ in range(2))
    link = {
        "approver": "role:manager",
        "url": "https://x/l",
        "choices": [{"url": "https://x/l?choice=0"}],
    }
    body = json.dumps({"type": "pause.created", "data": {"links": [link]}}).encode()
    headers = sign_headers((secret, old), "d1", body, int(time.time()))

    assert receive(secret, body, headers) == 204
    assert "role:manager ['https://x/l?choice=0']" in capsys.readouterr().out
    assert receive(old, body, headers) == 200  # the old secret still verifies: a retry
    assert receive(secret, body.replace(b"created", b"decided"), headers) == 401
    other = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    assert receive(other, body, headers) == 401
