// How the chat reads: when a message was written, whose move a pending question is, how long
// is left to answer, and what an option's title says up front. Pure functions (Node tests).

/** The reason of a pause someone else (a manager) decides. */
export const APPROVAL_REASON = "approval_required";

/** The last part of a flight option's title when booking it waits for a manager. */
export const NEEDS_APPROVAL = "needs approval";

const STAMPED = /^[a-z]+-(\d{13})-/;

/** A message id the page or the demo agent minted with its time (`<kind>-<epoch ms>-<uuid>`). */
export function stampedId(kind: string, uuid: string, now: number = Date.now()): string {
  return `${kind}-${now}-${uuid}`;
}

/** When a message was written, if its id says (AG-UI messages carry no time). */
export function messageTime(id: string): Date | undefined {
  const match = STAMPED.exec(id);
  if (match === null) return undefined;
  const at = new Date(Number(match[1]));
  return Number.isNaN(at.getTime()) ? undefined : at;
}

/** Who the person on a message is: "You", or the manager whose decision it records. */
export function speakerOf(role: string, id: string): string {
  if (role !== "user") return "Assistant";
  return id.startsWith("decision-") ? "Manager" : "You";
}

export type Move = "yours" | "manager" | "none";

/** Whose move a set of pending interrupts is: a manager's when every one is an approval. */
export function whoseMove(pending: readonly { reason?: unknown }[]): Move {
  if (pending.length === 0) return "none";
  return pending.every((i) => i.reason === APPROVAL_REASON) ? "manager" : "yours";
}

/** The sidebar badge for a thread's pending questions. */
export function moveBadge(move: Move): string | undefined {
  if (move === "manager") return "Waiting for the manager";
  if (move === "yours") return "Needs your answer";
  return undefined;
}

/** The pending interrupts a `GET /agui/threads/{id}` snapshot reports. */
export function pendingIn(snapshot: unknown): { id: string; reason?: unknown }[] {
  const list = (snapshot as { pendingInterrupts?: unknown } | null)?.pendingInterrupts;
  if (!Array.isArray(list)) return [];
  return list.filter(
    (item): item is { id: string; reason?: unknown } =>
      typeof item === "object" && item !== null && typeof (item as { id?: unknown }).id === "string",
  );
}

/** "Answer within 4 min" (one format, in minutes, rounded up); undefined once it is over. */
export function deadlineText(expiresAt: Date, now: Date, verb = "Answer"): string | undefined {
  const ms = expiresAt.getTime() - now.getTime();
  if (ms <= 0) return undefined;
  const minutes = Math.ceil(ms / 60_000);
  if (minutes < 120) return `${verb} within ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return `${verb} within ${hours} h ${minutes % 60} min`;
}

/** An option's title split into what it is and whether it needs approval. */
export function optionParts(title: string): { label: string; needsApproval: boolean } {
  const suffix = ` \u00b7 ${NEEDS_APPROVAL}`;
  return title.endsWith(suffix)
    ? { label: title.slice(0, -suffix.length), needsApproval: true }
    : { label: title, needsApproval: false };
}

/** "7 Dec, 18:40": the day and time a conversation began (tells same-titled rows apart). */
export function dayAndTime(date: Date): string {
  const day = date.toLocaleDateString(undefined, { day: "numeric", month: "short" });
  const time = date.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  return `${day}, ${time}`;
}

/** Three requests to start from, on the empty page. */
export const SUGGESTIONS: readonly string[] = [
  "I need a flight to Porto next week",
  "Book me a business flight to Zürich",
  "What can you do?",
];

/** The mark on what a run said before a newer message stopped it (double texting). */
export const STOPPED_MARK = "Stopped \u2014 you sent a newer message";

/** Whether a stored message belongs to a run a newer message stopped: the server marks it
 * `metadata.pausemesh.interrupted` (in a snapshot, after a reload). */
export function isInterrupted(message: unknown): boolean {
  const metadata = (message as { metadata?: unknown } | null)?.metadata;
  if (typeof metadata !== "object" || metadata === null) return false;
  const ours = (metadata as { pausemesh?: unknown }).pausemesh;
  return typeof ours === "object" && ours !== null && (ours as { interrupted?: unknown }).interrupted === true;
}

/** The messages a live `pausemesh.run_interrupted` event says were kept and marked (its
 * `interrupt` form; a `rollback` removed them instead). */
export function interruptedIds(value: unknown): string[] {
  const event = value as { mode?: unknown; messageIds?: unknown } | null;
  if (event === null || typeof event !== "object" || event.mode !== "interrupt") return [];
  const ids = event.messageIds;
  return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === "string") : [];
}
