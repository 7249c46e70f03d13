// Checks AG-UI events (one JSON object per stdin line) against the official @ag-ui/core 1.0.0
// zod EventSchema and the official client's enforce stage (which warns on unknown members and
// fails on malformed known ones), and runs the "sequence" ones through its verifyEvents.
// Input lines: {"kind":"single"|"sequence", "event": {...}}. Prints one JSON report line.
// Used by tests/protocols/test_agui_zod.py.
import { EventSchema } from "@ag-ui/core/schemas";
import { enforceEvents, verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";
import { readFileSync } from "node:fs";

const failures = [];
const warnings = [];
const warn = console.warn;
console.warn = (...args) => { warnings.push(args.join(" ")); };

// Equal as JSON: zod strips unknown keys, so a difference means we sent something unknown.
const same = (a, b) => JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

const lines = readFileSync(0, "utf8").split("\n").filter((l) => l.trim());
const sequence = [];
for (const line of lines) {
  const { kind, event } = JSON.parse(line);
  const parsed = EventSchema.safeParse(event);
  if (!parsed.success) {
    failures.push({ type: event.type, error: parsed.error.issues });
    continue;
  }
  if (!same(parsed.data, event)) {
    failures.push({ type: event.type, error: "unknown or altered members", parsed: parsed.data, sent: event });
  }
  try {
    const before = warnings.length;
    const out = await lastValueFrom(from([structuredClone(event)]).pipe(enforceEvents(), toArray()));
    if (warnings.length > before || out.length !== 1 || !same(out[0], event)) {
      failures.push({ type: event.type, error: "enforce stage changed or warned", warnings: warnings.slice(before) });
    }
  } catch (error) {
    failures.push({ type: event.type, error: "enforce: " + String(error && error.message ? error.message : error) });
  }
  if (kind === "sequence") sequence.push(parsed.data);
}
try {
  await lastValueFrom(from(sequence).pipe(verifyEvents(), toArray()));
} catch (error) {
  failures.push({ type: "sequence", error: String(error && error.message ? error.message : error) });
}
console.warn = warn;
console.log(JSON.stringify({ checked: lines.length, sequence: sequence.length, failures, warnings }));
