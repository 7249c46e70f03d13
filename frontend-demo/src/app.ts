// The chat controller: one AG-UI agent per thread, a live tail of the thread's event log, and
// the DOM. Every exchange with the server goes through one queue, so a restore never overlaps
// a run in this tab; other tabs' runs arrive through the tail and trigger a quiet restore.

import { buildResumeArray, type Interrupt, type Message, randomUUID, type RunErrorEvent } from "@ag-ui/client";
import { PauseMeshAgent, PauseMeshOffline, PauseMeshRefusal, type TailStatus } from "./pausemesh-agent";
import { type Booking, bookingsIn, recordedOutcome } from "./bookings";
import {
  APPROVAL_REASON,
  dayAndTime,
  interruptedIds,
  isInterrupted,
  messageTime,
  STOPPED_MARK,
  SUGGESTIONS,
  speakerOf,
  stampedId,
  whoseMove,
} from "./chat";
import { clock, UNTITLED } from "./conversations";
import {
  ANSWERED_ELSEWHERE,
  type Notice,
  noticeFor,
  noticeForFailure,
  QUESTION_EXPIRED,
} from "./errors";
import { QuestionForm } from "./question";
import type { Json } from "./schema";
import { mountSidebarToggle, Sidebar } from "./sidebar";
import type { ThreadTail } from "./sse";
import { lastSequence, pendingIds, threadFromUrl, urlWithThread } from "./thread";

/** The server's expiry run on the thread log (``pausemesh.agui.run.expiry``). */
const EXPIRED_EVENT = "pausemesh.interrupts_expired";
const EXPIRY_RUN = "pausemesh-expiry-";
/** Double texting: a new message stops a run still going on the thread (docs/agui.md). */
const INTERRUPT = { pausemesh: { doubleTexting: "interrupt" } };
const INTERRUPTED_EVENT = "pausemesh.run_interrupted";
const STOPPED: Notice = {
  kind: "info",
  message: "The assistant stopped that answer because a newer message came in; it answers the newer one.",
  resync: false,
};

/** Thread ids this browser minted for a new conversation (not on the server until sent). */
const MINTED_KEY = "pausemesh.minted";

/** An answer this tab tried to give that another tab may have beaten. */
interface Race {
  readonly before: readonly Booking[];
  readonly choice: string | undefined;
}

interface Elements {
  readonly connection: HTMLElement;
  readonly notice: HTMLElement;
  readonly announcer: HTMLElement;
  readonly transcript: HTMLOListElement;
  readonly typing: HTMLElement;
  readonly question: HTMLElement;
  readonly welcome: HTMLElement;
  readonly suggestions: HTMLElement;
  readonly missing: HTMLElement;
  readonly composer: HTMLFormElement;
  readonly input: HTMLTextAreaElement;
  readonly send: HTMLButtonElement;
  readonly hint: HTMLElement;
  readonly threadLabel: HTMLElement;
  readonly chatTitle: HTMLElement;
  readonly chatDate: HTMLElement;
  readonly threadList: HTMLUListElement;
  readonly sidebarStatus: HTMLElement;
}

export class ChatApp {
  private readonly threadId: string;
  private readonly fresh: boolean;
  private readonly forwardedProps: Record<string, unknown>;
  private readonly agent: PauseMeshAgent;
  private tail: ThreadTail | undefined;
  private queue: Promise<void> = Promise.resolve();
  private running = false;
  private seen = 0;
  private tailMaxDuringRun = 0;
  private runError: RunErrorEvent | undefined;
  private question: QuestionForm | undefined;
  private resyncTimer: number | undefined;
  private wasLive = false;
  private expiredOnServer = false;
  private readonly items = new Map<string, HTMLLIElement>();
  private readonly sidebar: Sidebar;
  private readonly times: MessageTimes;
  private race: Race | undefined;
  private waitingCard: HTMLElement | undefined;
  private loaded = false;
  private stopped = false;
  /** Messages of a run a newer message stopped, as the live event named them (a snapshot
   * says so in each message's metadata). */
  private readonly stoppedIds = new Set<string>();
  /** Messages shown before the agent's (the newest page a restore brings): pages loaded on
   * scroll, and what slid out of the newest page since. */
  private earlier: Message[] = [];
  /** Where the older messages start (`messagesCursor`, then each page's `nextCursor`). */
  private cursor: string | undefined;
  private cursorRead = false;
  private loadingOlder = false;
  /** The thread in the URL is not this person's (or no longer exists): nothing can be sent. */
  private unavailable = false;
  private readonly cards = new Map<string, HTMLLIElement>();

