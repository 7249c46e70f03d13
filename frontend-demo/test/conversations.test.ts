import assert from "node:assert/strict";
import { test } from "node:test";
import { bookingsIn, recordedOutcome } from "../src/bookings.js";
import { distinctTitles, relativeTime, rowTitle, threadRows, UNTITLED } from "../src/conversations.js";
import { personCookie, readPeople } from "../src/people.js";
import { choiceTitles, formModel } from "../src/schema.js";

test("a thread list page becomes rows; a bad row is skipped, not fatal", () => {
  const rows = threadRows({
    threads: [
      { threadId: "a", title: "Lisbon in May", updatedAt: "2026-05-01T10:00:00Z", pendingInterrupts: 1 },
      { threadId: "b", title: null, updatedAt: "nonsense", pendingInterrupts: 0 },
      { title: "no id" },
      "junk",
    ],
    nextCursor: null,
  });
  assert.deepEqual(
    rows.map((r) => [r.threadId, rowTitle(r), r.pending, r.updatedAt?.toISOString()]),
    [
      ["a", "Lisbon in May", 1, "2026-05-01T10:00:00.000Z"],
      ["b", "New conversation", 0, undefined],
    ],
  );
  assert.deepEqual(threadRows({ error: "x" }), []);
});

test("sidebar times read 'just now', then minutes, then the clock or the date", () => {
  const now = new Date("2026-05-01T12:00:00Z");
  assert.equal(relativeTime(new Date("2026-05-01T11:59:40Z"), now), "just now");
  assert.equal(relativeTime(new Date("2026-05-01T11:55:00Z"), now), "5 min ago");
  assert.notEqual(relativeTime(new Date("2026-04-20T08:00:00Z"), now), "just now");
});

test("bookings are read from the state; anything without a flight is skipped", () => {
  const bookings = bookingsIn({
    bookings: [
      { flight: "PM101", destination: "Lisbon", confirmation: "PM-AAAA1111", departs: "07:05" },
      { destination: "nowhere" },
      null,
    ],
  });
  assert.equal(bookings.length, 1);
  assert.equal(bookings[0]?.confirmation, "PM-AAAA1111");
  assert.deepEqual(bookings[0]?.details, [["Departs", "07:05"]]);
  assert.deepEqual(bookingsIn({}), []);
  assert.deepEqual(bookingsIn(undefined), []);
});

test("a lost race names the booking that was recorded and the choice that was not used", () => {
  const before = bookingsIn({ bookings: [{ flight: "PM202", confirmation: "PM-OLD" }] });
  const after = bookingsIn({
    bookings: [
      { flight: "PM202", confirmation: "PM-OLD" },
      { flight: "PM101", destination: "Lisbon", confirmation: "PM-NEW" },
    ],
  });
  assert.equal(
    recordedOutcome(before, after, "PM303"),
    "Another tab answered first: flight PM101 to Lisbon (confirmation PM-NEW) was booked. Your choice (PM303) was not used.",
  );
  assert.match(recordedOutcome(before, after, "PM101"), /That is the flight you chose; it was booked once\./);
  assert.equal(recordedOutcome(before, before, "PM303"), "Another tab answered first, and nothing was booked. Your choice (PM303) was not used.");
  assert.doesNotMatch(recordedOutcome(before, after, undefined), /busy|try again/i);
});

test("option titles come from enumNames or oneOf titles, in option order", () => {
  const model = formModel({
    type: "object",
    properties: {
      flight: { type: "string", enum: ["PM101", "PM202"], enumNames: ["PM101 · 07:05 · 89 EUR"] },
      seat: { oneOf: [{ const: "a", title: "Aisle" }, { const: "w" }] },
    },
  });
  assert.deepEqual(model.fields[0]?.titles, ["PM101 · 07:05 · 89 EUR", undefined]);
  assert.deepEqual(model.fields[1]?.titles, ["Aisle", undefined]);
  assert.deepEqual(choiceTitles({ enum: ["x"] }), [undefined]);
});

test("the demo people answer is read only when it names who is calling", () => {
  const people = readPeople({
    person: "manager",
    people: [
      { id: "traveller", name: "Traveller", roles: [] },
      { id: "manager", name: "Manager", roles: ["manager"] },
    ],
  });
  assert.equal(people?.current, "manager");
  assert.deepEqual(people?.people.map((p) => p.roles), [[], ["manager"]]);
  assert.equal(readPeople({ person: "ghost", people: [{ id: "traveller" }] }), undefined);
  assert.equal(readPeople({ detail: "Not Found" }), undefined);
  assert.match(personCookie("manager"), /^pausemesh_demo_user=manager; Path=\/; SameSite=Strict/);
});

test("namesakes are told apart: the first begun keeps the title, later ones add an ordinal", () => {
  const at = (minute: number): Date => new Date(Date.UTC(2026, 11, 7, 14, minute));
  const row = (threadId: string, title: string | undefined, created: Date | undefined) => ({
    threadId,
    title,
    createdAt: created,
    updatedAt: created,
    pending: 0,
    lastSequence: 1,
  });
  // Listed newest first, as GET /agui/threads answers; two began in the same minute.
  const rows = [
    row("t-c", "Flight to Lisbon", at(5)),
    row("t-b", "flight to lisbon", at(1)),
    row("t-a", "Flight to Lisbon", at(1)),
    row("t-own", "Flight to Lisbon (2)", at(0)),
    row("t-porto", "Flight to Porto", at(2)),
    row("t-new", undefined, undefined),
  ];
  const labels = distinctTitles(rows);
  assert.deepEqual(Object.fromEntries(labels), {
    "t-a": "Flight to Lisbon",
    "t-b": "flight to lisbon (3)", // (2) is a row's own title
    "t-c": "Flight to Lisbon (4)",
    "t-own": "Flight to Lisbon (2)",
    "t-porto": "Flight to Porto",
    "t-new": UNTITLED,
  });
  assert.equal(new Set(labels.values()).size, rows.length);
});
