// The sidebar's data: a page of GET /agui/threads, read defensively, and how its rows read.

export interface ThreadRow {
  readonly threadId: string;
  readonly title: string | undefined;
  readonly updatedAt: Date | undefined;
  readonly createdAt: Date | undefined;
  readonly pending: number;
  readonly lastSequence: number;
}

/** The rows of a `GET /agui/threads` answer (`{threads: [...], nextCursor}`). */
export function threadRows(body: unknown): ThreadRow[] {
  const list = (body as { threads?: unknown } | null)?.threads;
  if (!Array.isArray(list)) return [];
  const rows: ThreadRow[] = [];
  for (const item of list) {
    const row = item as Record<string, unknown> | null;
    if (row === null || typeof row !== "object" || typeof row["threadId"] !== "string") continue;
    const title = typeof row["title"] === "string" && row["title"].trim() !== "" ? row["title"] : undefined;
    const date = (key: string): Date | undefined => {
      const value = typeof row[key] === "string" ? new Date(row[key]) : undefined;
      return value !== undefined && !Number.isNaN(value.getTime()) ? value : undefined;
    };
    const pending = row["pendingInterrupts"];
    const sequence = row["lastSequence"];
    rows.push({
      threadId: row["threadId"],
      title,
      updatedAt: date("updatedAt"),
      createdAt: date("createdAt"),
      pending: typeof pending === "number" && pending > 0 ? pending : 0,
      lastSequence: typeof sequence === "number" ? sequence : 0,
    });
  }
  return rows;
}

export const UNTITLED = "New conversation";

export function rowTitle(row: { title: string | undefined }): string {
  return row.title ?? UNTITLED;
}

/** "just now", "5 min ago", "14:05", "3 Mar" — short, for a sidebar row. */
export function relativeTime(then: Date, now: Date): string {
  const seconds = Math.round((now.getTime() - then.getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.max(1, Math.round(seconds / 60))} min ago`;
  const sameDay = then.toDateString() === now.toDateString();
  if (sameDay) return clock(then);
  return then.toLocaleDateString(undefined, { day: "numeric", month: "short" });
}

/** "14:05" in the person's locale. */
export function clock(date: Date): string {
  return date.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}