  constructor(
    private readonly ui: Elements,
    private readonly location: URL,
  ) {
    const base = new URL(".", location);
    const existing = threadFromUrl(location);
    this.threadId = existing ?? randomUUID();
    // A new conversation's id stays "fresh" through reloads of its tab until its first message.
    this.fresh = existing === undefined || minted().includes(existing);
    if (existing === undefined) remember(this.threadId);
    this.forwardedProps = forwardedPropsFrom(location);
    if (existing === undefined) {
      history.replaceState(null, "", urlWithThread(location, this.threadId));
    }
    // The reconnecting client (src/pausemesh-agent.ts): connect on load, the tail resumed with
    // Last-Event-ID after backoff with jitter, the server's refusals as typed errors.
    this.agent = new PauseMeshAgent({
      url: new URL("agui", base).href,
      threadId: this.threadId,
      backoff: { initialMs: 250, maxMs: 3_000, factor: 2, jitter: 0.5 },
      onSequence: (sequence) => {
        this.seen = Math.max(this.seen, sequence);
      },
    });
    this.times = new MessageTimes(this.threadId);
    this.sidebar = new Sidebar({
      list: ui.threadList,
      status: ui.sidebarStatus,
      base,
      location,
      current: this.threadId,
      onCurrentTitle: (title, createdAt) => {
        if (this.unavailable) return;
        const shown = title ?? UNTITLED;
        if (ui.chatTitle.textContent !== shown) ui.chatTitle.textContent = shown;
        const began = createdAt === undefined ? "" : `Started ${dayAndTime(createdAt)}`;
        if (ui.chatDate.textContent !== began) ui.chatDate.textContent = began;
        ui.composer.ownerDocument.title = `${shown} · Travel assistant`;
      },
    });
    this.agent.subscribe({
      onMessagesChanged: () => this.renderMessages(),
      onStateChanged: () => this.renderMessages(),
      onRunErrorEvent: ({ event }) => {
        this.runError = event;
      },
      onCustomEvent: ({ event }) => {
        // This tab's run was stopped by a newer message (double texting, `interrupt`).
        if (event.name !== INTERRUPTED_EVENT) return;
        this.stopped = true;
        for (const id of interruptedIds(event.value)) this.stoppedIds.add(id);
        this.renderMessages();
      },
    });
  }

  static mount(doc: Document, location: URL): ChatApp {
    const byId = <T extends HTMLElement>(id: string): T => {
      const element = doc.getElementById(id);
      if (element === null) throw new Error(`#${id} is missing from the page`);
      return element as T;
    };
    const app = new ChatApp(
      {
        connection: byId("connection"),
        notice: byId("notice"),
        announcer: byId("announcer"),
        transcript: byId("transcript"),
        typing: byId("typing"),
        question: byId("question"),
        welcome: byId("welcome"),
        suggestions: byId("suggestions"),
        missing: byId("missing"),
        composer: byId("composer"),
        input: byId("composer-input"),
        send: byId("composer-send"),
        hint: byId("composer-hint"),
        threadLabel: byId("thread-label"),
        chatTitle: byId("chat-title"),
        chatDate: byId("chat-date"),
        threadList: byId("thread-list"),
        sidebarStatus: byId("sidebar-status"),
      },
      location,
    );
    app.start();
    mountSidebarToggle(byId("sidebar-toggle"));
    return app;
  }

  start(): void {
    this.ui.threadLabel.textContent = `Conversation id: ${this.threadId}`;
    this.sidebar.start();
    void this.showCapabilities();
    const scroller = this.ui.transcript.closest<HTMLElement>(".scroll");
    scroller?.addEventListener("scroll", () => {
      if (scroller.scrollTop < 80 && this.cursor !== undefined) void this.loadOlder();
    });
    for (const text of SUGGESTIONS) {
      const button = this.document.createElement("button");
      button.type = "button";
      button.className = "suggestion";
      button.textContent = text;
      button.addEventListener("click", () => {
        this.ui.input.value = text;
        this.send();
      });
      this.ui.suggestions.append(button);
    }
    this.ui.composer.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.ui.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    const view = this.document.defaultView;
    view?.addEventListener("offline", () => {
      this.ui.connection.dataset["state"] = "reconnecting";
      this.setStatus("You are offline. The page catches up when the network is back.");
    });
    view?.addEventListener("online", () => {
      this.ui.connection.dataset["state"] = "live";
      this.setStatus("Back online. The conversation is up to date.");
      this.clearStaleNotice();
      if (this.tail !== undefined) this.scheduleResync();
    });
    this.setStatus("Loading the conversation…");
    this.enqueue(async () => {
      // A thread id minted here has nothing on the server to restore until its first message.
      const restored = this.fresh ? "fresh" : await this.restoreOrMissing();
      if (restored === "restored") this.startTail();
      else if (restored === "missing") this.showMissing();
      else this.setStatus("New conversation.");
      this.renderMessages();
      this.renderQuestion(true);
      await this.fillOlder();
      this.loaded = true;
      this.document.body.dataset["ready"] = "true";
    });
  }

