// A reconnecting AG-UI client for PauseMesh, framework-free: the official `HttpAgent` from
// `@ag-ui/client`, taught what a page needs to survive reloads, restarts and network cuts.
//
//   const agent = new PauseMeshAgent({ url: "/agui", threadId });
//   await agent.restore();            // messages, state and the open question, agent not run
//   const tail = agent.follow({ onEvent, onStatus });   // other tabs' runs, a manager's decision
//   await agent.send("A flight to Porto");             // throws a typed PauseMeshRefusal
//
// - `restore()` reads the thread (`GET {url}/threads/{id}`) and replays it through
//   `POST {url}/connect` without running the agent; a thread that is not this person's is
//   `PauseMeshRefusal` with kind "not_found" (nothing is created under its id).
// - `follow()` tails `GET {url}/threads/{id}/events` from the last sequence seen (on runs,
//   restores and the tail itself), reconnecting with `Last-Event-ID` after a drop or a server
//   restart, with exponential backoff and jitter: nothing missed, nothing delivered twice.
// - A `MESSAGES_SNAPSHOT` from PauseMesh carries the thread's newest page
//   (`PAUSEMESH_SNAPSHOT_MESSAGES`), not its whole life: the official client would drop every
//   message it holds before the page; this one keeps them (`keepOlderMessages`).
// - `send()`, `answer()` and `runChecked()` surface the server's refusals (RUN_ERROR codes and problem
//   bodies) as `PauseMeshRefusal` with a stable `code` and a `kind` a UI can act on ("race":
//   another tab or person answered first; "busy"; "expired"; "invalid"; ...), and an
//   unreachable server as `PauseMeshOffline`.

import {
  type AbstractAgent,
  type AgentCapabilities,
  type AgentStateMutation,
  type AgentSubscriber,
  type BaseEvent,
  buildResumeArray,
  defaultApplyEvents,
  enforceOutgoingInput,
  HttpAgent,
  type HttpAgentConfig,
  type Interrupt,
  type Message,
  type MessagesSnapshotEvent,
  type RunAgentInput,
  type RunAgentResult,
  type RunErrorEvent,
  randomUUID,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";
import { lastValueFrom, type Observable, of } from "rxjs";
import { readFrames, type TailStatus, type ThreadEvent, ThreadTail } from "./sse.js";

export type { TailStatus, ThreadEvent } from "./sse.js";

/** What a refusal means for the person, whatever its exact code. */
export type RefusalKind =
  | "race" // the question was answered (or closed) elsewhere first: show what was recorded
  | "busy" // a run is active on the thread
  | "expired" // the question's deadline passed
  | "invalid" // the answer or input does not fit (its schema, the protocol)
  | "not_found" // no such thread for this person (made up, deleted, someone else's)
  | "resume_required" // the thread waits for an answer to its open question
  | "unavailable" // the server is shutting down or overloaded: try again later
  | "other";

const RACE_CODES = [
  "REPLAY_CONFLICT",
  "RESUME_SET_MISMATCH",
  "TOKEN_ALREADY_USED",
  "IDEMPOTENCY_CONFLICT",
  "CONTINUATION_CANCELLED",
  "DUPLICATE_INTERRUPT",
  "NO_OPEN_COHORT",
  "ALREADY",
];

/** The kind of a PauseMesh refusal code (`PAUSEMESH_AGUI_*`, `THREAD_BUSY`, `HTTP_404` …). */
export function refusalKind(code: string): RefusalKind {
  const upper = code.toUpperCase();
  if (upper.includes("EXPIRED")) return "expired";
  if (RACE_CODES.some((c) => upper.includes(c))) return "race";
  if (upper.includes("BUSY")) return "busy";
  if (upper.includes("RESUME_REQUIRED")) return "resume_required";
  if (upper.includes("NOT_FOUND") || upper === "HTTP_404" || upper === "HTTP_403") return "not_found";
  if (upper.includes("SHUTTING_DOWN") || upper === "HTTP_503" || upper === "HTTP_429") return "unavailable";
  if (["PAYLOAD", "INVALID", "SCHEMA", "TOO_LARGE"].some((c) => upper.includes(c))) return "invalid";
  return "other";
}

/** The server refused: a RUN_ERROR on the stream, or a problem body (`{code, detail}`). */
export class PauseMeshRefusal extends Error {
  readonly kind: RefusalKind;

  constructor(
    readonly code: string,
    message: string,
    readonly status?: number,
  ) {
    super(message || code);
    this.name = "PauseMeshRefusal";
    this.kind = refusalKind(code);
  }
}

/** The request never got an answer (network down, server gone): nothing was recorded. */
export class PauseMeshOffline extends Error {
  constructor(override readonly cause?: unknown) {
    super("The server could not be reached.");
    this.name = "PauseMeshOffline";
  }
}

export interface Backoff {
  /** The first delay, in ms. */
  readonly initialMs: number;
  /** The longest delay, in ms. */
  readonly maxMs: number;
  /** Each attempt's delay is the previous one times this. */
  readonly factor: number;
  /** The share of each delay that is random (0: none, 1: anywhere from 0 to the delay). */
  readonly jitter: number;
}

export const DEFAULT_BACKOFF: Backoff = { initialMs: 250, maxMs: 5_000, factor: 2, jitter: 0.5 };

/** The wait before reconnect attempt `attempt` (0-based): exponential, capped, with jitter so
 * that many pages cut off by one restart do not all come back at the same instant. */
export function backoffDelay(attempt: number, backoff: Backoff = DEFAULT_BACKOFF, random = Math.random): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * backoff.factor ** Math.max(0, attempt));
  const jitter = Math.min(1, Math.max(0, backoff.jitter));
  return Math.round(base * (1 - jitter) + base * jitter * random());
}

