// The sidebar of the person's conversations (GET /agui/threads): each row links to its thread
// (a full page load, so every thread starts from the server's record), shows a badge while a
// question waits, and can be renamed (PATCH) or deleted (DELETE) in place.

import { dayAndTime, type Move, moveBadge, pendingIn, whoseMove } from "./chat";
import { clock, distinctTitles, relativeTime, rowTitle, type ThreadRow, threadRows } from "./conversations";
import { urlWithThread } from "./thread";

export interface SidebarOptions {
  readonly list: HTMLUListElement;
  readonly status: HTMLElement;
  readonly base: URL;
  readonly location: URL;
  /** The thread on screen (a fresh one is not on the server until its first message). */
  readonly current: string | undefined;
  /** Told the current thread's title (and when it began) whenever the list is read. */
  readonly onCurrentTitle: (title: string | undefined, createdAt?: Date) => void;
}

const REFRESH_MS = 10_000;

export class Sidebar {
  private rows: ThreadRow[] = [];
  /** Each row's label, told apart from its namesakes ("Flight to Lisbon (2)"). */
  private labels = new Map<string, string>();
  private editing: string | undefined;
  private confirming: string | undefined;
  private timer: number | undefined;
  private loading: Promise<void> | undefined;
  private menuOpen: string | undefined;
  /** Whose move each waiting thread is, by thread id, read at its last sequence. */
  private readonly moves = new Map<string, { sequence: number; move: Move }>();

  constructor(private readonly options: SidebarOptions) {}

  start(): void {
    void this.refresh();
    const view = this.options.list.ownerDocument.defaultView;
    view?.addEventListener("focus", () => void this.refresh());
  }