  private get document(): Document {
    return this.ui.composer.ownerDocument;
  }

  // ---- actions -------------------------------------------------------------------------

  private send(): void {
    const text = this.ui.input.value.trim();
    if (text === "" || this.unavailable || this.running || this.agent.pendingInterrupts.length > 0) return;
    this.ui.input.value = "";
    // The id carries the time it was written, so every device shows it after a reload.
    const message: Message = { id: stampedId("user", randomUUID()), role: "user", content: text };
    this.enqueue(async () => {
      this.agent.addMessage(message);
      this.renderMessages();
      // A new message interrupts a run still going on this thread (another tab's, another
      // device's): the server stops it, keeps its partial answer marked, and runs this one.
      const sent = await this.run({}, INTERRUPT);
      if (!sent) {
        // Nothing reached the server: take the message back so it can be sent again.
        this.agent.setMessages(this.agent.messages.filter((m) => m.id !== message.id));
        this.ui.input.value = text;
      }
      this.ui.input.focus();
    });
  }

  private answer(answers: ReadonlyMap<string, Json>): void {
    this.enqueue(async () => {
      const pending = this.agent.pendingInterrupts;
      // The question went away while this click waited in the queue (another tab answered).
      if (pending.length === 0 || pending.some((i) => !answers.has(i.id))) return;
      const responses = Object.fromEntries(
        pending.map((i) => [i.id, { status: "resolved" as const, payload: answers.get(i.id) }]),
      );
      await this.resume(buildResumeArray(pending, responses), choiceOf(answers));
    });
  }

  /** Which agent the server serves, from AG-UI capability discovery (`GET agui/capabilities`):
   * its name under the title. The page works without it (an older server has no route). */
  private async showCapabilities(): Promise<void> {
    let capabilities: Awaited<ReturnType<PauseMeshAgent["getCapabilities"]>>;
    try {
      capabilities = await this.agent.getCapabilities();
    } catch {
      return;
    }
    const subtitle = this.document.querySelector<HTMLElement>(".brand .subtitle");
    const identity = capabilities.identity;
    if (subtitle === null || identity?.name === undefined) return;
    const version = identity.version === undefined ? "" : ` ${identity.version}`;
    subtitle.textContent = `A PauseMesh demo · agent ${identity.name}${version}`;
    subtitle.dataset["interrupts"] = String(capabilities.humanInTheLoop?.interrupts === true);
    subtitle.dataset["resumable"] = String(capabilities.transport?.resumable === true);
  }

  private cancel(): void {
    this.enqueue(async () => {
      const pending = this.agent.pendingInterrupts;
      if (pending.length === 0) return;
      const responses = Object.fromEntries(
        pending.map((i) => [i.id, { status: "cancelled" as const }]),
      );
      await this.resume(buildResumeArray(pending, responses));
    });
  }

  private async resume(
    resume: ReturnType<typeof buildResumeArray>,
    choice?: string,
  ): Promise<void> {
    this.question?.setBusy(true);
    const race: Race = { before: bookingsIn(this.agent.state), choice };
    // Another tab may have answered already; if so, show what it recorded instead of racing it.
    // The server stays the judge: a resume that loses a race still comes back as a RUN_ERROR.
    const snapshot = await this.fetchSnapshot();
    if (snapshot === "offline") {
      this.showNotice(noticeForFailure(new TypeError("offline")));
      this.question?.setBusy(false);
      return;
    }
    const open = snapshot === undefined ? new Set<string>() : pendingIds(snapshot);
    if (!resume.every((entry) => open.has(entry.interruptId))) {
      this.race = race;
      await this.restore();
      this.settleRace();
      this.renderQuestion(false);
      this.ui.input.focus();
      return;
    }
    this.race = race;
    await this.run({ resume });
    if (this.agent.pendingInterrupts.length === 0) this.ui.input.focus();
  }