export interface PauseMeshAgentConfig extends HttpAgentConfig {
  /** `POST` endpoint replaying the thread without running the agent (default `{url}/connect`). */
  readonly connectUrl?: string;
  /** Called with each thread sequence seen on a run, a restore or the tail. */
  readonly onSequence?: (sequence: number) => void;
  /** Reconnect delays for `follow()`. */
  readonly backoff?: Backoff;
  /** The random source for the jitter (tests pass a fixed one). */
  readonly random?: () => number;
}

export interface FollowHandlers {
  readonly onEvent: (event: ThreadEvent) => void;
  readonly onStatus?: (status: TailStatus, detail?: string) => void;
}

/** A thread as `GET {url}/threads/{id}` reports it (the fields a client reads). */
export interface ThreadSnapshot {
  readonly lastSequence: number;
  readonly pendingInterrupts: readonly Interrupt[];
  /** Set when the snapshot (and connect) carry only the newest messages: the older ones are
   * `olderMessages(messagesCursor)`. */
  readonly messagesCursor: string | undefined;
  /** When the server first stored each of the snapshot's messages, by id (none for messages
   * stored before the server kept times). */
  readonly messageTimes: ReadonlyMap<string, Date>;
  readonly [key: string]: unknown;
}

/** A page of older messages, oldest first, and the cursor to the ones before it. */
export interface MessagePage {
  readonly messages: readonly Message[];
  readonly nextCursor: string | undefined;
  /** When the server first stored each of the page's messages, by id. */
  readonly messageTimes: ReadonlyMap<string, Date>;
}

/** A route's `messageTimes` (`{id: ISO-8601 UTC}`) as dates; anything else is left out. */
export function messageTimesOf(value: unknown): ReadonlyMap<string, Date> {
  const times = new Map<string, Date>();
  if (typeof value !== "object" || value === null || Array.isArray(value)) return times;
  for (const [id, text] of Object.entries(value as Record<string, unknown>)) {
    if (typeof text !== "string") continue;
    const at = new Date(text);
    if (!Number.isNaN(at.getTime())) times.set(id, at);
  }
  return times;
}

