// The thread id lives in the page URL (`?thread=…`) so a reload, a bookmark or a second tab
// lands on the same conversation.

const THREAD_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The thread named in `url`, if it is a plausible id. */
export function threadFromUrl(url: URL): string | undefined {
  const value = url.searchParams.get("thread");
  return value !== null && THREAD_ID.test(value) ? value : undefined;
}

/** `url` with `?thread=<id>` set and everything else kept. */
export function urlWithThread(url: URL, threadId: string): URL {
  const next = new URL(url.href);
  next.searchParams.set("thread", threadId);
  return next;
}

/** The ids of the interrupts a GET /agui/threads/{id} snapshot reports as pending. */
export function pendingIds(snapshot: unknown): Set<string> {
  const list = (snapshot as { pendingInterrupts?: unknown } | null)?.pendingInterrupts;
  const ids = new Set<string>();
  if (!Array.isArray(list)) return ids;
  for (const item of list) {
    if (typeof item === "string") ids.add(item);
    else if (typeof item === "object" && item !== null) {
      const id = (item as { id?: unknown; interruptId?: unknown }).id ??
        (item as { interruptId?: unknown }).interruptId;
      if (typeof id === "string") ids.add(id);
    }
  }
  return ids;
}

/** The snapshot's last thread sequence, 0 when absent. */
export function lastSequence(snapshot: unknown): number {
  const value = (snapshot as { lastSequence?: unknown } | null)?.lastSequence;
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0;
}