  /** Runs the agent once; false when the request never reached the server. */
  private async run(
    parameters: { resume?: ReturnType<typeof buildResumeArray> },
    props: Record<string, unknown> = {},
  ): Promise<boolean> {
    this.running = true;
    this.stopped = false;
    this.tailMaxDuringRun = 0;
    this.runError = undefined;
    this.clearNotice();
    this.setBusy(true);
    let notice: Notice | undefined;
    let offline = false;
    try {
      await this.agent.runChecked({ ...parameters, forwardedProps: { ...this.forwardedProps, ...props } });
    } catch (error) {
      offline = error instanceof PauseMeshOffline;
      notice =
        error instanceof PauseMeshRefusal
          ? noticeFor(error.code, error.message)
          : offline
            ? noticeForFailure(error)
            : noticeFor(undefined, error instanceof Error ? error.message : String(error));
    } finally {
      this.running = false;
      this.setBusy(false);
    }
    const lost = notice !== undefined && (notice.kind === "conflict" || notice.kind === "busy");
    if (lost && this.race !== undefined) {
      // Another tab's answer won: say what it recorded, not "busy, try again".
      await this.restore();
      this.settleRace();
    } else if (notice !== undefined) {
      this.race = undefined;
      this.showNotice(notice);
      if (notice.resync) await this.restore();
    } else {
      this.race = undefined;
      if (this.tailMaxDuringRun > this.seen) await this.restore();
      if (this.stopped) this.showNotice(STOPPED);
    }
    const reached = !offline;
    // The thread exists once a run reached the server; only then is there a log to follow.
    if (reached) {
      forget(this.threadId);
      this.startTail();
    }
    this.renderQuestion(true);
    void this.sidebar.refresh();
    return reached;
  }

  /** The first load: "missing" when the server has no such thread for this person (404). */
  private async restoreOrMissing(): Promise<"restored" | "missing" | "offline"> {
    const snapshot = await this.fetchSnapshot();
    if (snapshot === undefined) return "missing";
    if (snapshot === "offline") return "offline";
    return (await this.restore(snapshot)) ? "restored" : "offline";
  }

  /** A thread URL that is not this person's: say so, and send nothing there (no thread is
   * created under an id someone typed or another person owns). */
  private showMissing(): void {
    this.unavailable = true;
    this.ui.missing.hidden = false;
    this.ui.welcome.hidden = true;
    this.ui.chatTitle.textContent = "Conversation not found";
    this.ui.chatDate.textContent = "";
    this.document.title = "Conversation not found · Travel assistant";
    this.ui.input.disabled = true;
    this.ui.send.disabled = true;
    this.ui.hint.textContent = "Start a new conversation to send a message.";
    this.setStatus("");
  }

  /** Reloads messages, state and pending interrupts through POST /agui/connect. */
  private async restore(known?: unknown): Promise<boolean> {
    const snapshot = known ?? (await this.fetchSnapshot());
    if (snapshot === undefined || snapshot === "offline") return false;
    if (!this.cursorRead) {
      this.cursorRead = true;
      const cursor = (snapshot as { messagesCursor?: unknown }).messagesCursor;
      this.cursor = typeof cursor === "string" ? cursor : undefined;
    }
    const shown = [...this.earlier, ...this.agent.messages];
    this.seen = Math.max(this.seen, lastSequence(snapshot));
    // The server's time for each message (a restore brings messages from other clients too).
    const times = (snapshot as { messageTimes?: unknown }).messageTimes;
    if (times instanceof Map) this.times.learn(times as ReadonlyMap<string, Date>);
    // The client refuses to start anything while it holds pending interrupts the input does
    // not answer; a restore answers nothing, and the server sends the current set back.
    this.agent.pendingInterrupts = [];
    this.runError = undefined;
    try {
      await this.agent.connectAgent();
    } catch (error) {
      this.showNotice(noticeForFailure(error));
      return false;
    }
    const error = this.lastRunError();
    if (error !== undefined) this.showNotice(noticeFor(error.code, error.message));
    // What slid out of the newest page stays on screen, before it.
    const first = this.agent.messages[0]?.id;
    const at = shown.findIndex((m) => m.id === first);
    const current = new Set(this.agent.messages.map((m) => m.id));
    this.earlier = at >= 0 ? shown.slice(0, at) : shown.filter((m) => !current.has(m.id));
    this.renderMessages();
    return true;
  }

  /** Set by the subscriber while a run or restore streams; read once it is over. */
  private lastRunError(): RunErrorEvent | undefined {
    return this.runError;
  }

  /** The thread's record; undefined when it is not this person's, "offline" otherwise. */
  private async fetchSnapshot(): Promise<unknown> {
    try {
      return await this.agent.snapshot();
    } catch (error) {
      return error instanceof PauseMeshRefusal && error.kind === "not_found" ? undefined : "offline";
    }
  }

  /**
   * After this tab's answer lost to another tab's: once the thread shows the question closed,
   * say plainly what was recorded; while the other tab's run is still going, say so and wait
   * (its end arrives on the live tail, which comes back here).
   */
  private settleRace(): void {
    const race = this.race;
    if (race === undefined) return;
    if (this.agent.pendingInterrupts.length > 0 && !this.agent.pendingInterrupts.some(isApproval)) {
      this.showNotice({
        kind: "info",
        message: "Another tab is answering this question right now. The result appears here when it is recorded.",
        resync: false,
      });
      return;
    }
    this.race = undefined;
    const after = bookingsIn(this.agent.state);
    this.showNotice({ kind: "info", message: recordedOutcome(race.before, after, race.choice), resync: false });
  }