type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

export class PauseMeshAgent extends HttpAgent {
  readonly connectUrl: string;
  readonly threadUrl: string;
  readonly capabilitiesUrl: string;
  private seen = 0;
  private readonly backoff: Backoff;
  private readonly random: () => number;
  private readonly fetchFn: FetchFn;

  constructor(config: PauseMeshAgentConfig) {
    const baseFetch: FetchFn = config.fetch ?? ((url, init) => fetch(url, init));
    // The sequences the stream carries reach this agent once it exists (after `super`).
    const seen = { note: (_sequence: number): void => undefined };
    super({ ...config, fetch: watchSequences(baseFetch, (sequence) => seen.note(sequence)) });
    seen.note = (sequence) => {
      this.seen = Math.max(this.seen, sequence);
      config.onSequence?.(sequence);
    };
    const base = config.url.replace(/\/+$/, "");
    this.connectUrl = config.connectUrl ?? `${base}/connect`;
    this.threadUrl = `${base}/threads/${encodeURIComponent(this.threadId)}`;
    this.capabilitiesUrl = `${base}/capabilities`;
    this.backoff = config.backoff ?? DEFAULT_BACKOFF;
    this.random = config.random ?? Math.random;
    this.fetchFn = baseFetch;
  }

  /** The last thread sequence this agent has seen. */
  get lastSequence(): number {
    return this.seen;
  }

  /** The official apply, with PauseMesh's page snapshots kept from dropping older messages
   * (the last subscriber: every other one sees the event first). */
  protected override apply(
    input: RunAgentInput,
    events$: Observable<BaseEvent>,
    subscribers: AgentSubscriber[],
  ): Observable<AgentStateMutation> {
    const pages: AgentSubscriber = {
      onMessagesSnapshotEvent: ({ event, messages, state }) =>
        keepOlderMessages(input, event, messages as Message[], state),
    };
    return super.apply(input, events$, [...subscribers, pages]);
  }

