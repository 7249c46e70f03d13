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

/**
 * Each row's label, told apart from its namesakes (issue 44: five "Flight to Lisbon" rows, two
 * begun in the same minute, could not be told apart even with their times). The conversation
 * that began first keeps its title; each later one with the same title (case aside) adds the
 * next ordinal, "Flight to Lisbon (2)", skipping one a row already has as its own title. Only
 * the label changes: the stored title stays as the agent or the owner gave it, so a rename
 * is shown as typed. Read from the listed rows (the person's most recent 50), so numbering
 * is stable while those stay listed; deleting or renaming an earlier namesake renumbers the
 * later ones, which then tell apart the conversations that are left.
 */
export function distinctTitles(rows: readonly ThreadRow[]): Map<string, string> {
  const key = (title: string): string => title.trim().toLocaleLowerCase();
  const used = new Set(rows.map((row) => key(rowTitle(row))));
  const groups = new Map<string, ThreadRow[]>();
  for (const row of rows) {
    const group = groups.get(key(rowTitle(row)));
    if (group === undefined) groups.set(key(rowTitle(row)), [row]);
    else group.push(row);
  }
  const labels = new Map<string, string>();
  for (const group of groups.values()) {
    const ordered = [...group].sort(
      (a, b) =>
        (a.createdAt?.getTime() ?? Number.MAX_SAFE_INTEGER) - (b.createdAt?.getTime() ?? Number.MAX_SAFE_INTEGER) ||
        (a.threadId < b.threadId ? -1 : a.threadId > b.threadId ? 1 : 0),
    );
    let next = 2;
    ordered.forEach((row, index) => {
      const title = rowTitle(row);
      if (index === 0) {
        labels.set(row.threadId, title);
        return;
      }
      while (used.has(key(`${title} (${next})`))) next += 1;
      const label = `${title} (${next})`;
      used.add(key(label));
      labels.set(row.threadId, label);
      next += 1;
    });
  }
  return labels;
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