  // ---- live tail -------------------------------------------------------------------------

  private startTail(): void {
    if (this.tail !== undefined) return;
    this.tail = this.agent.follow({
      onEvent: ({ sequence, event }) => {
        if (this.running) {
          this.tailMaxDuringRun = Math.max(this.tailMaxDuringRun, sequence);
          return;
        }
        if (sequence <= this.seen) return;
        const runId = event["runId"];
        if (event.type === "CUSTOM" && event["name"] === EXPIRED_EVENT) {
          // The server's own expiry run: not an answer from elsewhere, and no typing.
          this.expiredOnServer = true;
        } else if (
          event.type === "RUN_STARTED" &&
          !(typeof runId === "string" && runId.startsWith(EXPIRY_RUN))
        ) {
          this.ui.typing.hidden = false;
        }
        this.scheduleResync();
      },
      onStatus: (status, detail) => this.onTailStatus(status, detail),
    });
  }

  private onTailStatus(status: TailStatus, detail?: string): void {
    // The browser says it is offline: a stream that opened a moment before keeps that message.
    if (this.document.defaultView?.navigator.onLine === false) {
      if (status === "live") this.wasLive = true;
      return;
    }
    if (status === "live") {
      if (this.wasLive) {
        this.setStatus("Reconnected. The conversation is up to date.");
        this.clearStaleNotice();
        this.scheduleResync();
      } else {
        this.setStatus("Connected: changes from other tabs appear live.");
      }
      this.wasLive = true;
      this.ui.connection.dataset["state"] = "live";
    } else if (status === "reconnecting") {
      if (this.ui.connection.dataset["state"] !== "reconnecting") {
        this.setStatus("Connection lost. Reconnecting…");
      }
      this.ui.connection.dataset["state"] = "reconnecting";
      this.ui.connection.title = detail ?? "";
    }
  }

  private scheduleResync(): void {
    if (this.resyncTimer !== undefined) return;
    // Coalesce a burst of streamed events into one restore.
    this.resyncTimer = window.setTimeout(() => {
      this.resyncTimer = undefined;
      this.enqueue(async () => {
        const pendingBefore = this.agent.pendingInterrupts;
        const before = pendingKey(pendingBefore);
        const bookingsBefore = bookingsIn(this.agent.state);
        if (!(await this.restore())) return;
        const changed = before !== "" && before !== pendingKey(this.agent.pendingInterrupts);
        if (this.race !== undefined) {
          this.settleRace();
        } else if (changed && this.expiredOnServer) {
          this.showNotice(QUESTION_EXPIRED);
        } else if (changed && pendingBefore.some(isApproval)) {
          this.showNotice({ kind: "info", message: approvalOutcome(bookingsBefore, bookingsIn(this.agent.state)), resync: false });
        } else if (changed) {
          const outcome = recordedOutcome(bookingsBefore, bookingsIn(this.agent.state), undefined);
          this.showNotice({ ...ANSWERED_ELSEWHERE, message: outcome });
        }
        this.expiredOnServer = false;
        this.ui.typing.hidden = true;
        this.renderQuestion(false);
        void this.sidebar.refresh();
      });
    }, 120);
  }

  private enqueue(task: () => Promise<void>): void {
    this.queue = this.queue.then(task).catch((error: unknown) => {
      this.showNotice(noticeFor(undefined, error instanceof Error ? error.message : String(error)));
    });
  }

  // ---- rendering -------------------------------------------------------------------------

