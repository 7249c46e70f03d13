"""The continuation REST contract against a real ``pausemesh serve`` process."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.support.rest import PAYLOAD, assert_problem, create, resume

pytestmark = pytest.mark.slow


async def test_health_is_ok_and_ready_checks_the_store(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": [{"component": "store", "status": "ready"}],
    }


async def test_create_returns_201_with_the_envelope_and_the_token_once(
    client: httpx.AsyncClient,
) -> None:
    expires = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    response = await client.post(
        "/v1/continuations",
        json={
            "payload": PAYLOAD,
            "continuationId": "order-42",
            "correlationId": "thread-7",
            "expiresAt": expires,
            "metadata": {"tenant": "acme"},
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"continuation", "resumeToken"}
    continuation = body["continuation"]
    assert continuation["continuationId"] == "order-42"
    assert continuation["correlationId"] == "thread-7"
    assert continuation["status"] == "pending"
    assert continuation["version"] == 1
    assert continuation["payload"] == PAYLOAD
    assert continuation["metadata"] == {"tenant": "acme"}
    assert "resumeTokenHash" not in continuation

    fetched = await client.get("/v1/continuations/order-42")
    assert fetched.json() == {"continuation": continuation}
    assert body["resumeToken"] not in fetched.text


async def test_a_duplicate_id_is_a_version_conflict(client: httpx.AsyncClient) -> None:
    await create(client, continuationId="dup-1")
    response = await client.post(
        "/v1/continuations", json={"payload": 1, "continuationId": "dup-1"}
    )
    problem = assert_problem(response, 409, "VERSION_CONFLICT")
    assert "a continuation with id 'dup-1' already exists" in problem["detail"]


async def test_a_rest_resume_is_held_to_the_pauses_response_schema_and_nothing_is_written(
    client: httpx.AsyncClient,
) -> None:
    schema = {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
    }
    pause = {"kind": "input", "message": "Refund $120?", "responseSchema": schema}
    continuation_id, token = await create(client, payload=pause)
    refused = await resume(client, continuation_id, token, key="k1", payload={"approved": "yes"})
    assert_problem(refused, 400, "INVALID_PAYLOAD")
    still = (await client.get(f"/v1/continuations/{continuation_id}")).json()["continuation"]
    assert (still["status"], still["version"]) == ("pending", 1)
    # The same key answers again with a matching payload: nothing was recorded under it.
    answered = await resume(client, continuation_id, token, key="k1", payload={"approved": True})
    assert answered.status_code == 200, answered.text
    assert answered.json()["continuation"]["resumePayload"] == {"approved": True}


@pytest.mark.parametrize(
    "expires_at",
    [
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59-12:00",
        (datetime.now(UTC) + timedelta(days=91)).isoformat(),
    ],
    ids=["year-9999", "year-9999-west-of-utc", "past-the-90-day-cap"],
)
async def test_an_expiry_beyond_the_pause_ttl_cap_is_invalid_expiry_and_nothing_is_stored(
    client: httpx.AsyncClient, expires_at: str
) -> None:
    continuation_id = f"forever-{uuid.uuid4()}"
    body = {"payload": PAYLOAD, "continuationId": continuation_id, "expiresAt": expires_at}

    refused = await client.post("/v1/continuations", json=body)

    problem = assert_problem(refused, 400, "INVALID_EXPIRY")
    assert "PAUSEMESH_MAX_PAUSE_TTL_SECONDS" in problem["detail"]
    assert (await client.get(f"/v1/continuations/{continuation_id}")).status_code == 404


async def test_an_expiry_just_within_the_pause_ttl_cap_is_accepted(
    client: httpx.AsyncClient,
) -> None:
    deadline = datetime.now(UTC) + timedelta(days=89)
    continuation_id, _ = await create(client, expiresAt=deadline.isoformat())
    fetched = (await client.get(f"/v1/continuations/{continuation_id}")).json()
    assert datetime.fromisoformat(fetched["continuation"]["expiresAt"]) == deadline


async def test_events_never_carry_the_token_or_its_hash(client: httpx.AsyncClient) -> None:
    continuation_id, token = await create(client)
    assert (await resume(client, continuation_id, token)).status_code == 200
    response = await client.get(f"/v1/continuations/{continuation_id}/events")
    assert response.status_code == 200
    events = response.json()["events"]
    assert [e["type"] for e in events] == ["continuation.created", "continuation.resumed"]
    assert [e["version"] for e in events] == [1, 2]
    text = response.text
    assert token not in text
    for forbidden in ("resumeTokenHash", "tokenNonce", "tokenKeyId"):
        assert forbidden not in text


async def test_resume_once_then_exact_retries_return_the_identical_body(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, token = await create(client)
    first = await resume(client, continuation_id, token, key="k", payload={"a": 1, "b": [1, 2]})
    assert first.status_code == 200
    assert first.json()["continuation"]["status"] == "resumed"
    assert first.json()["continuation"]["resumePayload"] == {"a": 1, "b": [1, 2]}
    # Same key, canonically equal payload (keys reordered): the stored body, byte for byte.
    retry = await resume(client, continuation_id, token, key="k", payload={"b": [1, 2], "a": 1})
    assert retry.status_code == 200
    assert retry.content == first.content

    assert_problem(
        await resume(client, continuation_id, token, key="k", payload={"a": 2}),
        409,
        "IDEMPOTENCY_CONFLICT",
    )
    assert_problem(
        await resume(client, continuation_id, token, key="other"), 409, "TOKEN_ALREADY_USED"
    )


async def test_a_wrong_token_is_401_even_after_resume_and_never_echoed(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, token = await create(client)
    wrong = "A" * 43
    response = await resume(client, continuation_id, wrong)
    body = assert_problem(response, 401, "TOKEN_MISMATCH")
    assert wrong not in response.text
    assert response.headers["www-authenticate"] == "PauseMesh"
    assert (await resume(client, continuation_id, token)).status_code == 200
    assert_problem(await resume(client, continuation_id, wrong), 401, "TOKEN_MISMATCH")
    assert body["detail"] == "Resume token does not match"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer abcdefghijklmnopqrstuvwxyz",
        "PauseMesh",
        "PauseMesh two tokens",
        "Basic Zm9vOmJhcg==",
    ],
    ids=["missing", "empty", "bearer", "scheme-only", "two-tokens", "basic"],
)
async def test_missing_or_other_scheme_authorization_is_401_token_mismatch(
    client: httpx.AsyncClient, authorization: str | None
) -> None:
    continuation_id, _ = await create(client)
    headers = {"idempotency-key": "k"}
    if authorization is not None:
        headers["authorization"] = authorization
    response = await client.post(
        f"/v1/continuations/{continuation_id}/resume", json={"payload": 1}, headers=headers
    )
    assert_problem(response, 401, "TOKEN_MISMATCH")
    for secret in ("abcdefghijklmnopqrstuvwxyz", "Zm9vOmJhcg"):
        assert secret not in response.text


async def test_the_authorization_scheme_is_case_insensitive(client: httpx.AsyncClient) -> None:
    continuation_id, token = await create(client)
    response = await client.post(
        f"/v1/continuations/{continuation_id}/resume",
        json={"payload": {"flight": "PM101"}},
        headers={"authorization": f"pausemesh {token}", "idempotency-key": "k"},
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "key", [None, "", "x" * 201, "tab\tinside"], ids=["missing", "empty", "201", "control"]
)
async def test_a_missing_blank_or_overlong_idempotency_key_is_400(
    client: httpx.AsyncClient, key: str | None
) -> None:
    continuation_id, token = await create(client)
    headers = {"authorization": f"PauseMesh {token}"}
    if key is not None:
        headers["idempotency-key"] = key
    response = await client.post(
        f"/v1/continuations/{continuation_id}/resume", json={"payload": 1}, headers=headers
    )
    assert_problem(response, 400, "INVALID_IDEMPOTENCY_KEY")
    # Nothing was written: the continuation still resumes with a good key.
    assert (await resume(client, continuation_id, token, key="x" * 200)).status_code == 200


async def test_cancel_fences_and_exact_retries(client: httpx.AsyncClient) -> None:
    continuation_id, token = await create(client)
    url = f"/v1/continuations/{continuation_id}/cancel"
    assert_problem(await client.post(url, json={"expectedVersion": 2}), 409, "VERSION_CONFLICT")
    assert_problem(await client.post(url, json={"expectedVersion": 0}), 400, "INVALID_REQUEST")
    first = await client.post(url, json={"expectedVersion": 1, "reason": "user left"})
    assert first.status_code == 200
    cancelled = first.json()["continuation"]
    assert cancelled["status"] == "cancelled"
    assert cancelled["reason"] == "user left"
    assert cancelled["version"] == 2
    retry = await client.post(url, json={"expectedVersion": 1, "reason": "user left"})
    assert retry.status_code == 200
    assert retry.content == first.content
    assert_problem(await client.post(url, json={"reason": "other"}), 409, "INVALID_TRANSITION")
    assert_problem(await client.post(url, json={}), 409, "INVALID_TRANSITION")
    assert_problem(
        await client.post(url, json={"expectedVersion": 2, "reason": "user left"}),
        409,
        "VERSION_CONFLICT",
    )
    assert_problem(await resume(client, continuation_id, token), 409, "CONTINUATION_CANCELLED")


async def test_cancel_after_resume_is_an_invalid_transition(client: httpx.AsyncClient) -> None:
    continuation_id, token = await create(client)
    assert (await resume(client, continuation_id, token)).status_code == 200
    response = await client.post(f"/v1/continuations/{continuation_id}/cancel", json={})
    assert_problem(response, 409, "INVALID_TRANSITION")


async def test_an_unknown_continuation_is_404_everywhere(client: httpx.AsyncClient) -> None:
    base = "/v1/continuations/does-not-exist"
    assert_problem(await client.get(base), 404, "CONTINUATION_NOT_FOUND")
    assert_problem(await client.get(f"{base}/events"), 404, "CONTINUATION_NOT_FOUND")
    assert_problem(await client.post(f"{base}/cancel", json={}), 404, "CONTINUATION_NOT_FOUND")
    assert_problem(await resume(client, "does-not-exist", "A" * 43), 404, "CONTINUATION_NOT_FOUND")


async def test_fifty_concurrent_resumes_with_distinct_keys_have_one_winner(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, token = await create(client)
    responses = await asyncio.gather(
        *(resume(client, continuation_id, token, key=f"key-{i}") for i in range(50))
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 49
    for response in responses:
        if response.status_code == 409:
            assert_problem(response, 409, "TOKEN_ALREADY_USED")
    winner = next(r for r in responses if r.status_code == 200).json()["continuation"]
    events = (await client.get(f"/v1/continuations/{continuation_id}/events")).json()["events"]
    assert len(events) == 2
    assert events[1]["idempotencyKey"] == winner["idempotencyKey"]


async def test_thirty_concurrent_identical_retries_all_get_the_same_200_body(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, token = await create(client)
    responses = await asyncio.gather(
        *(resume(client, continuation_id, token, key="same") for _ in range(30))
    )
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1


async def test_a_continuation_expires_at_its_deadline(client: httpx.AsyncClient) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=1)
    continuation_id, token = await create(
        client, expiresAt=deadline.isoformat().replace("+00:00", "Z")
    )
    # Waiting for the deadline is the point; nothing below measures how long anything took.
    await asyncio.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.2)
    assert_problem(await resume(client, continuation_id, token), 410, "CONTINUATION_EXPIRED")
    body = (await client.get(f"/v1/continuations/{continuation_id}")).json()
    assert body["continuation"]["status"] == "expired"
    assert_problem(
        await client.post(f"/v1/continuations/{continuation_id}/cancel", json={}),
        410,
        "CONTINUATION_EXPIRED",
    )


async def test_the_sweeper_expires_a_continuation_nobody_reads(
    client: httpx.AsyncClient,
) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=1)
    continuation_id, _ = await create(client, expiresAt=deadline.isoformat().replace("+00:00", "Z"))
    url = f"/v1/continuations/{continuation_id}/events"  # history never materializes expiry
    for _ in range(200):
        types = [e["type"] for e in (await client.get(url)).json()["events"]]
        if types[-1] == "continuation.expired":
            break
        await asyncio.sleep(0.1)
    assert types == ["continuation.created", "continuation.expired"]


async def test_without_bearer_identity_the_resume_token_travels_in_either_header(
    client: httpx.AsyncClient,
) -> None:
    async def resume_with(continuation_id: str, headers: dict[str, str]) -> httpx.Response:
        return await client.post(
            f"/v1/continuations/{continuation_id}/resume",
            json={"payload": {"flight": "PM101"}},
            headers={**headers, "idempotency-key": "k"},
        )

    by_scheme, scheme_token = await create(client)
    by_header, header_token = await create(client)
    both, both_token = await create(client)

    wrong = await resume_with(by_header, {"pausemesh-token": scheme_token})
    assert_problem(wrong, 401, "TOKEN_MISMATCH")
    assert wrong.headers["www-authenticate"].startswith("PauseMesh")
    # PauseMesh-Token wins over Authorization: a good token there, a wrong one in the other.
    wrong_first = await resume_with(
        both, {"pausemesh-token": scheme_token, "authorization": f"PauseMesh {both_token}"}
    )
    assert_problem(wrong_first, 401, "TOKEN_MISMATCH")

    for continuation_id, headers in [
        (by_scheme, {"authorization": f"PauseMesh {scheme_token}"}),
        (by_header, {"pausemesh-token": header_token}),
        (both, {"pausemesh-token": both_token, "authorization": f"PauseMesh {scheme_token}"}),
    ]:
        done = await resume_with(continuation_id, headers)
        assert done.status_code == 200, done.text
        assert done.json()["continuation"]["status"] == "resumed"
