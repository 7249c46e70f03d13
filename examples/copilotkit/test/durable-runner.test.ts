/**
 * The durable runner on its own: connects are answered by PauseMesh's `/agui/connect` (here an
 * HTTP server in the test speaking that route's wire format) unless a run is live in this
 * process. The whole path against a real `pausemesh demo` is tests/e2e/test_copilotkit.py.
 */

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { IncomingHttpHeaders, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";

import { AbstractAgent, EventType } from "@ag-ui/client";
import type { BaseEvent, RunAgentInput } from "@ag-ui/client";
import { InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { Observable, ReplaySubject, firstValueFrom, from, lastValueFrom, toArray } from "rxjs";

import { PauseMeshRunner, connectHeaders, connectInput } from "../src/durable-runner.js";

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
  body: RunAgentInput;
}

const QUESTION = {
  id: "c-1",
  reason: "input_required",
  message: "Which flight should I book?",
  responseSchema: { type: "object", properties: { flight: { type: "string", enum: ["PM101"] } } },
};

/** PauseMesh's connect as it is on the wire: LF-framed `data:` lines with `id:` sequences. */
function restored(input: RunAgentInput): string {
  const events = [
    { type: "RUN_STARTED", threadId: input.threadId, runId: input.runId },
    {
      type: "MESSAGES_SNAPSHOT",
      messages: [{ id: "u1", role: "user", content: "Book me a flight" }],
    },
    { type: "STATE_SNAPSHOT", snapshot: { bookings: [] } },
    {
      type: "RUN_FINISHED",
      threadId: input.threadId,
      runId: input.runId,
      outcome: { type: "interrupt", interrupts: [QUESTION] },
    },
  ];
  return events.map((event, i) => `id: ${i + 1}\ndata: ${JSON.stringify(event)}\n\n`).join("");
}

let server: Server;
let url: string;
let seen: Seen[];
let status: number;

before(async () => {
  server = createServer((request, response) => {
    let raw = "";
    request.on("data", (chunk: Buffer) => {
      raw += chunk.toString();
    });
    request.on("end", () => {
      const body = JSON.parse(raw) as RunAgentInput;
      seen.push({ path: request.url ?? "", headers: request.headers, body });
      if (status !== 200) {
        response.writeHead(status, { "content-type": "application/problem+json" });
        response.end(JSON.stringify({ status, code: "UNAUTHENTICATED", title: "Unauthorized" }));
        return;
      }
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end(restored(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/agui/connect`;
});

after(() => {
  server.close();
});

beforeEach(() => {
  seen = [];
  status = 200;
});

/** An agent whose run stays open until the test ends it, as a model mid-answer does. */
class HeldAgent extends AbstractAgent {
  readonly events = new ReplaySubject<BaseEvent>();

  run(input: RunAgentInput): Observable<BaseEvent> {
    return new Observable<BaseEvent>((subscriber) => {
      subscriber.next({
        type: EventType.RUN_STARTED,
        threadId: input.threadId,
        runId: input.runId,
      } as BaseEvent);
      return this.events.subscribe(subscriber);
    });
  }

  finish(input: RunAgentInput): void {
    this.events.next({
      type: EventType.RUN_FINISHED,
      threadId: input.threadId,
      runId: input.runId,
    } as BaseEvent);
    this.events.complete();
  }
}

/** An agent that answers every run with the same events (PauseMesh refusing, say). */
class AnsweringAgent extends AbstractAgent {
  readonly inputs: RunAgentInput[] = [];

  constructor(private readonly answer: BaseEvent[]) {
    super();
  }

  run(input: RunAgentInput): Observable<BaseEvent> {
    this.inputs.push(input);
    return from(this.answer);
  }
}

describe("PauseMeshRunner.connect", () => {
  test("a thread this runtime has never seen is restored from PauseMesh with its question", async () => {
    const runner = new PauseMeshRunner({ connectUrl: url });
    const events = await lastValueFrom(
      runner.connect({ threadId: "t-restart" }).pipe(toArray()),
    );

    assert.deepEqual(
      events.map((event) => event.type),
      ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"],
    );
    const finished = events[3] as unknown as { outcome: { interrupts: unknown[] } };
    assert.deepEqual(finished.outcome.interrupts, [QUESTION]);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.path, "/agui/connect");
    assert.equal(seen[0]?.body.threadId, "t-restart");
    assert.deepEqual(seen[0]?.body.messages, []);
  });

  test("the user's headers reach PauseMesh, the configured ones win, transport ones stay behind", async () => {
    const runner = new PauseMeshRunner({
      connectUrl: url,
      headers: ({ threadId }) => ({ "X-Service": `svc-${threadId}`, cookie: "configured=1" }),
    });
    await lastValueFrom(
      runner
        .connect({
          threadId: "t-1",
          headers: { Authorization: "Bearer user-token", Cookie: "browser=1", Host: "evil" },
        })
        .pipe(toArray()),
    );

    const headers = seen[0]?.headers ?? {};
    assert.equal(headers.authorization, "Bearer user-token");
    assert.equal(headers["x-service"], "svc-t-1");
    assert.equal(headers.cookie, "configured=1");
    assert.notEqual(headers.host, "evil");
  });

  test("a refusal from PauseMesh fails the connect instead of restoring an empty thread", async () => {
    status = 401;
    const runner = new PauseMeshRunner({ connectUrl: url });
    await assert.rejects(lastValueFrom(runner.connect({ threadId: "t-1" }).pipe(toArray())), /401/);
  });

  test("a run still streaming in this process is bridged from memory, not from PauseMesh", async () => {
    const inner = new InMemoryAgentRunner();
    const runner = new PauseMeshRunner({ connectUrl: url, runner: inner });
    const agent = new HeldAgent({ threadId: "t-live" });
    const input: RunAgentInput = { ...connectInput("t-live"), runId: "r-live" };
    const run = lastValueFrom(runner.run({ threadId: "t-live", agent, input }).pipe(toArray()));

    assert.equal(await runner.isRunning({ threadId: "t-live" }), true);
    const bridged = runner.connect({ threadId: "t-live" }).pipe(toArray());
    const connected = lastValueFrom(bridged);
    agent.finish(input);
    const events = await connected;
    await run;

    assert.equal(seen.length, 0);
    assert.deepEqual(
      events.map((event) => event.type),
      ["RUN_STARTED", "RUN_FINISHED"],
    );
    assert.equal(await runner.isRunning({ threadId: "t-live" }), false);
  });

  test("once the run ended, the next connect is answered by PauseMesh again", async () => {
    const runner = new PauseMeshRunner({ connectUrl: url });
    const agent = new HeldAgent({ threadId: "t-done" });
    const input: RunAgentInput = { ...connectInput("t-done"), runId: "r-done" };
    const run = lastValueFrom(runner.run({ threadId: "t-done", agent, input }).pipe(toArray()));
    agent.finish(input);
    await run;

    const first = await firstValueFrom(runner.connect({ threadId: "t-done" }));

    assert.equal(first.type, "RUN_STARTED");
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.body.threadId, "t-done");
  });
});

describe("PauseMeshRunner.run", () => {
  test("a second run of a thread running here goes to the agent, which answers for itself", async () => {
    const runner = new PauseMeshRunner({ connectUrl: url });
    const first = new HeldAgent({ threadId: "t-busy" });
    const input: RunAgentInput = { ...connectInput("t-busy"), runId: "r-1" };
    const running = lastValueFrom(runner.run({ threadId: "t-busy", agent: first, input }).pipe(toArray()));
    const refusal = { type: EventType.RUN_ERROR, message: "busy", code: "THREAD_BUSY" } as BaseEvent;
    const second = new AnsweringAgent([refusal]);

    const events = await lastValueFrom(
      runner.run({ threadId: "t-busy", agent: second, input: { ...input, runId: "r-2" } }).pipe(toArray()),
    );
    first.finish(input);
    await running;

    assert.deepEqual(events, [refusal]);
    assert.deepEqual(second.inputs.map((seenInput) => seenInput.runId), ["r-2"]);
  });

  test("a refusal by the wrapped runner for another reason is not hidden", async () => {
    const refusing = new InMemoryAgentRunner();
    refusing.run = () => {
      throw new Error("runner is closed");
    };
    const runner = new PauseMeshRunner({ connectUrl: url, runner: refusing });
    const input = connectInput("t-closed");

    await assert.rejects(
      lastValueFrom(runner.run({ threadId: "t-closed", agent: new AnsweringAgent([]), input })),
      /runner is closed/,
    );
  });
});

describe("connectHeaders", () => {
  test("names are lower-cased and a static map applies to every thread", () => {
    assert.deepEqual(
      connectHeaders(
        { threadId: "t", headers: { "X-Trace": "1", "Content-Length": "9" } },
        { Authorization: "PauseMesh svc" },
      ),
      { "x-trace": "1", authorization: "PauseMesh svc" },
    );
  });
});

describe("connectInput", () => {
  test("each connect is its own run of the thread and carries no client history", () => {
    const one = connectInput("t");
    const two = connectInput("t");
    assert.notEqual(one.runId, two.runId);
    assert.deepEqual(
      { ...one, runId: "" },
      {
        threadId: "t",
        runId: "",
        messages: [],
        state: {},
        tools: [],
        context: [],
        forwardedProps: {},
      },
    );
  });
});