  private renderMessages(): void {
    const list = this.ui.transcript;
    const keep = new Set<string>();
    let previous: HTMLLIElement | undefined;
    const place = (item: HTMLLIElement): void => {
      const expectedNext: Element | null =
        previous === undefined ? list.firstElementChild : previous.nextElementSibling;
      if (expectedNext !== item) {
        if (previous === undefined) list.prepend(item);
        else previous.after(item);
      }
      previous = item;
    };
    // Each booking shows as a card right after the message that confirmed it.
    const bookings = bookingsIn(this.agent.state);
    const placed = new Set<string>();
    let shown = 0;
    const newest = new Set(this.agent.messages.map((m) => m.id));
    const all = [...this.earlier.filter((m) => !newest.has(m.id)), ...this.agent.messages];
    for (const message of all) {
      const text = messageText(message);
      if (text === undefined) continue;
      shown += 1;
      keep.add(message.id);
      let item = this.items.get(message.id);
      if (item === undefined) {
        item = this.messageItem(message);
        this.items.set(message.id, item);
      }
      const body = item.querySelector<HTMLParagraphElement>(".body");
      if (body !== null && body.textContent !== text) body.textContent = text;
      if (this.stoppedIds.has(message.id) || isInterrupted(message)) markStopped(item);
      place(item);
      if (message.role !== "assistant") continue;
      for (const booking of bookings) {
        const key = cardKey(booking);
        if (placed.has(key) || booking.confirmation === undefined || !text.includes(booking.confirmation)) continue;
        placed.add(key);
        place(this.card(booking));
      }
    }
    // A booking no message names (an operator's resolution) still shows, at the end.
    for (const booking of bookings) {
      const key = cardKey(booking);
      if (placed.has(key)) continue;
      placed.add(key);
      place(this.card(booking));
    }
    for (const [id, item] of this.items) {
      if (!keep.has(id)) {
        item.remove();
        this.items.delete(id);
      }
    }
    for (const [key, card] of this.cards) {
      if (!placed.has(key)) {
        card.remove();
        this.cards.delete(key);
      }
    }
    this.ui.welcome.hidden = this.unavailable || shown > 0 || this.agent.pendingInterrupts.length > 0;
    if (!this.loadingOlder) scrollToEnd(list);
  }

  /** Older pages until the conversation fills the pane (else there is nothing to scroll). */
  private async fillOlder(): Promise<void> {
    const scroller = this.ui.transcript.closest<HTMLElement>(".scroll");
    while (scroller !== null && this.cursor !== undefined && scroller.scrollHeight <= scroller.clientHeight) {
      const before = this.cursor;
      await this.loadOlder();
      if (this.cursor === before) return; // the page did not come: leave it to the scroll
    }
  }

  /** Scrolled to the top of a long conversation: the page of messages before the first shown. */
  private async loadOlder(): Promise<void> {
    const cursor = this.cursor;
    if (cursor === undefined || this.loadingOlder) return;
    this.loadingOlder = true;
    const scroller = this.ui.transcript.closest<HTMLElement>(".scroll");
    const fromBottom = scroller === null ? 0 : scroller.scrollHeight - scroller.scrollTop;
    try {
      const page = await this.agent.olderMessages(cursor);
      this.times.learn(page.messageTimes);
      const known = new Set([...this.earlier, ...this.agent.messages].map((m) => m.id));
      this.earlier = [...page.messages.filter((m) => !known.has(m.id)), ...this.earlier];
      this.cursor = page.nextCursor;
      this.renderMessages();
      // The messages read on stay where they were; the older ones are above them.
      if (scroller !== null) scroller.scrollTop = scroller.scrollHeight - fromBottom;
    } catch {
      // Not now (offline, a cursor the server no longer knows): the next scroll tries again.
    } finally {
      this.loadingOlder = false;
    }
  }

  private messageItem(message: Message): HTMLLIElement {
    const item = document.createElement("li");
    const speaker = speakerOf(message.role, message.id);
    item.className = `message message-${message.role}${speaker === "Manager" ? " message-decision" : ""}`;
    item.dataset["messageId"] = message.id;
    const who = document.createElement("span");
    who.className = "speaker";
    who.textContent = speaker;
    const body = document.createElement("p");
    body.className = "body";
    item.append(who, body);
    // When the server first stored it (from the snapshot or a page); else the id says when
    // it was written (this page's and the demo agent's messages); else, when this browser
    // first saw it (a message stored before the server kept times).
    if (this.loaded) this.times.note(message.id);
    const seen = this.times.stored(message.id) ?? messageTime(message.id) ?? this.times.get(message.id);
    if (seen !== undefined) {
      const time = document.createElement("time");
      time.className = "sent-at";
      time.dateTime = seen.toISOString();
      time.textContent = clock(seen);
      time.title = seen.toLocaleString();
      who.after(time);
    }
    return item;
  }

  private card(booking: Booking): HTMLLIElement {
    const key = cardKey(booking);
    let card = this.cards.get(key);
    if (card === undefined) {
      card = bookingCard(booking);
      this.cards.set(key, card);
    }
    return card;
  }

