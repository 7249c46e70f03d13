// The approvals inbox's filters and a request's timers, kept apart from the page so they can
// be tested without a browser: the query `GET /v1/approvals` takes (tag, agent, askedBy,
// olderThanSeconds, newerThanSeconds), and what a card says about its reminder and escalation.

export interface InboxFilters {
  readonly tag: string;
  readonly agent: string;
  readonly askedBy: string;
  /** One of AGE_CHOICES' values ("" is any age). */
  readonly age: string;
}

export const NO_FILTERS: InboxFilters = { tag: "", agent: "", askedBy: "", age: "" };

/** The "Waiting" choices: `newer:S` asked within S seconds, `older:S` waiting at least S. */
export const AGE_CHOICES: readonly (readonly [string, string])[] = [
  ["", "Any time"],
  ["newer:3600", "Asked in the last hour"],
  ["older:3600", "For over an hour"],
  ["older:86400", "For over a day"],
];

const FIELDS = ["tag", "agent", "askedBy", "age"] as const;

/** The filters a page address carries (`?view=approvals&tag=porto`), unknown ages dropped. */
export function filtersFrom(params: URLSearchParams): InboxFilters {
  const read = (key: string): string => (params.get(key) ?? "").trim().slice(0, 200);
  const age = read("age");
  return {
    tag: read("tag"),
    agent: read("agent"),
    askedBy: read("askedBy"),
    age: AGE_CHOICES.some(([value]) => value === age) ? age : "",
  };
}

export function isFiltered(filters: InboxFilters): boolean {
  return FIELDS.some((key) => filters[key] !== "");
}

/** The query string of `GET /v1/approvals` for these filters. */
export function inboxQuery(filters: InboxFilters, limit = 50): URLSearchParams {
  const query = new URLSearchParams({ limit: String(limit) });
  if (filters.tag !== "") query.set("tag", filters.tag);
  if (filters.agent !== "") query.set("agent", filters.agent);
  if (filters.askedBy !== "") query.set("askedBy", filters.askedBy);
  const [kind, seconds] = filters.age.split(":");
  if (kind === "newer" && seconds !== undefined) query.set("newerThanSeconds", seconds);
  if (kind === "older" && seconds !== undefined) query.set("olderThanSeconds", seconds);
  return query;
}

/** The filters written into a page address (empty ones removed), to survive a reload. */
export function withFilters(location: URL, filters: InboxFilters): URL {
  const next = new URL(location.href);
  for (const key of FIELDS) {
    if (filters[key] === "") next.searchParams.delete(key);
    else next.searchParams.set(key, filters[key]);
  }
  return next;
}

export interface Timer {
  readonly dueAt: string;
  readonly firedAt: string | undefined;
}

export interface Escalation extends Timer {
  readonly to: readonly string[];
}

export interface Timers {
  readonly reminder: Timer | undefined;
  readonly escalation: Escalation | undefined;
}

function timer(value: unknown): Timer | undefined {
  const record = value as { dueAt?: unknown; firedAt?: unknown } | null;
  if (record === null || typeof record !== "object" || typeof record.dueAt !== "string") return undefined;
  return { dueAt: record.dueAt, firedAt: typeof record.firedAt === "string" ? record.firedAt : undefined };
}

/** An inbox item's `reminder` and `escalation`, each undefined when absent or malformed. */
export function readTimers(row: Record<string, unknown>): Timers {
  const reminder = timer(row["reminder"]);
  const escalation = timer(row["escalation"]);
  const to = (row["escalation"] as { to?: unknown } | null)?.to;
  return {
    reminder,
    escalation:
      escalation === undefined
        ? undefined
        : { ...escalation, to: Array.isArray(to) ? to.filter((t): t is string => typeof t === "string") : [] },
  };
}

/** An approver's text form (`role:director`, a principal id) as a person reads it. */
export function approverLabel(text: string): string {
  return text.startsWith("role:") ? `any ${text.slice("role:".length)}` : text;
}

/** What a card says about its timers: sent and escalated ones with their time, due ones with theirs. */
export function timerLines(timers: Timers, formatTime: (iso: string) => string): string[] {
  const lines: string[] = [];
  const { reminder, escalation } = timers;
  if (reminder !== undefined) {
    lines.push(
      reminder.firedAt === undefined
        ? `Reminder due at ${formatTime(reminder.dueAt)}`
        : `Reminder sent at ${formatTime(reminder.firedAt)}`,
    );
  }
  if (escalation !== undefined) {
    const to = escalation.to.map(approverLabel).join(", ") || "more approvers";
    lines.push(
      escalation.firedAt === undefined
        ? `Escalates to ${to} at ${formatTime(escalation.dueAt)}`
        : `Escalated to ${to} at ${formatTime(escalation.firedAt)}`,
    );
  }
  return lines;
}
