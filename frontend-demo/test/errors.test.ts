import assert from "node:assert/strict";
import { test } from "node:test";
import { noticeFor, noticeForFailure } from "../src/errors.js";
import { lastSequence, pendingIds, threadFromUrl, urlWithThread } from "../src/thread.js";

test("an expired resume tells the person nothing was booked and asks to cancel", () => {
  const notice = noticeFor("PAUSEMESH_AGUI_RESUME_EXPIRED", "AG-UI resume references an expired interrupt");
  assert.equal(notice.kind, "expired");
  assert.match(notice.message, /expired/);
  assert.equal(notice.resync, true);
});

test("a conflicting answer from another tab shows the recorded outcome", () => {
  for (const code of ["PAUSEMESH_AGUI_REPLAY_CONFLICT", "PAUSEMESH_AGUI_RESUME_SET_MISMATCH", "TOKEN_ALREADY_USED"]) {
    const notice = noticeFor(code, "x");
    assert.equal(notice.kind, "conflict", code);
    assert.match(notice.message, /already answered/);
    assert.equal(notice.resync, true);
  }
});

test("a busy thread and a schema rejection read differently", () => {
  assert.equal(noticeFor("THREAD_BUSY", "x").kind, "busy");
  const rejected = noticeFor("PAUSEMESH_AGUI_INVALID_PAYLOAD", "AG-UI resume payload does not match its response schema");
  assert.equal(rejected.kind, "rejected");
  assert.match(rejected.message, /does not match its response schema/);
  assert.equal(rejected.resync, false);
});

test("an HTTP problem body is read for its code; a network failure is 'offline'", () => {
  const httpError = Object.assign(new Error("HTTP 409"), {
    status: 409,
    payload: { code: "THREAD_BUSY", title: "Conflict", detail: "Another run is active" },
  });
  assert.equal(noticeForFailure(httpError).kind, "busy");
  assert.equal(noticeForFailure(new TypeError("Failed to fetch")).kind, "offline");
  const unknown = noticeForFailure(Object.assign(new Error("x"), { status: 500, payload: "boom" }));
  assert.equal(unknown.kind, "error");
  assert.match(unknown.message, /boom/);
});

test("the thread id round-trips through the URL and junk is ignored", () => {
  const url = urlWithThread(new URL("http://h/?x=1"), "t-123");
  assert.equal(url.search, "?x=1&thread=t-123");
  assert.equal(threadFromUrl(url), "t-123");
  assert.equal(threadFromUrl(new URL("http://h/?thread=%3Cscript%3E")), undefined);
  assert.equal(threadFromUrl(new URL("http://h/")), undefined);
});

test("snapshot helpers read pending interrupt ids and the last sequence", () => {
  const snapshot = { pendingInterrupts: [{ id: "a" }, { interruptId: "b" }, "c", 4], lastSequence: 9 };
  assert.deepEqual([...pendingIds(snapshot)], ["a", "b", "c"]);
  assert.equal(lastSequence(snapshot), 9);
  assert.equal(lastSequence({}), 0);
  assert.equal(pendingIds(null).size, 0);
});