  /** Shows the pending question (or removes it); `own` moves focus to a new question. */
  private renderQuestion(own: boolean): void {
    const pending = this.agent.pendingInterrupts;
    const ids = pendingKey(pending);
    this.waitingCard?.remove();
    this.waitingCard = undefined;
    this.sidebar.setMove(this.threadId, whoseMove(pending));
    if (pending.length > 0 && pending.every(isApproval)) {
      // A manager decides this one: show what is asked, and that the answer will come here.
      this.question?.destroy();
      this.question = undefined;
      this.waitingCard = approvalWaiting(pending);
      this.ui.question.append(this.waitingCard);
      this.ui.question.hidden = false;
    } else if (pending.length === 0) {
      this.question?.destroy();
      this.question = undefined;
      this.ui.question.hidden = true;
    } else if (this.question === undefined || pendingKey(this.question.interrupts) !== ids) {
      this.question?.destroy();
      this.question = new QuestionForm(this.ui.question, pending, {
        onAnswer: (answers) => this.answer(answers),
        onCancel: () => this.cancel(),
      });
      const active = this.document.activeElement;
      if (own || active === null || active === this.document.body) {
        this.question.focus();
      } else {
        // Focus stays where the person is; a screen reader still hears that a question came.
        const asked = pending.map((i) => i.message ?? "a question").join(" ");
        this.ui.announcer.textContent = `The assistant asks: ${asked}`;
      }
    } else {
      this.question.setBusy(this.running);
    }
    const waiting = pending.length > 0;
    if (waiting) this.ui.welcome.hidden = true;
    if (this.unavailable) return;
    this.ui.input.disabled = waiting || this.running;
    this.ui.send.disabled = waiting || this.running;
    this.ui.hint.textContent = !waiting
      ? "Enter sends, Shift+Enter adds a line."
      : this.waitingCard !== undefined
        ? "Waiting for the manager; this conversation continues by itself."
        : "Answer or cancel the assistant's question above to continue.";
  }

  private setBusy(busy: boolean): void {
    this.ui.typing.hidden = !busy;
    this.ui.input.disabled = this.unavailable || busy || this.agent.pendingInterrupts.length > 0;
    this.ui.send.disabled = this.ui.input.disabled;
    this.question?.setBusy(busy);
    this.document.body.dataset["busy"] = String(busy);
  }

  private setStatus(text: string): void {
    if (this.ui.connection.textContent !== text) this.ui.connection.textContent = text;
  }

  private showNotice(notice: Notice): void {
    this.ui.notice.textContent = notice.message;
    this.ui.notice.dataset["kind"] = notice.kind;
    this.ui.notice.hidden = false;
    if (notice.kind === "rejected") this.question?.showError(notice.message);
  }

  /** A notice about a lost connection ends when the connection is back. */
  private clearStaleNotice(): void {
    if (this.ui.notice.dataset["kind"] === "offline") this.clearNotice();
  }

  private clearNotice(): void {
    this.ui.notice.hidden = true;
    this.ui.notice.textContent = "";
    delete this.ui.notice.dataset["kind"];
  }
}

function pendingKey(interrupts: readonly { id: string }[]): string {
  return interrupts.map((i) => i.id).join(" ");
}

/** `?questionTtl=<seconds>` asks the demo agent for a short deadline, to see expiry;
 * `?searchDelay=<seconds>` for a slow flight search, to see a newer message interrupt it;
 * `?remindAfter=` and `?escalateAfter=<seconds>` to see a manager's approval reminded and
 * escalated sooner. */
function forwardedPropsFrom(location: URL): Record<string, unknown> {
  const props: Record<string, unknown> = {};
  const ttl = Number(location.searchParams.get("questionTtl"));
  if (Number.isInteger(ttl) && ttl >= 1 && ttl <= 86_400) props["questionTtlSeconds"] = ttl;
  const remind = Number(location.searchParams.get("remindAfter"));
  if (Number.isInteger(remind) && remind >= 1 && remind <= 86_400) props["approvalRemindSeconds"] = remind;
  const escalate = Number(location.searchParams.get("escalateAfter"));
  if (Number.isInteger(escalate) && escalate >= 1 && escalate <= 86_400) props["approvalEscalateSeconds"] = escalate;
  const search = Number(location.searchParams.get("searchDelay"));
  if (Number.isInteger(search) && search >= 1 && search <= 60) props["searchSeconds"] = search;
  return props;
}

/** Draws a message as cut short: muted, with the reason under it (once). */
function markStopped(item: HTMLLIElement): void {
  if (item.classList.contains("message-stopped")) return;
  item.classList.add("message-stopped");
  const mark = item.ownerDocument.createElement("p");
  mark.className = "stopped-mark";
  mark.textContent = STOPPED_MARK;
  item.append(mark);
}

function messageText(message: Message): string | undefined {
  if (message.role !== "user" && message.role !== "assistant") return undefined;
  const content: unknown = message.content;
  if (typeof content === "string") return content === "" ? undefined : content;
  if (Array.isArray(content)) {
    const text = content
      .map((part: unknown) => (part as { type?: string; text?: string }).text ?? "")
      .join("");
    return text === "" ? undefined : text;
  }
  return undefined;
}

function isApproval(interrupt: Interrupt): boolean {
  return interrupt.reason === APPROVAL_REASON;
}

