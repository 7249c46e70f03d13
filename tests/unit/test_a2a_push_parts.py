"""The A2A push parts that need no server: the webhook allow policy and the signing key.

The policy refuses loopback, private and link-local targets (IPv4-mapped forms included),
non-HTTP schemes and URLs carrying credentials unless told otherwise; the signing key is a
function of the server key alone, so replicas sharing it publish one JWKS.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import jwt
import pytest
from jwt.types import Options

from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.push_signing import PushSigner

KEY = b"k" * 32
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost/hook",
        "http://10.0.0.8/hook",
        "http://192.168.1.2/hook",
        "http://100.64.0.1/hook",
        "http://[fd00::1]/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://0.0.0.0/hook",
        "http://224.0.0.1/hook",
        "ftp://93.184.215.14/hook",
        "http://user:pw@93.184.215.14/hook",
        "http:///no-host",
        "not a url",
    ],
)
async def test_the_default_policy_refuses_anything_but_public_http(url: str) -> None:
    assert not await PushUrlPolicy()(url)


async def test_the_default_policy_allows_a_public_address() -> None:
    assert await PushUrlPolicy()("https://93.184.215.14/hook")


@pytest.mark.parametrize(
    ("allow", "url", "allowed"),
    [
        ("loopback", "http://127.0.0.1:8080/hook", True),
        ("loopback", "http://[::ffff:127.0.0.1]/hook", True),
        ("loopback", "http://10.0.0.8/hook", False),
        ("private", "http://10.0.0.8/hook", True),
        ("private", "http://169.254.169.254/", False),
        ("link-local", "http://169.254.169.254/", True),
        ("loopback,private,link-local", "http://0.0.0.0/hook", False),
        ("hooks.internal", "http://hooks.internal/x", True),
        ("hooks.internal", "http://other.internal/x", False),
    ],
)
async def test_the_allow_list_widens_by_range_or_exact_host(
    allow: str, url: str, allowed: bool
) -> None:
    assert await PushUrlPolicy(allow)(url) is allowed


def test_replicas_sharing_the_server_key_publish_one_key_and_another_key_another() -> None:
    one, two = PushSigner(KEY, issuer="a"), PushSigner(KEY, issuer="b")
    other = PushSigner(b"o" * 32, issuer="a")

    assert one.jwks() == two.jwks()
    assert one.kid != other.kid
    assert one.jwk["x"] != other.jwk["x"]


def test_a_signed_delivery_verifies_with_the_published_key_only() -> None:
    signer = PushSigner(KEY, issuer="https://agent.example/a2a")
    body = b'{"task":{}}'
    token = signer.sign(
        delivery_id="d1", task_id="t1", url="https://hook.example/", body=body, now=NOW
    )
    published = jwt.PyJWK.from_dict(signer.jwk).key
    foreign = jwt.PyJWK.from_dict(PushSigner(b"o" * 32, issuer="x").jwk).key
    options: Options = {"verify_exp": False}

    claims = jwt.decode(
        token, published, algorithms=["ES256"], audience="https://hook.example/", options=options
    )

    assert jwt.get_unverified_header(token)["kid"] == signer.kid
    assert claims["jti"] == "d1"
    assert claims["task_id"] == "t1"
    assert claims["request_body_sha256"] == hashlib.sha256(body).hexdigest()
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(
            token, foreign, algorithms=["ES256"], audience="https://hook.example/", options=options
        )