  protected override connect(input: RunAgentInput): Observable<BaseEvent> {
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(this.connectUrl, this.requestInit(enforceOutgoingInput(input)))),
      this.debugLogger,
    );
  }

  /** What the server supports for its agent: `@ag-ui/client`'s optional `getCapabilities`,
   * answered by PauseMesh's `GET {url}/capabilities` (the protocol names no route for it). */
  override async getCapabilities(): Promise<AgentCapabilities> {
    let response: Response;
    try {
      response = await this.fetchFn(this.capabilitiesUrl, {
        headers: { ...this.headers, Accept: "application/json" },
        cache: "no-store",
      });
    } catch (error) {
      throw new PauseMeshOffline(error);
    }
    if (!response.ok) throw await refusalFrom(response);
    return (await response.json()) as AgentCapabilities;
  }

  /** The thread's record; `PauseMeshRefusal` "not_found" when it is not this person's. */
  async snapshot(): Promise<ThreadSnapshot> {
    let response: Response;
    try {
      response = await this.fetchFn(this.threadUrl, {
        headers: { ...this.headers, Accept: "application/json" },
        cache: "no-store",
      });
    } catch (error) {
      throw new PauseMeshOffline(error);
    }
    if (!response.ok) throw await refusalFrom(response);
    const body = (await response.json()) as Record<string, unknown>;
    const sequence = body["lastSequence"];
    const pending = body["pendingInterrupts"];
    const cursor = body["messagesCursor"];
    return {
      ...body,
      lastSequence: typeof sequence === "number" && Number.isSafeInteger(sequence) ? sequence : 0,
      pendingInterrupts: Array.isArray(pending) ? (pending as Interrupt[]) : [],
      messagesCursor: typeof cursor === "string" && cursor !== "" ? cursor : undefined,
      messageTimes: messageTimesOf(body["messageTimes"]),
    };
  }

  /** The messages before `cursor` (`GET {url}/threads/{id}/messages?before=&limit=`), oldest
   * first; a long thread's snapshot carries only its newest page. */
  async olderMessages(cursor: string, limit = 50): Promise<MessagePage> {
    const url = `${this.threadUrl}/messages?before=${encodeURIComponent(cursor)}&limit=${limit}`;
    let response: Response;
    try {
      response = await this.fetchFn(url, {
        headers: { ...this.headers, Accept: "application/json" },
        cache: "no-store",
      });
    } catch (error) {
      throw new PauseMeshOffline(error);
    }
    if (!response.ok) throw await refusalFrom(response);
    const body = (await response.json()) as {
      messages?: unknown;
      nextCursor?: unknown;
      messageTimes?: unknown;
    };
    const newestFirst = Array.isArray(body.messages) ? (body.messages as Message[]) : [];
    const next = body.nextCursor;
    return {
      messages: [...newestFirst].reverse(),
      nextCursor: typeof next === "string" && next !== "" ? next : undefined,
      messageTimes: messageTimesOf(body.messageTimes),
    };
  }

  /** Messages, state and the open question from the server (the agent is not run). */
  async restore(): Promise<ThreadSnapshot> {
    const snapshot = await this.snapshot();
    this.seen = Math.max(this.seen, snapshot.lastSequence);
    // The client refuses to start while it holds interrupts the input does not answer; a
    // restore answers nothing, and the server sends the current set back.
    this.pendingInterrupts = [];
    await this.checked(() => this.connectAgent());
    return snapshot;
  }

  /** Follows the thread's log from the last sequence seen; `stop()` the returned tail. */
  follow(handlers: FollowHandlers): ThreadTail {
    const tail = new ThreadTail({
      url: `${this.threadUrl}/events`,
      after: this.seen,
      fetch: (input, init) => this.fetchFn(String(input), { ...init, headers: { ...this.headers, ...init?.headers } }),
      delay: (attempt) => backoffDelay(attempt, this.backoff, this.random),
      onEvent: (event) => {
        this.seen = Math.max(this.seen, event.sequence);
        handlers.onEvent(event);
      },
      onStatus: (status, detail) => handlers.onStatus?.(status, detail),
    });
    tail.start();
    return tail;
  }

  /** Adds a user message and runs the agent (`user-<epoch ms>-<uuid>` id: the time it was
   * written survives a reload). */
  async send(text: string, parameters: Omit<RunParameters, "resume"> = {}): Promise<RunAgentResult> {
    const message: Message = { id: `user-${Date.now()}-${randomUUID()}`, role: "user", content: text };
    this.addMessage(message);
    try {
      return await this.runChecked(parameters);
    } catch (error) {
      // Nothing was recorded when the server was not reached: take the message back.
      if (error instanceof PauseMeshOffline) {
        this.setMessages(this.messages.filter((m) => m.id !== message.id));
      }
      throw error;
    }
  }

  /** Answers the open question(s): one payload per interrupt id, or `"cancelled"`. */
  async answer(
    answers: ReadonlyMap<string, unknown> | "cancelled",
    parameters: Omit<RunParameters, "resume"> = {},
  ): Promise<RunAgentResult> {
    const pending = this.pendingInterrupts;
    const responses = Object.fromEntries(
      pending.map((i) => [
        i.id,
        answers === "cancelled"
          ? { status: "cancelled" as const }
          : { status: "resolved" as const, payload: answers.get(i.id) },
      ]),
    );
    return this.runChecked({ ...parameters, resume: buildResumeArray(pending, responses) });
  }

  /** `runAgent`, with the server's refusals thrown as `PauseMeshRefusal` (`run` is the
   * client's own per-run stream). */
  async runChecked(parameters: RunParameters = {}): Promise<RunAgentResult> {
    return this.checked(() => this.runAgent(parameters));
  }

  private async checked(call: () => Promise<RunAgentResult>): Promise<RunAgentResult> {
    let refused: RunErrorEvent | undefined;
    const { unsubscribe } = this.subscribe({
      onRunErrorEvent: ({ event }) => {
        refused = event;
      },
    });
    let result: RunAgentResult;
    try {
      result = await call();
    } catch (error) {
      const status = (error as { status?: unknown } | null)?.status;
      if (typeof status !== "number") {
        if (refused !== undefined) throw runRefusal(refused);
        throw new PauseMeshOffline(error);
      }
      throw problemRefusal(status, (error as { payload?: unknown }).payload);
    } finally {
      unsubscribe();
    }
    if (refused !== undefined) throw runRefusal(refused);
    return result;
  }
}