  /** Reads the list again (coalesced); a row being edited is left alone. */
  refresh(): Promise<void> {
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = window.setTimeout(() => void this.refresh(), REFRESH_MS);
    });
    return this.loading;
  }

  private async load(): Promise<void> {
    try {
      const response = await fetch(new URL("agui/threads?limit=50", this.options.base), {
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.rows = threadRows(await response.json());
      this.labels = distinctTitles(this.rows);
      await this.readMoves();
      this.options.status.textContent = "";
    } catch {
      this.options.status.textContent = "Could not load your conversations; retrying.";
    }
    const current = this.rows.find((r) => r.threadId === this.options.current);
    this.options.onCurrentTitle(current && this.label(current), current?.createdAt);
    // A periodic refresh must not wipe a name being typed; the list updates after it.
    if (this.editing === undefined) this.render();
  }

  /** A waiting thread's badge says whose move it is: its snapshot's pending reasons, read
   * again only when the thread moved on. */
  private async readMoves(): Promise<void> {
    const waiting = this.rows.filter((row) => row.pending > 0);
    await Promise.all(
      waiting.map(async (row) => {
        const known = this.moves.get(row.threadId);
        if (known !== undefined && known.sequence === row.lastSequence) return;
        try {
          const url = new URL(`agui/threads/${encodeURIComponent(row.threadId)}`, this.options.base);
          const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
          if (!response.ok) return;
          const move = whoseMove(pendingIn(await response.json()));
          this.moves.set(row.threadId, { sequence: row.lastSequence, move });
        } catch {
          // Unknown for now: the badge falls back to "Needs your answer" until the next read.
        }
      }),
    );
  }

  /** The current thread's move as the chat knows it (its question, or a manager's). */
  setMove(threadId: string, move: Move): void {
    const row = this.rows.find((r) => r.threadId === threadId);
    this.moves.set(threadId, { sequence: row?.lastSequence ?? -1, move });
    if (this.editing === undefined) this.render();
  }

  private render(): void {
    const { list, current } = this.options;
    const doc = list.ownerDocument;
    const items: HTMLLIElement[] = [];
    if (current !== undefined && !this.rows.some((r) => r.threadId === current)) {
      // The fresh conversation on screen, before its first message reaches the server.
      const item = doc.createElement("li");
      item.className = "thread current";
      const label = doc.createElement("span");
      label.className = "thread-link";
      label.setAttribute("aria-current", "page");
      label.textContent = "New conversation";
      item.append(label);
      items.push(item);
    }
    const now = new Date();
    for (const row of this.rows) items.push(this.item(row, now));
    if (items.length === 0) {
      const empty = doc.createElement("li");
      empty.className = "thread-empty";
      empty.textContent = "No conversations yet.";
      items.push(empty);
    }
    const focused = doc.activeElement?.id;
    list.replaceChildren(...items);
    if (focused) doc.getElementById(focused)?.focus();
  }

  private item(row: ThreadRow, now: Date): HTMLLIElement {
    const doc = this.options.list.ownerDocument;
    const item = doc.createElement("li");
    item.className = row.threadId === this.options.current ? "thread current" : "thread";
    item.dataset["threadId"] = row.threadId;
    const title = this.label(row);
    if (this.editing === row.threadId) {
      item.append(this.renameForm(row, title));
      return item;
    }
    const link = doc.createElement("a");
    link.className = "thread-link";
    link.href = urlWithThread(bare(this.options.location), row.threadId).href;
    if (row.threadId === this.options.current) link.setAttribute("aria-current", "page");
    const name = doc.createElement("span");
    name.className = "thread-title";
    name.textContent = title;
    link.append(name);
    const meta = doc.createElement("span");
    meta.className = "thread-meta";
    const move = row.pending > 0 ? (this.moves.get(row.threadId)?.move ?? "yours") : "none";
    const badgeText = moveBadge(move);
    if (badgeText !== undefined) {
      const badge = doc.createElement("span");
      badge.className = move === "manager" ? "badge badge-waiting" : "badge";
      badge.textContent = badgeText;
      meta.append(badge);
    }
    // Titles repeat ("Flight to Lisbon"): the day and time the conversation began tell them apart.
    const began = row.createdAt ?? row.updatedAt;
    if (began !== undefined) {
      const time = doc.createElement("time");
      time.className = "thread-date";
      time.dateTime = began.toISOString();
      time.textContent = dayAndTime(began);
      meta.append(time);
    }
    if (row.updatedAt !== undefined && began !== undefined && row.updatedAt.getTime() - began.getTime() > 60_000) {
      const updated = doc.createElement("time");
      updated.dateTime = row.updatedAt.toISOString();
      updated.title = `Last change ${row.updatedAt.toLocaleDateString()} ${clock(row.updatedAt)}`;
      updated.textContent = `· ${relativeTime(row.updatedAt, now)}`;
      meta.append(updated);
    }
    link.append(meta);
    item.append(link);
    if (this.confirming === row.threadId) {
      item.append(this.deleteConfirm(row, title));
      return item;
    }
    // Rename and Delete show on hover or keyboard focus; on a touch screen, behind a menu button.
    const menu = doc.createElement("button");
    menu.type = "button";
    menu.id = `menu-${row.threadId}`;
    menu.className = "link-button row-menu";
    menu.textContent = "\u22ef";
    menu.setAttribute("aria-label", `Actions for “${title}”`);
    menu.setAttribute("aria-expanded", String(this.menuOpen === row.threadId));
    menu.addEventListener("click", () => {
      this.menuOpen = this.menuOpen === row.threadId ? undefined : row.threadId;
      this.render();
      doc.getElementById(`menu-${row.threadId}`)?.focus();
    });
    if (this.menuOpen === row.threadId) item.classList.add("menu-open");
    item.append(menu);
    const actions = doc.createElement("div");
    actions.className = "thread-actions";
    actions.append(
      this.button(`rename-${row.threadId}`, "Rename", `Rename “${title}”`, () => {
        this.editing = row.threadId;
        this.confirming = undefined;
        this.render();
        doc.getElementById(`title-${row.threadId}`)?.focus();
      }),
      this.button(`delete-${row.threadId}`, "Delete", `Delete “${title}”`, () => {
        this.confirming = row.threadId;
        this.editing = undefined;
        this.render();
        doc.getElementById(`keep-${row.threadId}`)?.focus();
      }),
    );
    item.append(actions);
    return item;
  }

  private label(row: ThreadRow): string {
    return this.labels.get(row.threadId) ?? rowTitle(row);
  }

  private renameForm(row: ThreadRow, title: string): HTMLFormElement {
    const doc = this.options.list.ownerDocument;
    const form = doc.createElement("form");
    form.className = "rename";
    const label = doc.createElement("label");
    label.htmlFor = `title-${row.threadId}`;
    label.textContent = "New name";
    const input = doc.createElement("input");
    input.id = `title-${row.threadId}`;
    input.value = row.title ?? "";
    input.maxLength = 200;
    input.required = true;
    const save = doc.createElement("button");
    save.type = "submit";
    save.textContent = "Save";
    const cancel = this.button(`cancel-${row.threadId}`, "Cancel", `Keep the name “${title}”`, () => {
      this.editing = undefined;
      this.render();
    });
    const error = doc.createElement("p");
    error.className = "field-error";
    error.setAttribute("role", "alert");
    error.hidden = true;
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") cancel.click();
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const wanted = input.value.trim();
      if (wanted === "") {
        error.textContent = "A name cannot be empty.";
        error.hidden = false;
        return;
      }
      void this.rename(row.threadId, wanted, error);
    });
    const buttons = doc.createElement("div");
    buttons.className = "thread-actions";
    buttons.append(save, cancel);
    form.append(label, input, buttons, error);
    return form;
  }

  private deleteConfirm(row: ThreadRow, title: string): HTMLElement {
    const doc = this.options.list.ownerDocument;
    const box = doc.createElement("div");
    box.className = "confirm-delete";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", `Delete “${title}”?`);
    const text = doc.createElement("p");
    text.textContent = "Delete this conversation and everything in it?";
    const buttons = doc.createElement("div");
    buttons.className = "thread-actions";
    const yes = this.button(`confirm-delete-${row.threadId}`, "Delete", `Yes, delete “${title}”`, () => {
      void this.erase(row.threadId);
    });
    yes.classList.add("danger");
    buttons.append(
      yes,
      this.button(`keep-${row.threadId}`, "Keep", `Keep “${title}”`, () => {
        this.confirming = undefined;
        this.render();
      }),
    );
    box.append(text, buttons);
    return box;
  }

  private async rename(threadId: string, title: string, error: HTMLElement): Promise<void> {
    const response = await send(new URL(`agui/threads/${encodeURIComponent(threadId)}`, this.options.base), "PATCH", {
      title,
    });
    if (response === undefined || !response.ok) {
      error.textContent = "The name was not saved. Try again.";
      error.hidden = false;
      return;
    }
    this.editing = undefined;
    await this.refresh();
    this.options.list.ownerDocument.getElementById(`rename-${threadId}`)?.focus();
  }

  private async erase(threadId: string): Promise<void> {
    const response = await send(new URL(`agui/threads/${encodeURIComponent(threadId)}`, this.options.base), "DELETE");
    if (response === undefined || (!response.ok && response.status !== 404)) {
      this.options.status.textContent = "The conversation was not deleted. Try again.";
      return;
    }
    this.confirming = undefined;
    if (threadId === this.options.current) {
      // The conversation on screen is gone: start a new one.
      window.location.assign(new URL(".", this.options.base).href);
      return;
    }
    this.options.status.textContent = "Conversation deleted.";
    await this.refresh();
  }

  private button(id: string, text: string, label: string, onClick: () => void): HTMLButtonElement {
    const button = this.options.list.ownerDocument.createElement("button");
    button.type = "button";
    button.id = id;
    button.className = "link-button";
    button.textContent = text;
    button.setAttribute("aria-label", label);
    button.addEventListener("click", onClick);
    return button;
  }
}

