// The manager's approvals page: the pending pauses this person may decide (GET /v1/approvals),
// each with its exact terms and a form from its responseSchema; a decision is one
// POST /v1/approvals/{continuationId} with an Idempotency-Key fixed per request, so a retry
// after a lost answer decides nothing twice. The traveller's thread continues on the server.

import { type Interrupt, randomUUID } from "@ag-ui/client";
import { QuestionForm } from "./question";
import type { Json } from "./schema";

export interface Approval {
  readonly continuationId: string;
  readonly message: string;
  readonly threadTitle: string | undefined;
  readonly askedBy: string | undefined;
  readonly expiresAt: string | undefined;
  readonly responseSchema: unknown;
}

/** The rows of a `GET /v1/approvals` answer (`{approvals: [...], nextCursor}`). */
export function approvalRows(body: unknown): Approval[] {
  const list = (body as { approvals?: unknown } | null)?.approvals;
  if (!Array.isArray(list)) return [];
  const rows: Approval[] = [];
  for (const item of list) {
    const row = item as Record<string, unknown> | null;
    if (row === null || typeof row !== "object") continue;
    const text = (key: string): string | undefined =>
      typeof row[key] === "string" ? (row[key] as string) : undefined;
    const id = text("continuationId");
    if (id === undefined) continue;
    rows.push({
      continuationId: id,
      message: text("message") ?? "An approval is requested.",
      threadTitle: text("threadTitle"),
      askedBy: text("askedBy"),
      expiresAt: text("expiresAt"),
      responseSchema: row["responseSchema"],
    });
  }
  return rows;
}

/** What the approver is told after deciding, from the answer they gave. */
export function decidedText(payload: Json): string {
  const decision = (payload as { decision?: unknown } | null)?.decision;
  if (decision === "approve") return "Approved. The traveller's conversation goes on with the booking.";
  if (decision === "reject") return "Declined. The traveller is told it was not approved.";
  return "Your answer was recorded. The traveller's conversation goes on.";
}

const REFRESH_MS = 4_000;

export class ApprovalsView {
  private readonly forms = new Map<string, QuestionForm>();
  private readonly keys = new Map<string, string>();
  private readonly done = new Map<string, string>();
  private timer: number | undefined;

  constructor(
    private readonly list: HTMLElement,
    private readonly status: HTMLElement,
    private readonly base: URL,
    private readonly onCount: (count: number) => void,
  ) {}

  start(): void {
    void this.refresh();
  }

  async refresh(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    try {
      const response = await fetch(new URL("v1/approvals?limit=50", this.base), {
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.render(approvalRows(await response.json()));
    } catch {
      this.status.textContent = "Could not load the approvals; retrying.";
    }
    this.timer = window.setTimeout(() => void this.refresh(), REFRESH_MS);
  }

  private render(rows: Approval[]): void {
    this.onCount(rows.length);
    const doc = this.list.ownerDocument;
    const open = new Set(rows.map((r) => r.continuationId));
    for (const [id, form] of this.forms) {
      if (!open.has(id) && !this.done.has(id)) {
        form.destroy();
        this.forms.delete(id);
        doc.getElementById(`approval-${id}`)?.remove();
      }
    }
    this.status.textContent =
      rows.length === 0 && this.done.size === 0 ? "Nothing is waiting for your approval." : "";
    for (const row of rows) {
      if (this.forms.has(row.continuationId) || this.done.has(row.continuationId)) continue;
      this.list.append(this.card(row));
    }
  }

  private card(row: Approval): HTMLElement {
    const doc = this.list.ownerDocument;
    const card = doc.createElement("li");
    card.className = "approval";
    card.id = `approval-${row.continuationId}`;
    const about = doc.createElement("p");
    about.className = "approval-about";
    const parts = [
      row.askedBy === undefined ? undefined : `Asked by ${row.askedBy}`,
      row.threadTitle === undefined ? undefined : `in “${row.threadTitle}”`,
    ].filter((p): p is string => p !== undefined);
    about.textContent = parts.join(" · ");
    const body = doc.createElement("section");
    body.className = "question";
    card.append(about, body);
    const interrupt: Interrupt = {
      id: row.continuationId,
      reason: "approval_required",
      message: row.message,
      responseSchema: row.responseSchema as Record<string, unknown>,
      ...(row.expiresAt === undefined ? {} : { expiresAt: row.expiresAt }),
    } as Interrupt;
    const index = this.forms.size + this.done.size;
    const form = new QuestionForm(body, [interrupt], {
      idPrefix: `approval${index}`,
      heading: "Approval requested",
      onAnswer: (answers) => void this.decide(row, answers.get(row.continuationId) ?? null, card),
    });
    body.setAttribute("aria-labelledby", `approval${index}-heading`);
    this.forms.set(row.continuationId, form);
    return card;
  }

  private async decide(row: Approval, payload: Json, card: HTMLElement): Promise<void> {
    const form = this.forms.get(row.continuationId);
    form?.setBusy(true);
    let key = this.keys.get(row.continuationId);
    if (key === undefined) {
      key = randomUUID();
      this.keys.set(row.continuationId, key);
    }
    let response: Response | undefined;
    try {
      response = await fetch(new URL(`v1/approvals/${encodeURIComponent(row.continuationId)}`, this.base), {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json", "Idempotency-Key": key },
        body: JSON.stringify({ payload }),
      });
    } catch {
      form?.setBusy(false);
      form?.showError("Could not reach the server, so nothing was decided. Try again.");
      return;
    }
    const doc = card.ownerDocument;
    const outcome = doc.createElement("p");
    outcome.className = "approval-outcome";
    outcome.setAttribute("role", "status");
    if (response.ok) {
      outcome.textContent = decidedText(payload);
    } else if (response.status === 404 || response.status === 409 || response.status === 410) {
      outcome.textContent = "This request was already decided, withdrawn or expired; nothing was changed.";
    } else {
      form?.setBusy(false);
      form?.showError(`The decision was not accepted (HTTP ${response.status}).`);
      return;
    }
    this.done.set(row.continuationId, outcome.textContent);
    form?.destroy();
    card.querySelector(".question")?.remove();
    // What was decided stays on the card, with the outcome under it.
    const terms = doc.createElement("p");
    terms.className = "approval-terms";
    terms.textContent = row.message;
    card.append(terms, outcome);
    card.classList.add("decided");
  }
}
