// The reconnecting client (src/pausemesh-agent.ts) over the official @ag-ui/client, against a
// real Node HTTP server speaking PauseMesh's wire: SSE frames with `id:` sequences, the thread
// record, `POST /agui/connect`, a tail that honours `Last-Event-ID`, problem bodies.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { test } from "node:test";
import {
  backoffDelay,
  messageTimesOf,
  PauseMeshAgent,
  PauseMeshOffline,
  PauseMeshRefusal,
  refusalKind,
} from "../src/pausemesh-agent.js";
import type { TailStatus, ThreadEvent } from "../src/sse.js";
import type { Message } from "@ag-ui/client";

const THREAD = "t-1";

/** What `GET /agui/capabilities` answers (the shape PauseMesh serves, abridged). */
const CAPABILITIES = {
  identity: { type: "pausemesh", name: "travel_agent" },
  transport: { streaming: true, resumable: true },
  humanInTheLoop: { supported: true, interrupts: true, approveWithEdits: false },
};

/** The thread's log as the server keeps it: sequence → event. */
const LOG: [number, Record<string, unknown>][] = [
  [1, { type: "RUN_STARTED", threadId: THREAD, runId: "r-1" }],
  [2, { type: "TEXT_MESSAGE_START", messageId: "a1", role: "assistant" }],
  [3, { type: "TEXT_MESSAGE_CONTENT", messageId: "a1", delta: "I found 4 flights to Porto." }],
  [4, { type: "TEXT_MESSAGE_END", messageId: "a1" }],
  [5, { type: "RUN_FINISHED", threadId: THREAD, runId: "r-1" }],
];

function frame(sequence: number | undefined, event: unknown): string {
  return `${sequence === undefined ? "" : `id: ${sequence}\n`}data: ${JSON.stringify(event)}\n\n`;
}

function sse(response: ServerResponse): void {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
}

interface Wire {
  readonly server: Server;
  readonly url: string;
  readonly lastEventIds: string[];
  readonly capabilityHeaders: string[];
  /** The tail cuts its first connection after this many frames (then serves the rest). */
  cutAfter: number | undefined;
  runError: { code: string; message: string } | undefined;
  /** The messages of the `MESSAGES_SNAPSHOT` a run sends before it ends (none: no snapshot). */
  runSnapshot: readonly Record<string, unknown>[] | undefined;
  restart(): Promise<void>;
  close(): Promise<void>;
}

