/**
 * A CopilotKit `AgentRunner` that restores threads from PauseMesh.
 *
 * CopilotKit's runtime answers `/agent/:id/connect` from its runner only, and the stock
 * `InMemoryAgentRunner` knows just the runs that went through this process: after a runtime
 * restart, on a second runtime instance, or after a deploy, a reload restores nothing although
 * PauseMesh still holds the messages, the state and the open question. This runner keeps the
 * in-memory runner for runs (and to bridge a run still streaming in this process), answers
 * every other connect from PauseMesh's `POST /agui/connect`, the durable record, and lets
 * PauseMesh answer a run the in-memory runner refuses because the thread is busy here.
 *
 * Drop it into your own runtime:
 *
 * ```ts
 * const runtime = new CopilotRuntime({
 *   agents: { default: new HttpAgent({ url: "http://127.0.0.1:8787/agui" }) },
 *   runner: new PauseMeshRunner({ connectUrl: "http://127.0.0.1:8787/agui/connect" }),
 * });
 * ```
 */

import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";
import type { BaseEvent, RunAgentInput } from "@ag-ui/client";
import { AgentRunner, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import type {
  AgentRunnerConnectRequest,
  AgentRunnerIsRunningRequest,
  AgentRunnerRunRequest,
  AgentRunnerStopRequest,
} from "@copilotkit/runtime/v2";
import { defer, from, switchMap } from "rxjs";
import type { Observable } from "rxjs";

/** Headers sent to PauseMesh's connect, computed per request (e.g. from the browser's). */
export type ConnectHeaders =
  | Record<string, string>
  | ((request: AgentRunnerConnectRequest) => Record<string, string>);

export interface PauseMeshRunnerOptions {
  /** PauseMesh's AG-UI connect route, e.g. `http://127.0.0.1:8787/agui/connect`. */
  connectUrl: string;
  /**
   * Extra headers for the connect request (your service credentials, say). They win over the
   * headers CopilotKit forwards from the browser request, which are sent too so PauseMesh's
   * principal resolver sees the same user on connect as on runs.
   */
  headers?: ConnectHeaders;
  /** The runner that executes runs; default: a new `InMemoryAgentRunner`. */
  runner?: AgentRunner;
  /** The fetch used for the connect request (default: the global one). */
  fetch?: typeof globalThis.fetch;
}

// Request headers that describe the browser's own request to the runtime, not the user.
const NOT_FORWARDED = new Set([
  "accept",
  "accept-encoding",
  "connection",
  "content-length",
  "content-type",
  "host",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The headers PauseMesh gets on connect: the forwarded ones, then the configured ones. */
export function connectHeaders(
  request: AgentRunnerConnectRequest,
  configured: ConnectHeaders | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    if (!NOT_FORWARDED.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
  }
  const extra = typeof configured === "function" ? configured(request) : (configured ?? {});
  for (const [name, value] of Object.entries(extra)) headers[name.toLowerCase()] = value;
  return headers;
}

/** The body of a connect: a `RunAgentInput` that carries nothing but the thread. */
export function connectInput(threadId: string): RunAgentInput {
  return {
    threadId,
    runId: randomUUID(),
    messages: [],
    state: {},
    tools: [],
    context: [],
    forwardedProps: {},
  };
}

export class PauseMeshRunner extends AgentRunner {
  readonly connectUrl: string;
  private readonly runner: AgentRunner;
  private readonly headers: ConnectHeaders | undefined;
  private readonly fetchImpl: typeof globalThis.fetch | undefined;

  constructor(options: PauseMeshRunnerOptions) {
    super();
    this.connectUrl = options.connectUrl;
    this.runner = options.runner ?? new InMemoryAgentRunner();
    this.headers = options.headers;
    this.fetchImpl = options.fetch;
  }

  /**
   * Runs go through the wrapped runner. One it refuses because the thread is already running
   * here (a second tab answering the same question) goes straight to PauseMesh instead:
   * CopilotKit would answer the refusal with an empty stream the browser never notices, while
   * PauseMesh, which holds the thread's run lease, refuses with a `RUN_ERROR` and its code.
   */
  run(request: AgentRunnerRunRequest): Observable<BaseEvent> {
    try {
      return this.runner.run(request);
    } catch (error) {
      return defer(() => from(this.runner.isRunning({ threadId: request.threadId }))).pipe(
        switchMap((live) => {
          if (!live) throw error;
          return request.agent.run(request.input);
        }),
      );
    }
  }

  /**
   * A run streaming in this process is bridged from memory (its events are not all in
   * PauseMesh's snapshot yet); anything else comes from PauseMesh, so a restarted or a second
   * runtime restores the thread, and a reload never replays an old `RUN_ERROR` from memory.
   */
  connect(request: AgentRunnerConnectRequest): Observable<BaseEvent> {
    return defer(() => from(this.runner.isRunning({ threadId: request.threadId }))).pipe(
      switchMap((live) => (live ? this.runner.connect(request) : this.restore(request))),
    );
  }

  isRunning(request: AgentRunnerIsRunningRequest): Promise<boolean> {
    return this.runner.isRunning(request);
  }

  stop(request: AgentRunnerStopRequest): Promise<boolean | undefined> {
    return this.runner.stop(request);
  }

  /** PauseMesh's `RUN_STARTED → MESSAGES_SNAPSHOT → STATE_SNAPSHOT → RUN_FINISHED`. */
  private restore(request: AgentRunnerConnectRequest): Observable<BaseEvent> {
    const agent = new HttpAgent({
      url: this.connectUrl,
      threadId: request.threadId,
      headers: connectHeaders(request, this.headers),
      ...(this.fetchImpl === undefined ? {} : { fetch: this.fetchImpl }),
    });
    return agent.run(connectInput(request.threadId));
  }
}
