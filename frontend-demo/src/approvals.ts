// The manager's approvals page: the pending pauses this person may decide (GET /v1/approvals),
// each with its exact terms and a form from its responseSchema; a decision is one
// POST /v1/approvals/{continuationId} with an Idempotency-Key fixed per request, so a retry
// after a lost answer decides nothing twice. The traveller's thread continues on the server.
// A search form narrows the list (tag, agent, who asked, how long it waits: the inbox's own
// filters, kept in the page address); each card says when its reminder went out and whether
// it was escalated, and to whom.

import { type Interrupt, randomUUID } from "@ag-ui/client";
import {
  AGE_CHOICES,
  type InboxFilters,
  filtersFrom,
  inboxQuery,
  isFiltered,
  readTimers,
  type Timers,
  timerLines,
  withFilters,
} from "./inbox";
import { QuestionForm } from "./question";
import type { Json } from "./schema";

export interface Approval {
  readonly continuationId: string;
  readonly message: string;
  readonly threadTitle: string | undefined;
  readonly askedBy: string | undefined;
  readonly expiresAt: string | undefined;
  readonly responseSchema: unknown;
  readonly tags: readonly string[];
  readonly agent: string | undefined;
  readonly timers: Timers;
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
      tags: Array.isArray(row["tags"]) ? row["tags"].filter((t): t is string => typeof t === "string") : [],
      agent: text("agent"),
      timers: readTimers(row),
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

function clockTime(iso: string): string {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** The search form's fields, by name. */
interface FilterForm {
  readonly form: HTMLFormElement;
  readonly fields: Record<keyof InboxFilters, HTMLInputElement | HTMLSelectElement>;
  readonly suggestions: Record<"tag" | "agent" | "askedBy", HTMLDataListElement>;
}

export class ApprovalsView {
  private readonly forms = new Map<string, QuestionForm>();
  private readonly keys = new Map<string, string>();
  private readonly done = new Map<string, string>();
  private readonly timerLists = new Map<string, HTMLElement>();
  private readonly seen = { tag: new Set<string>(), agent: new Set<string>(), askedBy: new Set<string>() };
  private filters: InboxFilters;
  private filter: FilterForm | undefined;
  private timer: number | undefined;
  // Answers to an older query that arrive after a newer one started are dropped.
  private generation = 0;

  constructor(
    private readonly list: HTMLElement,
    private readonly status: HTMLElement,
    private readonly base: URL,
    private readonly onCount: (count: number) => void,
  ) {
    this.filters = filtersFrom(new URL(window.location.href).searchParams);
  }

  start(form?: HTMLFormElement): void {
    if (form !== undefined) this.filter = this.mountFilters(form);
    void this.refresh();
  }

  async refresh(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    const generation = ++this.generation;
    const filters = this.filters;
    try {
      const query = inboxQuery(filters).toString();
      const response = await fetch(new URL(`v1/approvals?${query}`, this.base), {
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const rows = approvalRows(await response.json());
      if (generation === this.generation) this.render(rows, filters);
    } catch {
      if (generation === this.generation) this.status.textContent = "Could not load the approvals; retrying.";
    }
    if (generation === this.generation) this.timer = window.setTimeout(() => void this.refresh(), REFRESH_MS);
  }

  private mountFilters(form: HTMLFormElement): FilterForm {
    const doc = form.ownerDocument;
    const get = <T extends HTMLElement>(name: string): T => {
      const element = form.querySelector<T>(`[name="${name}"]`);
      if (element === null) throw new Error(`the filter form has no ${name}`);
      return element;
    };
    const list = (id: string): HTMLDataListElement => doc.getElementById(id) as HTMLDataListElement;
    const age = get<HTMLSelectElement>("age");
    age.replaceChildren(
      ...AGE_CHOICES.map(([value, label]) => {
        const option = doc.createElement("option");
        option.value = value;
        option.textContent = label;
        return option;
      }),
    );
    const mounted: FilterForm = {
      form,
      fields: { tag: get("tag"), agent: get("agent"), askedBy: get("askedBy"), age },
      suggestions: { tag: list("filter-tags"), agent: list("filter-agents"), askedBy: list("filter-askers") },
    };
    for (const key of ["tag", "agent", "askedBy", "age"] as const) mounted.fields[key].value = this.filters[key];
    const apply = (filters: InboxFilters): void => {
      this.filters = filters;
      window.history.replaceState(null, "", withFilters(new URL(window.location.href), filters).href);
      void this.refresh();
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = (key: keyof InboxFilters): string => mounted.fields[key].value.trim();
      apply({ tag: value("tag"), agent: value("agent"), askedBy: value("askedBy"), age: value("age") });
    });
    form.addEventListener("reset", () => apply({ tag: "", agent: "", askedBy: "", age: "" }));
    age.addEventListener("change", () => form.requestSubmit());
    form.hidden = false;
    return mounted;
  }

  /** Offers what the inbox has shown so far as suggestions for the text filters. */
  private suggest(rows: Approval[]): void {
    const filter = this.filter;
    if (filter === undefined) return;
    const add = (key: "tag" | "agent" | "askedBy", value: string | undefined): void => {
      if (value === undefined || this.seen[key].has(value)) return;
      this.seen[key].add(value);
      const option = filter.form.ownerDocument.createElement("option");
      option.value = value;
      filter.suggestions[key].append(option);
    };
    for (const row of rows) {
      for (const tag of row.tags) add("tag", tag);
      add("agent", row.agent);
      add("askedBy", row.askedBy);
    }
  }

  private render(rows: Approval[], filters: InboxFilters): void {
    const filtered = isFiltered(filters);
    if (!filtered) this.onCount(rows.length);
    this.suggest(rows);
    const doc = this.list.ownerDocument;
    const open = new Set(rows.map((r) => r.continuationId));
    for (const [id, form] of this.forms) {
      if (!open.has(id) && !this.done.has(id)) {
        form.destroy();
        this.forms.delete(id);
        this.timerLists.delete(id);
        doc.getElementById(`approval-${id}`)?.remove();
      }
    }
    if (filtered) {
      this.status.textContent =
        rows.length === 0
          ? "No approval request matches these filters."
          : `${rows.length} ${rows.length === 1 ? "request matches" : "requests match"} these filters.`;
    } else {
      this.status.textContent =
        rows.length === 0 && this.done.size === 0 ? "Nothing is waiting for your approval." : "";
    }
    const wanted: HTMLElement[] = [];
    for (const row of rows) {
      if (this.done.has(row.continuationId)) continue;
      if (!this.forms.has(row.continuationId)) this.list.append(this.card(row));
      this.showTimers(row);
      const card = doc.getElementById(`approval-${row.continuationId}`);
      if (card !== null) wanted.push(card);
    }
    // Newest first, as the inbox lists them; moved only when out of order (a move would
    // take the keyboard focus away from a card being answered).
    const shown = [...this.list.children].filter((c) => !c.classList.contains("decided"));
    if (shown.length !== wanted.length || shown.some((card, i) => card !== wanted[i])) {
      for (const card of wanted) this.list.append(card);
    }
  }

  private showTimers(row: Approval): void {
    const list = this.timerLists.get(row.continuationId);
    if (list === undefined) return;
    const lines = timerLines(row.timers, clockTime);
    const text = lines.join("\n");
    if (list.dataset["text"] === text) return;
    list.dataset["text"] = text;
    const doc = list.ownerDocument;
    list.replaceChildren(
      ...lines.map((line) => {
        const item = doc.createElement("li");
        item.textContent = line;
        item.className = line.startsWith("Escalated") ? "escalated" : line.startsWith("Reminder sent") ? "reminded" : "";
        return item;
      }),
    );
    list.hidden = lines.length === 0;
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
    const labels = doc.createElement("p");
    labels.className = "approval-labels";
    if (row.agent !== undefined) {
      const agent = doc.createElement("span");
      agent.className = "approval-agent";
      agent.textContent = `Agent: ${row.agent}`;
      labels.append(agent);
    }
    if (row.tags.length > 0) {
      const named = doc.createElement("span");
      named.textContent = "Tags:";
      labels.append(named);
    }
    for (const tag of row.tags) {
      const chip = doc.createElement("span");
      chip.className = "tag";
      chip.textContent = tag;
      labels.append(chip);
    }
    labels.hidden = labels.childElementCount === 0;
    const timers = doc.createElement("ul");
    timers.className = "approval-timers";
    timers.setAttribute("aria-label", "Reminders and escalation");
    this.timerLists.set(row.continuationId, timers);
    const body = doc.createElement("div");
    body.className = "question";
    card.append(about, labels, timers, body);
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
    // A group, not a region: every card's form has the same heading, and landmarks must
    // be told apart by their names.
    body.setAttribute("role", "group");
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