async function listen(server: Server, port = 0): Promise<number> {
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

async function pausemesh(): Promise<Wire> {
  const sockets = new Set<Socket>();
  const handler = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const path = new URL(request.url ?? "/", "http://x").pathname;
    if (request.method === "GET" && path === `/agui/threads/${THREAD}`) {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          threadId: THREAD,
          lastSequence: 5,
          pendingInterrupts: [],
          messageTimes: { a1: "2026-12-07T18:40:05.250Z", bad: "not a time" },
        }),
      );
    } else if (request.method === "GET" && path.startsWith("/agui/threads/") && !path.endsWith("/events")) {
      response.writeHead(404, { "content-type": "application/problem+json" });
      response.end(JSON.stringify({ code: "THREAD_NOT_FOUND", detail: "No such thread." }));
    } else if (request.method === "GET" && path === "/agui/capabilities") {
      wire.capabilityHeaders.push(String(request.headers["x-demo-person"] ?? ""));
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(CAPABILITIES));
    } else if (request.method === "POST" && path === "/agui/connect") {
      // The restore: the thread as it stands, the agent not run (no ids: not logged).
      sse(response);
      response.write(frame(undefined, { type: "RUN_STARTED", threadId: THREAD, runId: "c-1" }));
      const messages = [
        { id: "user-1796000000000-u", role: "user", content: "A flight to Porto" },
        { id: "a1", role: "assistant", content: "I found 4 flights to Porto." },
      ];
      response.write(frame(undefined, { type: "MESSAGES_SNAPSHOT", messages }));
      response.write(frame(undefined, { type: "STATE_SNAPSHOT", snapshot: { bookings: [] } }));
      response.end(frame(undefined, { type: "RUN_FINISHED", threadId: THREAD, runId: "c-1" }));
    } else if (request.method === "POST" && path === "/agui") {
      sse(response);
      response.write(frame(6, { type: "RUN_STARTED", threadId: THREAD, runId: "r-2" }));
      if (wire.runSnapshot !== undefined) {
        response.write(frame(undefined, { type: "MESSAGES_SNAPSHOT", messages: wire.runSnapshot }));
      }
      const refused = wire.runError;
      response.end(
        refused === undefined
          ? frame(7, { type: "RUN_FINISHED", threadId: THREAD, runId: "r-2" })
          : frame(7, { type: "RUN_ERROR", ...refused }),
      );
    } else if (request.method === "GET" && path === `/agui/threads/${THREAD}/events`) {
      const header = request.headers["last-event-id"];
      const after = Number(Array.isArray(header) ? header[0] : (header ?? "0"));
      wire.lastEventIds.push(String(after));
      sse(response);
      // A replay after a reconnect may overlap what was delivered: the server sends from one
      // before, the client must deliver each sequence once.
      const from = Math.max(0, after - 1);
      let sent = 0;
      for (const [sequence, event] of LOG) {
        if (sequence <= from) continue;
        response.write(frame(sequence, event));
        sent += 1;
        if (wire.cutAfter !== undefined && sent === wire.cutAfter) {
          wire.cutAfter = undefined;
          await new Promise((resolve) => setTimeout(resolve, 20));
          request.socket.destroy(); // the connection drops mid-stream
          return;
        }
      }
      // Then idle, as a live tail does, until the test ends or the server goes away.
    } else {
      response.writeHead(404).end();
    }
  };
  let server = createServer((request, response) => void handler(request, response));
  const track = (s: Server): void => {
    s.on("connection", (socket: Socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
  };
  track(server);
  const port = await listen(server);
  const stop = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  const wire: Wire = {
    get server() {
      return server;
    },
    url: `http://127.0.0.1:${port}`,
    lastEventIds: [],
    capabilityHeaders: [],
    cutAfter: undefined,
    runError: undefined,
    runSnapshot: undefined,
    async restart() {
      await stop();
      server = createServer((request, response) => void handler(request, response));
      track(server);
      await listen(server, port);
    },
    close: stop,
  };
  return wire;
}

function agentFor(wire: Wire, threadId = THREAD): PauseMeshAgent {
  // No jitter and short waits: the test decides when the server is back, not a clock.
  const backoff = { initialMs: 10, maxMs: 50, factor: 2, jitter: 0 };
  return new PauseMeshAgent({ url: `${wire.url}/agui`, threadId, backoff });
}

async function until(check: () => boolean, what: string | (() => string)): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${typeof what === "string" ? what : what()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test("restore reads the thread and replays it through connect, the agent not run", async () => {
  const wire = await pausemesh();
  try {
    const agent = agentFor(wire);
    const snapshot = await agent.restore();
    assert.equal(snapshot.lastSequence, 5);
    assert.equal(agent.lastSequence, 5);
    // The server's time per message, beside the messages (an unreadable one left out).
    assert.deepEqual([...snapshot.messageTimes], [["a1", new Date("2026-12-07T18:40:05.250Z")]]);
    assert.deepEqual(
      agent.messages.map((m) => [m.id, m.content]),
      [
        ["user-1796000000000-u", "A flight to Porto"],
        ["a1", "I found 4 flights to Porto."],
      ],
    );
    assert.deepEqual(agent.state, { bookings: [] });
  } finally {
    await wire.close();
  }
});

const said = (id: string): Message => ({ id, role: "user", content: `said ${id}` });

test("a run's page snapshot replaces the messages from the page's first on, the older ones stay", async () => {
  const wire = await pausemesh();
  try {
    const agent = agentFor(wire);
    agent.setMessages(["m1", "m2", "m3", "m4"].map(said));
    // The newest page: m3 edited by the server, m4 gone from it, a5 new.
    wire.runSnapshot = [{ ...said("m3"), content: "m3 as stored" }, said("a5")];
    await agent.runChecked();
    assert.deepEqual(
      agent.messages.map((m) => [m.id, m.content]),
      [
        ["m1", "said m1"],
        ["m2", "said m2"],
        ["m3", "m3 as stored"],
        ["a5", "said a5"],
      ],
    );
  } finally {
    await wire.close();
  }
});

test("a snapshot of the whole thread, or a page this client never reached, applies as the official client does", async () => {
  const wire = await pausemesh();
  try {
    const whole = agentFor(wire);
    whole.setMessages(["m1", "m2", "m3"].map(said));
    wire.runSnapshot = [said("m1"), said("m3")];
    await whole.runChecked();
    assert.deepEqual(
      whole.messages.map((m) => m.id),
      ["m1", "m3"],
    );

    const behind = agentFor(wire);
    behind.setMessages(["m1", "m2"].map(said));
    wire.runSnapshot = [said("m7"), said("m8")];
    await behind.runChecked();
    assert.deepEqual(
      behind.messages.map((m) => m.id),
      ["m7", "m8"],
    );
  } finally {
    await wire.close();
  }
});

test("getCapabilities reads GET {url}/capabilities with the agent's headers", async () => {
  const wire = await pausemesh();
  try {
    const agent = new PauseMeshAgent({
      url: `${wire.url}/agui`,
      threadId: THREAD,
      headers: { "X-Demo-Person": "traveller" },
    });
    const capabilities = await agent.getCapabilities();
    assert.deepEqual(capabilities, CAPABILITIES);
    assert.deepEqual(wire.capabilityHeaders, ["traveller"]);
  } finally {
    await wire.close();
  }
  const gone = new PauseMeshAgent({ url: `${wire.url}/agui`, threadId: THREAD });
  await assert.rejects(gone.getCapabilities(), PauseMeshOffline);
});

test("a thread that is not this person's is a not_found refusal, nothing created", async () => {
  const wire = await pausemesh();
  try {
    const agent = agentFor(wire, "someone-elses");
    await assert.rejects(agent.restore(), (error: unknown) => {
      assert.ok(error instanceof PauseMeshRefusal);
      assert.equal(error.code, "THREAD_NOT_FOUND");
      assert.equal(error.kind, "not_found");
      assert.equal(error.status, 404);
      return true;
    });
    assert.deepEqual(agent.messages, []);
  } finally {
    await wire.close();
  }
});

test("the follow tail resumes with Last-Event-ID after a drop and a restart, each event once", async () => {
  const wire = await pausemesh();
  const tails = [];
  try {
    const agent = agentFor(wire);
    const seen: ThreadEvent[] = [];
    const statuses: TailStatus[] = [];
    wire.cutAfter = 2; // the first connection drops after sequences 1 and 2
    const tail = agent.follow({
      onEvent: (event) => seen.push(event),
      onStatus: (status) => statuses.push(status),
    });
    tails.push(tail);
    await until(
      () => seen.length === 5,
      () => `the whole log (${JSON.stringify([seen.map((e) => e.sequence), wire.lastEventIds, statuses])})`,
    );
    assert.deepEqual(
      seen.map((e) => e.sequence),
      [1, 2, 3, 4, 5],
    );
    assert.deepEqual(wire.lastEventIds.slice(0, 2), ["0", "2"]);
    assert.equal(agent.lastSequence, 5);

    // The server restarts (every connection cut): the tail comes back by itself from 5.
    const before = statuses.length;
    await wire.restart();
    await until(() => statuses.slice(before).includes("live"), "the tail to be live again");
    assert.ok(statuses.slice(before).includes("reconnecting"));
    assert.equal(wire.lastEventIds.at(-1), "5");
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(
      seen.map((e) => e.sequence),
      [1, 2, 3, 4, 5],
      "the replayed sequence 5 was not delivered twice",
    );
  } finally {
    for (const tail of tails) tail.stop();
    await wire.close();
  }
});

test("a RUN_ERROR is a typed refusal with its code and kind; the run's ids are tracked", async () => {
  const wire = await pausemesh();
  try {
    const agent = agentFor(wire);
    wire.runError = { code: "THREAD_BUSY", message: "A run is active on this thread." };
    await assert.rejects(agent.send("no, Porto"), (error: unknown) => {
      assert.ok(error instanceof PauseMeshRefusal);
      assert.equal(error.kind, "busy");
      assert.equal(error.message, "A run is active on this thread.");
      return true;
    });
    assert.equal(agent.lastSequence, 7);
    wire.runError = undefined;
    await agent.send("A flight to Porto");
    const sent = agent.messages.filter((m) => m.role === "user").at(-1);
    assert.match(sent?.id ?? "", /^user-\d{13}-/);
  } finally {
    await wire.close();
  }
});

test("an unreachable server is PauseMeshOffline and the unsent message is taken back", async () => {
  const wire = await pausemesh();
  const agent = agentFor(wire);
  await wire.close();
  await assert.rejects(agent.send("Madrid"), (error: unknown) => error instanceof PauseMeshOffline);
  assert.deepEqual(agent.messages, []);
});

test("refusal codes map to kinds a page can act on", () => {
  assert.equal(refusalKind("PAUSEMESH_AGUI_RESUME_SET_MISMATCH"), "race");
  assert.equal(refusalKind("TOKEN_ALREADY_USED"), "race");
  assert.equal(refusalKind("THREAD_BUSY"), "busy");
  assert.equal(refusalKind("PAUSEMESH_AGUI_INTERRUPT_EXPIRED"), "expired");
  assert.equal(refusalKind("PAUSEMESH_AGUI_INVALID_PAYLOAD"), "invalid");
  assert.equal(refusalKind("PAUSEMESH_AGUI_RESUME_REQUIRED"), "resume_required");
  assert.equal(refusalKind("HTTP_404"), "not_found");
  assert.equal(refusalKind("SERVER_SHUTTING_DOWN"), "unavailable");
  assert.equal(refusalKind("SOMETHING_NEW"), "other");
});

test("reconnect delays grow to a cap, with jitter within its share", () => {
  const backoff = { initialMs: 250, maxMs: 5_000, factor: 2, jitter: 0.5 };
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 9].map((n) => backoffDelay(n, backoff, () => 1)),
    [250, 500, 1000, 2000, 4000, 5000, 5000],
  );
  assert.equal(backoffDelay(0, backoff, () => 0), 125);
  assert.equal(backoffDelay(5, backoff, () => 0), 2500);
  for (let i = 0; i < 100; i += 1) {
    const delay = backoffDelay(3, backoff);
    assert.ok(delay >= 1000 && delay <= 2000, String(delay));
  }
});

test("messageTimesOf keeps the ids with a readable time and nothing else", () => {
  assert.deepEqual([...messageTimesOf({ m1: "2026-12-07T18:40:00.000Z", m2: 5, m3: "soon" })], [
    ["m1", new Date("2026-12-07T18:40:00.000Z")],
  ]);
  assert.equal(messageTimesOf(undefined).size, 0);
  assert.equal(messageTimesOf(["2026-12-07T18:40:00.000Z"]).size, 0);
});
