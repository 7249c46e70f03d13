import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { SseParser, type TailStatus, type ThreadEvent, ThreadTail } from "../src/sse.js";

test("parser keeps the id and joins data lines of one frame", () => {
  const parser = new SseParser();
  const frames = parser.feed('id: 7\ndata: {"type":\ndata: "RUN_STARTED"}\n\n');
  assert.deepEqual(frames, [{ id: "7", event: undefined, data: '{"type":\n"RUN_STARTED"}' }]);
});

test("parser assembles frames split across chunks, including a CRLF split in half", () => {
  const parser = new SseParser();
  const out = [
    ...parser.feed("id: 1\r"),
    ...parser.feed("\ndata: a\r\n"),
    ...parser.feed("\r\nid: 2\ndata: b\n"),
    ...parser.feed("\n"),
  ];
  assert.deepEqual(
    out.map((f) => [f.id, f.data]),
    [
      ["1", "a"],
      ["2", "b"],
    ],
  );
});

test("parser ignores keep-alive comments", () => {
  const parser = new SseParser();
  assert.deepEqual(parser.feed(": keep-alive\n\n: ping\n\n"), []);
  assert.equal(parser.feed("data: x\n\n").length, 1);
});

interface Seen {
  lastEventIds: (string | undefined)[];
}

/** A real HTTP server playing the thread-events route: it drops the first connection. */
async function startServer(seen: Seen): Promise<{ url: string; close: () => Promise<void> }> {
  let connections = 0;
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    connections += 1;
    const header = request.headers["last-event-id"];
    seen.lastEventIds.push(Array.isArray(header) ? header[0] : header);
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const after = Number(header ?? "0");
    const event = (n: number): string =>
      `id: ${n}\ndata: ${JSON.stringify({ type: "CUSTOM", name: "n", value: n })}\n\n`;
    if (connections === 1) {
      // Replays 1..3, then the connection dies as if the server were killed.
      response.write(`: keep-alive\n\n${event(after + 1)}${event(after + 2)}`);
      response.end(event(after + 3));
      return;
    }
    // The reconnect replays from its Last-Event-ID, overlapping one already-seen event.
    response.write(event(after) + event(after + 1) + event(after + 2));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/agui/threads/t/events`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

test("tail reconnects with Last-Event-ID and delivers every sequence exactly once", async () => {
  const seen: Seen = { lastEventIds: [] };
  const server = await startServer(seen);
  const events: ThreadEvent[] = [];
  const statuses: TailStatus[] = [];
  let tail: ThreadTail | undefined;
  const done = new Promise<void>((resolve) => {
    tail = new ThreadTail({
      url: server.url,
      after: 10,
      backoff: [1],
      onEvent: (event) => {
        events.push(event);
        if (events.length === 5) resolve();
      },
      onStatus: (status) => statuses.push(status),
    });
    tail.start();
  });
  await done;
  tail?.stop();
  await server.close();
  assert.deepEqual(
    events.map((e) => e.sequence),
    [11, 12, 13, 14, 15],
  );
  assert.deepEqual(seen.lastEventIds, ["10", "13"]);
  assert.deepEqual(statuses.slice(0, 3), ["live", "reconnecting", "live"]);
});
