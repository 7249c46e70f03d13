// The official @ag-ui/client HttpAgent sees a question expire without its own clock: it asks
// (a 1-second question), then follows the thread's live tail (GET /agui/threads/{id}/events)
// until the server's expiry run arrives, and ends with no pending interrupt. A fresh agent
// restored through POST /agui/connect has none either. Prints one JSON object on stdout.
//
// usage: node expiry.mjs <base-url> <thread-id>
import {
  HttpAgent,
  enforceOutgoingInput,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";
import { lastValueFrom, Observable } from "rxjs";

const [base, threadId] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    warnings.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
    original(...args);
  };
}

// tail() = the thread's live tail, from the server's expiry run to its RUN_FINISHED. The client
// refuses connectAgent() while interrupts are pending, so the events go through the agent's own
// apply pipeline (what runAgent/connectAgent use), which sets pendingInterrupts.
class TailingAgent extends HttpAgent {
  tail() {
    return new Observable((subscriber) => {
      const abort = new AbortController();
      (async () => {
        const response = await fetch(`${base}/agui/threads/${threadId}/events`, {
          headers: { Accept: "text/event-stream" },
          signal: abort.signal,
        });
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        let forwarding = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = frame
              .split("\n")
              .filter((line) => line.startsWith("data:"))
              .map((line) => line.slice(5).trimStart())
              .join("\n");
            if (!data) continue;
            const event = JSON.parse(data);
            if (event.type === "RUN_STARTED" && event.runId.startsWith("pausemesh-expiry-")) {
              forwarding = true;
            }
            if (!forwarding) continue;
            subscriber.next(event);
            if (event.type === "RUN_FINISHED") {
              subscriber.complete();
              abort.abort();
              return;
            }
          }
        }
      })().catch((error) => {
        if (error.name !== "AbortError") subscriber.error(error);
      });
      return () => abort.abort();
    });
  }
}

class ReloadingAgent extends HttpAgent {
  connect(input) {
    return transformHttpEventStream(
      runHttpRequest(() =>
        this.fetch(`${base}/agui/connect`, this.requestInit(enforceOutgoingInput(input))),
      ),
      this.debugLogger,
    );
  }
}

const report = { warnings };
try {
  const agent = new TailingAgent({
    url: `${base}/agui`,
    threadId,
    initialMessages: [{ id: `user-${threadId}`, role: "user", content: "Book me a flight to Lisbon" }],
  });
  await agent.runAgent({ runId: "node-ask", forwardedProps: { questionTtlSeconds: 1 } });
  report.askedPending = agent.pendingInterrupts.map((i) => i.id);
  const tailed = [];
  const input = agent.prepareRunAgentInput({ runId: "node-tail" });
  const subscribers = [{ onEvent: ({ event }) => { tailed.push(event); } }];
  await lastValueFrom(
    agent.processApplyEvents(input, agent.apply(input, agent.tail(), subscribers), subscribers),
    { defaultValue: undefined },
  );
  report.tailed = tailed;
  report.pendingAfterTail = agent.pendingInterrupts;

  const reloaded = new ReloadingAgent({ url: `${base}/agui`, threadId });
  await reloaded.connectAgent({ runId: "node-reload" });
  report.pendingAfterReload = reloaded.pendingInterrupts;
  report.ok = true;
} catch (error) {
  report.ok = false;
  report.error = String(error && error.stack ? error.stack : error);
}
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(report.ok ? 0 : 1);