/** On a narrow screen the conversations list is a panel the person opens and closes: `toggle`
 * is the view's "Conversations" button (the chat's or the approvals page's, one per view); Close
 * or Escape shuts the panel and gives the focus back to it. */
export function mountSidebarToggle(toggle: HTMLElement): void {
  const doc = toggle.ownerDocument;
  const close = doc.getElementById("sidebar-close");
  const sidebar = doc.getElementById("sidebar");
  if (close === null || sidebar === null) return;
  const set = (open: boolean): void => {
    doc.body.classList.toggle("sidebar-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    if (open) sidebar.querySelector<HTMLElement>("a, button")?.focus();
    else toggle.focus();
  };
  toggle.addEventListener("click", () => set(!doc.body.classList.contains("sidebar-open")));
  close.addEventListener("click", () => set(false));
  sidebar.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && doc.body.classList.contains("sidebar-open")) set(false);
  });
}

/** The page URL with only the parameters a thread link keeps (`questionTtl`). */
function bare(location: URL): URL {
  const next = new URL(location.pathname, location.origin);
  const ttl = location.searchParams.get("questionTtl");
  if (ttl !== null) next.searchParams.set("questionTtl", ttl);
  return next;
}

async function send(url: URL, method: string, body?: unknown): Promise<Response | undefined> {
  try {
    return await fetch(url, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? null : JSON.stringify(body),
    });
  } catch {
    return undefined;
  }
}
