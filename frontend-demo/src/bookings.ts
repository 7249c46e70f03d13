// What the demo's AG-UI state says about bookings, read defensively (the state is whatever the
// agent last wrote), and how a booking or a race outcome reads for the person.

export interface Booking {
  readonly flight: string;
  readonly destination: string | undefined;
  readonly confirmation: string | undefined;
  /** Other plain fields the airline returned (times, price…), in their order. */
  readonly details: readonly (readonly [string, string])[];
}

const KNOWN = new Set(["flight", "destination", "confirmation"]);

/** The bookings in an AG-UI state (`state.bookings`); anything unreadable is skipped. */
export function bookingsIn(state: unknown): Booking[] {
  const list = (state as { bookings?: unknown } | null | undefined)?.bookings;
  if (!Array.isArray(list)) return [];
  const found: Booking[] = [];
  for (const item of list) {
    if (typeof item !== "object" || item === null) continue;
    const record = item as Record<string, unknown>;
    const flight = record["flight"];
    if (typeof flight !== "string") continue;
    const text = (key: string): string | undefined =>
      typeof record[key] === "string" ? (record[key] as string) : undefined;
    found.push({
      flight,
      destination: text("destination"),
      confirmation: text("confirmation"),
      details: Object.entries(record)
        .filter(([key, value]) => !KNOWN.has(key) && (typeof value === "string" || typeof value === "number"))
        .map(([key, value]) => [humanize(key), String(value)] as const),
    });
  }
  return found;
}

/** A stable identity for a booking: its confirmation code, else its flight. */
export function bookingKey(booking: Booking): string {
  return booking.confirmation ?? `flight:${booking.flight}`;
}

/** "flight PM101 to Lisbon (confirmation PM-1A2B3C4D)" */
export function describeBooking(booking: Booking): string {
  const to = booking.destination === undefined ? "" : ` to ${booking.destination}`;
  const code = booking.confirmation === undefined ? "" : ` (confirmation ${booking.confirmation})`;
  return `flight ${booking.flight}${to}${code}`;
}

/**
 * What another tab (or a manager) recorded while this page was showing the question: the
 * bookings that appeared between `before` and `after`. `mine` is the answer this page tried
 * to send, when it tried one.
 */
export function recordedOutcome(
  before: readonly Booking[],
  after: readonly Booking[],
  mine: string | undefined,
): string {
  const known = new Set(before.map(bookingKey));
  const added = after.filter((b) => !known.has(bookingKey(b)));
  const recorded =
    added.length === 0
      ? "Another tab answered first, and nothing was booked."
      : `Another tab answered first: ${added.map(describeBooking).join(" and ")} ${
          added.length === 1 ? "was" : "were"
        } booked.`;
  if (mine === undefined) return recorded;
  const same = added.some((b) => b.flight === mine);
  return same
    ? `${recorded} That is the flight you chose; it was booked once.`
    : `${recorded} Your choice (${mine}) was not used.`;
}

function humanize(key: string): string {
  const words = key.replace(/[_-]+/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2").trim().toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}
