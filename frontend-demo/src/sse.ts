// Server-sent events: a small incremental parser that keeps the `id:` field, which the
// official AG-UI client drops, and a thread tail that reconnects from the last event id.

/** One parsed SSE frame. `id` is the thread sequence PauseMesh puts on every frame. */
export interface SseFrame {
  readonly id: string | undefined;
  readonly event: string | undefined;
  readonly data: string;
}

/**
 * Incremental SSE parser (WHATWG event-stream rules): feed decoded text chunks, get complete
 * frames back. Comment lines (keep-alives) are ignored; CRLF and LF line ends are accepted.
 */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private id: string | undefined;
  private event: string | undefined;
  private hasField = false;

  feed(chunk: string): SseFrame[] {
    this.buffer += chunk;
    const frames: SseFrame[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (match === null) break;
      // A lone CR at the very end may be the first half of CRLF: wait for more input.
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const frame = this.line(line);
      if (frame !== undefined) frames.push(frame);
    }
    return frames;
  }

  private line(line: string): SseFrame | undefined {
    if (line === "") {
      if (!this.hasField) return undefined;
      const frame: SseFrame = { id: this.id, event: this.event, data: this.data.join("\n") };
      this.data = [];
      this.event = undefined;
      this.id = undefined;
      this.hasField = false;
      return frame;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data.push(value);
      this.hasField = true;
    } else if (field === "id") {
      if (!value.includes("\0")) this.id = value;
      this.hasField = true;
    } else if (field === "event") {
      this.event = value;
      this.hasField = true;
    }
    return undefined;
  }
}

/** Reads a `text/event-stream` body to the end, calling `onFrame` for each frame. */
export async function readFrames(
  body: ReadableStream<Uint8Array>,
  onFrame: (frame: SseFrame) => void,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const frame of parser.feed(decoder.decode(value, { stream: true }))) onFrame(frame);
    }
  } finally {
    reader.releaseLock();
  }
}

/** A thread event as the tail delivers it: the AG-UI event and its thread sequence. */
export interface ThreadEvent {
  readonly sequence: number;
  readonly event: { readonly type: string; readonly [key: string]: unknown };
}

export type TailStatus = "connecting" | "live" | "reconnecting" | "stopped";

export interface TailOptions {
  /** `GET …/agui/threads/{id}/events` */
  readonly url: string;
  /** Replay starts after this sequence. */
  readonly after: number;
  readonly onEvent: (event: ThreadEvent) => void;
  readonly onStatus: (status: TailStatus, detail?: string) => void;
  readonly fetch?: typeof fetch;
  /** Delays between reconnect attempts, in ms; the last one repeats. */
  readonly backoff?: readonly number[];
  /** The delay before reconnect attempt `attempt` (0-based), instead of `backoff`. */
  readonly delay?: (attempt: number) => number;
}

const DEFAULT_BACKOFF = [250, 500, 1000, 2000, 3000] as const;

/**
 * Follows a thread's event log: replay after the last seen sequence, then the live tail.
 * When the connection drops it reconnects with `Last-Event-ID`, so nothing is missed or
 * delivered twice.
 */
export class ThreadTail {
  private lastSequence: number;
  private controller: AbortController | undefined;
  private stopped = false;
  private attempt = 0;
  private readonly fetchFn: typeof fetch;

  constructor(private readonly options: TailOptions) {
    this.lastSequence = options.after;
    this.fetchFn = options.fetch ?? ((input, init) => fetch(input, init));
  }

  get sequence(): number {
    return this.lastSequence;
  }

  start(): void {
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.controller?.abort();
    this.options.onStatus("stopped");
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      this.controller = new AbortController();
      let detail: string | undefined;
      try {
        const response = await this.fetchFn(this.options.url, {
          headers: { Accept: "text/event-stream", "Last-Event-ID": String(this.lastSequence) },
          signal: this.controller.signal,
          cache: "no-store",
        });
        if (response.ok && response.body !== null) {
          this.attempt = 0;
          this.options.onStatus("live");
          await readFrames(response.body, (frame) => this.deliver(frame));
          detail = "The live connection closed.";
        } else {
          detail = `The server answered ${response.status}.`;
          await response.body?.cancel();
        }
      } catch (error) {
        if (this.stopped) return;
        detail = error instanceof Error ? error.message : String(error);
      }
      if (this.stopped) return;
      this.options.onStatus("reconnecting", detail);
      await sleep(this.delay());
    }
  }

  private deliver(frame: SseFrame): void {
    if (frame.data === "") return;
    const sequence = frame.id === undefined ? Number.NaN : Number(frame.id);
    let parsed: unknown;
    try {
      parsed = JSON.parse(frame.data);
    } catch {
      return;
    }
    if (!isEvent(parsed)) return;
    if (Number.isSafeInteger(sequence)) {
      // Replays after a reconnect may overlap what was already seen: deliver each once.
      if (sequence <= this.lastSequence) return;
      this.lastSequence = sequence;
    }
    this.options.onEvent({ sequence: this.lastSequence, event: parsed });
  }

  private delay(): number {
    if (this.options.delay !== undefined) return this.options.delay(this.attempt++);
    const backoff = this.options.backoff ?? DEFAULT_BACKOFF;
    const value = backoff[Math.min(this.attempt, backoff.length - 1)] ?? 1000;
    this.attempt += 1;
    return value;
  }
}

function isEvent(value: unknown): value is ThreadEvent["event"] {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { type?: unknown }).type === "string"
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
