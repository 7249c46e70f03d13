import assert from "node:assert/strict";
import { test } from "node:test";
import {
  NO_FILTERS,
  filtersFrom,
  inboxQuery,
  isFiltered,
  readTimers,
  timerLines,
  withFilters,
} from "../src/inbox.js";

test("the inbox filters become the query /v1/approvals takes, empty ones left out", () => {
  assert.equal(inboxQuery(NO_FILTERS).toString(), "limit=50");
  const query = inboxQuery({ tag: "porto", agent: "travel-assistant", askedBy: "traveller", age: "older:3600" });
  assert.equal(query.get("tag"), "porto");
  assert.equal(query.get("agent"), "travel-assistant");
  assert.equal(query.get("askedBy"), "traveller");
  assert.equal(query.get("olderThanSeconds"), "3600");
  assert.equal(query.get("newerThanSeconds"), null);
  assert.equal(inboxQuery({ ...NO_FILTERS, age: "newer:3600" }).get("newerThanSeconds"), "3600");
});

test("filters survive a reload in the page address; an unknown age is dropped", () => {
  const page = new URL("http://demo/?view=approvals");
  const filters = { tag: "lisbon", agent: "", askedBy: "", age: "older:86400" };
  const next = withFilters(page, filters);
  assert.equal(next.searchParams.get("view"), "approvals");
  assert.equal(next.searchParams.get("agent"), null);
  assert.deepEqual(filtersFrom(next.searchParams), filters);
  assert.equal(isFiltered(filtersFrom(next.searchParams)), true);
  assert.deepEqual(filtersFrom(new URLSearchParams("age=older:5&tag=%20x%20")), { ...NO_FILTERS, tag: "x" });
  assert.equal(isFiltered(filtersFrom(withFilters(next, NO_FILTERS).searchParams)), false);
});

test("a card says when its reminder went out and to whom it was escalated", () => {
  const time = (iso: string): string => iso.slice(11, 16);
  const due = readTimers({
    reminder: { dueAt: "2026-05-01T10:02:00Z" },
    escalation: { dueAt: "2026-05-01T10:05:00Z", to: ["role:director", 7] },
  });
  assert.deepEqual(timerLines(due, time), ["Reminder due at 10:02", "Escalates to any director at 10:05"]);
  const fired = readTimers({
    reminder: { dueAt: "2026-05-01T10:02:00Z", firedAt: "2026-05-01T10:02:01Z" },
    escalation: { dueAt: "2026-05-01T10:05:00Z", to: ["carol"], firedAt: "2026-05-01T10:05:02Z" },
  });
  assert.deepEqual(timerLines(fired, time), ["Reminder sent at 10:02", "Escalated to carol at 10:05"]);
  assert.deepEqual(timerLines(readTimers({ reminder: "soon", escalation: null }), time), []);
});