/** What the person sees once a manager decided their approval request. */
function approvalOutcome(before: readonly Booking[], after: readonly Booking[]): string {
  const known = new Set(before.map((b) => b.confirmation ?? b.flight));
  const added = after.filter((b) => !known.has(b.confirmation ?? b.flight));
  if (added.length === 0) return "A manager answered your approval request; nothing was booked.";
  const booking = added[0] as Booking;
  const code = booking.confirmation === undefined ? "" : ` (confirmation ${booking.confirmation})`;
  return `A manager approved it: flight ${booking.flight} is booked${code}.`;
}

/** The flight code an answer names, for "your choice (PM303) was not used". */
function choiceOf(answers: ReadonlyMap<string, Json>): string | undefined {
  for (const answer of answers.values()) {
    const flight = (answer as { flight?: unknown } | null)?.flight;
    if (typeof flight === "string") return flight;
  }
  return undefined;
}

function approvalWaiting(pending: readonly Interrupt[]): HTMLElement {
  const card = document.createElement("div");
  card.className = "waiting-approval";
  const heading = document.createElement("h2");
  heading.id = "question-heading";
  heading.textContent = "Waiting for the manager";
  card.append(heading);
  for (const interrupt of pending) {
    const terms = document.createElement("p");
    terms.textContent = interrupt.message ?? "An approval was requested.";
    card.append(terms);
  }
  const note = document.createElement("p");
  note.className = "hint";
  note.textContent = "You can leave this page; the booking shows here once a manager decides.";
  card.append(note);
  return card;
}

function bookingCard(booking: Booking): HTMLLIElement {
  const item = document.createElement("li");
  item.className = "booking-card";
  const title = document.createElement("p");
  title.className = "booking-title";
  title.textContent = `Flight ${booking.flight}${booking.destination === undefined ? "" : ` to ${booking.destination}`}`;
  const facts = document.createElement("dl");
  const fact = (term: string, value: string): void => {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    facts.append(dt, dd);
  };
  if (booking.confirmation !== undefined) fact("Confirmation", booking.confirmation);
  for (const [term, value] of booking.details) fact(term, value);
  item.append(title, facts);
  return item;
}

/**
 * When each message was written: the server's time (issue 44) when it said; else when this
 * browser first saw it, kept in localStorage per thread so a reload still shows it.
 */
class MessageTimes {
  private readonly key: string;
  private readonly known: Record<string, number>;
  /** The server's times (`messageTimes` of the snapshot and the pages read). */
  private readonly server = new Map<string, Date>();

  constructor(threadId: string) {
    this.key = `pausemesh.times.${threadId}`;
    let stored: unknown;
    try {
      stored = JSON.parse(localStorage.getItem(this.key) ?? "{}");
    } catch {
      stored = {};
    }
    this.known = typeof stored === "object" && stored !== null ? (stored as Record<string, number>) : {};
  }

  /** Keeps the server's times for the messages they name. */
  learn(times: ReadonlyMap<string, Date>): void {
    for (const [id, at] of times) this.server.set(id, at);
  }

  /** When the server first stored `id`, if it said. */
  stored(id: string): Date | undefined {
    return this.server.get(id);
  }

  get(id: string): Date | undefined {
    const at = this.known[id];
    return typeof at === "number" ? new Date(at) : undefined;
  }

  /** Marks `id` as seen now unless it was seen before (`restored` messages are not new). */
  note(id: string): void {
    if (id in this.known) return;
    this.known[id] = Date.now();
    try {
      localStorage.setItem(this.key, JSON.stringify(this.known));
    } catch {
      // Storage full or disabled: the time is just not shown after a reload.
    }
  }
}

function scrollToEnd(list: HTMLElement): void {
  list.lastElementChild?.scrollIntoView({ block: "nearest" });
}

function cardKey(booking: Booking): string {
  return booking.confirmation ?? `flight:${booking.flight}`;
}

function minted(): string[] {
  try {
    const stored: unknown = JSON.parse(sessionStorage.getItem(MINTED_KEY) ?? "[]");
    return Array.isArray(stored) ? stored.filter((id): id is string => typeof id === "string") : [];
  } catch {
    return [];
  }
}

function remember(threadId: string): void {
  try {
    sessionStorage.setItem(MINTED_KEY, JSON.stringify([...minted(), threadId].slice(-20)));
  } catch {
    // Storage disabled: a reload before the first message shows "not found" instead.
  }
}

function forget(threadId: string): void {
  const ids = minted();
  if (!ids.includes(threadId)) return;
  try {
    sessionStorage.setItem(MINTED_KEY, JSON.stringify(ids.filter((id) => id !== threadId)));
  } catch {
    // Nothing to forget without storage.
  }
}
