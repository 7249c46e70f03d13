"""The A2A push parts that need no server: the webhook allow policy, the retry schedule and
the signing key.

The policy refuses loopback, private and link-local targets (IPv4-mapped, 6to4 and Teredo
forms included: judged by the IPv4 addresses they carry), non-HTTP schemes, URLs carrying
credentials and URLs with whitespace or control characters unless told otherwise, and says
why; retries double up to a cap, each delay drawn from the upper half of its step; the
signing key is a function of the server key alone, so replicas sharing it publish one JWKS.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import jwt
import pytest
from jwt.types import Options

from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.push_signing import PushSigner
from pausemesh.stores.backoff import retry_delay

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


# 6to4 (2002:AABB:CCDD::/48 carries A.B.C.D) and Teredo (2001:0:SERVER:flags:port:~CLIENT).
SIX_TO_FOUR_LOOPBACK = "http://[2002:7f00:1::1]/hook"
SIX_TO_FOUR_METADATA = "http://[2002:a9fe:a9fe::1]/latest/meta-data"
SIX_TO_FOUR_PRIVATE = "http://[2002:a00:1::1]/hook"
SIX_TO_FOUR_PUBLIC = "http://[2002:5db8:d70e::1]/hook"
TEREDO_LOOPBACK_CLIENT = "http://[2001:0:5db8:d70e::80ff:fffe]/hook"  # client 127.0.0.1
TEREDO_PRIVATE_SERVER = "http://[2001:0:a00:1::a247:28f1]/hook"  # server 10.0.0.1
TEREDO_PUBLIC = "http://[2001:0:5db8:d70e::a247:28f1]/hook"  # both 93.184.215.14
TEREDO_UNSPECIFIED = "http://[2001::1]/hook"  # server 0.0.0.0


@pytest.mark.parametrize(
    "url",
    [
        SIX_TO_FOUR_LOOPBACK,
        SIX_TO_FOUR_METADATA,
        SIX_TO_FOUR_PRIVATE,
        TEREDO_LOOPBACK_CLIENT,
        TEREDO_PRIVATE_SERVER,
        TEREDO_UNSPECIFIED,
    ],
)
async def test_6to4_and_teredo_addresses_carrying_internal_ipv4_are_refused_by_default(
    url: str,
) -> None:
    assert not await PushUrlPolicy()(url)


@pytest.mark.parametrize(
    ("allow", "url", "allowed"),
    [
        ("loopback", SIX_TO_FOUR_LOOPBACK, True),
        ("private", SIX_TO_FOUR_LOOPBACK, False),
        ("link-local", SIX_TO_FOUR_METADATA, True),
        ("loopback,private", SIX_TO_FOUR_METADATA, False),
        ("private", SIX_TO_FOUR_PRIVATE, True),
        ("loopback", TEREDO_LOOPBACK_CLIENT, True),
        ("private", TEREDO_LOOPBACK_CLIENT, False),
        ("private", TEREDO_PRIVATE_SERVER, True),
        ("loopback,private,link-local", TEREDO_UNSPECIFIED, False),
    ],
)
async def test_6to4_and_teredo_addresses_pass_only_when_their_embedded_ipv4_is_allowed(
    allow: str, url: str, allowed: bool
) -> None:
    assert await PushUrlPolicy(allow)(url) is allowed


@pytest.mark.parametrize("url", [SIX_TO_FOUR_PUBLIC, TEREDO_PUBLIC])
async def test_6to4_and_teredo_addresses_carrying_public_ipv4_are_allowed(url: str) -> None:
    assert await PushUrlPolicy()(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://93.184.215.14/\r\nX: 1",
        "http://93.184.215.14/hook\n",
        "http://93.184.215.14/\thook",
        "http://93.184.215.14/ hook",
        " http://93.184.215.14/hook",
        "http://93.184.215.14/\x00",
        "http://93.184.215.14/\x1f",
        "http://93.184.215.14/\x7f",
        "http://93.184.215.14/\x85",
        "http://93.184.215.14/\u00a0",
        "http://93.184.215.14/\u2028",
        "http://93.184.215.14/\u3000",
    ],
)
async def test_a_url_with_whitespace_or_a_control_character_is_refused_saying_so(
    url: str,
) -> None:
    policy = PushUrlPolicy("loopback,private,link-local")

    assert policy.static_refusal(url) == (
        "The push notification URL must not contain whitespace or control characters"
    )
    assert await policy.refusal(url) == policy.static_refusal(url)
    assert not await policy(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://93.184.215.14/hook", "must be an absolute http or https URL"),
        ("/relative/hook", "must be an absolute http or https URL"),
        ("http:///no-host", "must name a host"),
        ("http://user:pw@93.184.215.14/hook", "must not carry user information"),
        ("http://93.184.215.14:99999/hook", "is not a valid absolute URL"),
        ("http://127.0.0.1/hook", "does not resolve to an address the push policy allows"),
        ("http://unresolvable.invalid/hook", "does not resolve to an address"),
    ],
)
async def test_a_refused_url_gets_the_reason(url: str, reason: str) -> None:
    refusal = await PushUrlPolicy().refusal(url)

    assert refusal is not None
    assert reason in refusal


def test_retries_double_from_the_first_step_up_to_the_longest_drawn_from_its_upper_half() -> None:
    failures = range(1, 8)

    highest = [retry_delay(n, 1.0, 30.0, uniform=lambda _low, high: high) for n in failures]
    lowest = [retry_delay(n, 1.0, 30.0, uniform=lambda low, _high: low) for n in failures]

    assert highest == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert lowest == [0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]


def test_retries_of_deliveries_failing_together_are_spread() -> None:
    delays = [retry_delay(3, 1.0, 300.0) for _ in range(200)]

    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len({round(d, 3) for d in delays}) > 100


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
