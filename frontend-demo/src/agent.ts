// The official AG-UI HttpAgent, taught two PauseMesh things: `connect` restores a thread from
// POST /agui/connect (messages, state and pending interrupts, without running the agent), and
// every response's `id:` fields (thread sequences, which the client's own parser drops) are
// reported so the live tail can skip events this tab already saw.

import {
  HttpAgent,
  type BaseEvent,
  type HttpAgentConfig,
  type RunAgentInput,
  enforceOutgoingInput,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";
import type { Observable } from "rxjs";
import { readFrames } from "./sse";

export interface PauseMeshAgentConfig extends HttpAgentConfig {
  /** POST endpoint that replays the thread without running the agent. */
  readonly connectUrl: string;
  /** Called with each thread sequence seen on a run or connect stream. */
  readonly onSequence?: (sequence: number) => void;
}

export class PauseMeshAgent extends HttpAgent {
  readonly connectUrl: string;

  constructor(config: PauseMeshAgentConfig) {
    const onSequence = config.onSequence;
    const baseFetch = config.fetch ?? ((url: string, init: RequestInit) => fetch(url, init));
    super({
      ...config,
      fetch: onSequence === undefined ? baseFetch : watchSequences(baseFetch, onSequence),
    });
    this.connectUrl = config.connectUrl;
  }

  protected override connect(input: RunAgentInput): Observable<BaseEvent> {
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(this.connectUrl, this.requestInit(enforceOutgoingInput(input)))),
      this.debugLogger,
    );
  }
}

type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

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
