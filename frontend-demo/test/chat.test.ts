import assert from "node:assert/strict";
import { test } from "node:test";
import {
  deadlineText,
  interruptedIds,
  isInterrupted,
  messageTime,
  moveBadge,
  optionParts,
  pendingIn,
  STOPPED_MARK,
  speakerOf,
  stampedId,
  whoseMove,
} from "../src/chat.js";

test("a stamped message id gives back its time; any other id gives none", () => {
  const id = stampedId("user", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", 1_796_000_000_000);
  assert.equal(messageTime(id)?.getTime(), 1_796_000_000_000);
  assert.equal(messageTime("answer-1796000000000-x")?.getTime(), 1_796_000_000_000);
  assert.equal(messageTime("msg-0f8fad5b-d9cb-469f-a165-70867728950e"), undefined);
  assert.equal(messageTime("u1"), undefined);
});

test("a manager's decision is the manager's message, an answer is yours", () => {
  assert.equal(speakerOf("user", "decision-1796000000000-x"), "Manager");
  assert.equal(speakerOf("user", "answer-1796000000000-x"), "You");
  assert.equal(speakerOf("assistant", "decision-x"), "Assistant");
});

test("the badge says whose move it is", () => {
  assert.equal(moveBadge(whoseMove([{ reason: "approval_required" }])), "Waiting for the manager");
  assert.equal(moveBadge(whoseMove([{ reason: "input_required" }])), "Needs your answer");
  assert.equal(
    moveBadge(whoseMove([{ reason: "approval_required" }, { reason: "input_required" }])),
    "Needs your answer",
  );
  assert.equal(moveBadge(whoseMove([])), undefined);
  assert.deepEqual(pendingIn({ pendingInterrupts: [{ id: "a", reason: "x" }, "junk", { no: 1 }] }), [
    { id: "a", reason: "x" },
  ]);
});

test("a deadline reads in whole minutes, rounded up, and ends", () => {
  const now = new Date("2026-12-07T12:00:00Z");
  const at = (seconds: number) => new Date(now.getTime() + seconds * 1000);
  assert.equal(deadlineText(at(230), now), "Answer within 4 min");
  assert.equal(deadlineText(at(20), now), "Answer within 1 min");
  assert.equal(deadlineText(at(3 * 3600 + 5 * 60), now, "Decide"), "Decide within 3 h 5 min");
  assert.equal(deadlineText(at(0), now), undefined);
});

test("an option's title says up front whether it needs approval", () => {
  assert.deepEqual(optionParts("PM404 · 09:30–11:35 · 640 EUR · business · needs approval"), {
    label: "PM404 · 09:30–11:35 · 640 EUR · business",
    needsApproval: true,
  });
  assert.deepEqual(optionParts("PM101 · 07:05–09:10 · 89 EUR"), {
    label: "PM101 · 07:05–09:10 · 89 EUR",
    needsApproval: false,
  });
});

test("a message the server marked interrupted reads as stopped; others do not", () => {
  assert.equal(isInterrupted({ id: "m", metadata: { pausemesh: { interrupted: true, runId: "r" } } }), true);
  assert.equal(isInterrupted({ id: "m", metadata: { pausemesh: { interrupted: false } } }), false);
  assert.equal(isInterrupted({ id: "m", metadata: { other: 1 } }), false);
  assert.equal(isInterrupted({ id: "m" }), false);
  assert.equal(isInterrupted(null), false);
  assert.equal(STOPPED_MARK, "Stopped \u2014 you sent a newer message");
});

test("the live interrupt event names the kept messages; a rollback's removed ones are not marked", () => {
  assert.deepEqual(interruptedIds({ runId: "r", mode: "interrupt", messageIds: ["a", 3, "b"] }), ["a", "b"]);
  assert.deepEqual(interruptedIds({ runId: "r", mode: "rollback", removedMessageIds: ["a"] }), []);
  assert.deepEqual(interruptedIds(undefined), []);
});