export type RunParameters = Parameters<HttpAgent["runAgent"]>[0] & {};

/** A `MESSAGES_SNAPSHOT` that starts at a message this client holds after others (a page:
 * PauseMesh sends the newest `PAUSEMESH_SNAPSHOT_MESSAGES`) replaces only the messages from
 * there on; the ones before it stay, where the official client would drop them. Any other
 * snapshot (the whole thread, or a page whose start this client never had) applies as the
 * official client applies it. The part from the page's start on goes through the official
 * apply too, so activity and reasoning messages are kept or dropped exactly as it decides. */
export async function keepOlderMessages(
  input: RunAgentInput,
  event: MessagesSnapshotEvent,
  held: readonly Message[],
  state: unknown,
): Promise<AgentStateMutation | undefined> {
  const first = event.messages[0]?.id;
  const at = first === undefined ? -1 : held.findIndex((m) => m.id === first);
  if (at <= 0) return undefined;
  const from = { messages: held.slice(at), state } as unknown as AbstractAgent;
  const applied = await lastValueFrom(defaultApplyEvents(input, of(event), from, []), {
    defaultValue: {} as AgentStateMutation,
  });
  const rest = applied.messages ?? held.slice(at);
  return { messages: [...held.slice(0, at), ...rest], stopPropagation: true };
}

function runRefusal(event: RunErrorEvent): PauseMeshRefusal {
  return new PauseMeshRefusal(event.code ?? "RUN_ERROR", event.message);
}

function problemRefusal(status: number, payload: unknown): PauseMeshRefusal {
  const body = (typeof payload === "object" && payload !== null ? payload : {}) as Record<string, unknown>;
  const code = typeof body["code"] === "string" ? body["code"] : `HTTP_${status}`;
  const detail =
    typeof body["detail"] === "string"
      ? body["detail"]
      : typeof body["title"] === "string"
        ? body["title"]
        : `HTTP ${status}`;
  return new PauseMeshRefusal(code, detail, status);
}

async function refusalFrom(response: Response): Promise<PauseMeshRefusal> {
  let payload: unknown;
  try {
    payload = await response.json();
  } catch {
    payload = undefined;
  }
  return problemRefusal(response.status, payload);
}

/** Reports every `id:` (thread sequence) of an event-stream response, which the official
 * client's parser drops, while the client reads the same bytes. */
function watchSequences(inner: FetchFn, onSequence: (sequence: number) => void): FetchFn {
  return async (url, init) => {
    const response = await inner(url, init);
    const type = response.headers.get("content-type") ?? "";
    if (!response.ok || response.body === null || !type.includes("text/event-stream")) {
      return response;
    }
    const [forClient, forIds] = response.body.tee();
    readFrames(forIds, (frame) => {
      const sequence = Number(frame.id);
      if (frame.id !== undefined && Number.isSafeInteger(sequence)) onSequence(sequence);
    }).catch(() => {
      // The client's branch reports transport errors; this branch only watches ids.
    });
    return new Response(forClient, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}
