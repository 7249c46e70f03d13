// After a `rollback` double text, the official @ag-ui/client 1.0.0 HttpAgent still holds the
// output of the run that was rolled back (it keeps every message it streamed) and sends it
// with its next input. Two tabs on one thread, each on its own replica:
//   1. tab A asks for a run that holds (the test agent waits on a gate that never opens);
//   2. tab B sends a correction with forwardedProps.pausemesh.doubleTexting = "rollback";
//   3. tab A's run ends stopped (CUSTOM pausemesh.run_interrupted), its partial answer kept
//      in A's messages; A then sends a new message, its whole history with it;
//   4. a fresh tab restores the thread through POST /agui/connect.
// Prints one JSON report line; exits non-zero if the client rejects a run.
// usage: node rollback.mjs <base-url-a> <base-url-b> <thread-id> <gate>
// Used by tests/e2e/test_agui_double_texting.py.
import {
  HttpAgent,
  enforceOutgoingInput,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";

const [baseA, baseB, threadId, gate] = process.argv.slice(2);

class ReloadingAgent extends HttpAgent {
  connect(input) {
    const url = `${baseB}/agui/connect`;
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(url, this.requestInit(enforceOutgoingInput(input)))),
      this.debugLogger,
    );
  }
}

const plain = (messages) => messages.map((m) => ({ id: m.id, role: m.role, content: m.content }));
const report = {};
try {
  const hold = { id: `user-hold-${threadId}`, role: "user", content: `hold ${gate}` };
  const tabA = new HttpAgent({ url: `${baseA}/agui`, threadId, initialMessages: [hold] });
  const heldEvents = [];
  let holding;
  const started = new Promise((resolve) => {
    holding = resolve;
  });
  const held = tabA.runAgent(
    { runId: `node-held-${threadId}` },
    {
      onEvent: ({ event }) => {
        heldEvents.push(event);
        if (event.type === "TEXT_MESSAGE_CONTENT") holding();
      },
    },
  );
  await started;

  const tabB = new HttpAgent({
    url: `${baseB}/agui`,
    threadId,
    initialMessages: [hold, { id: `user-redo-${threadId}`, role: "user", content: "start over" }],
  });
  await tabB.runAgent({
    runId: `node-redo-${threadId}`,
    forwardedProps: { pausemesh: { doubleTexting: "rollback" } },
  });
  await held;
  const marker = heldEvents.find((e) => e.type === "CUSTOM" && e.name === "pausemesh.run_interrupted");
  report.rolledBack = { value: marker ? marker.value : null, last: heldEvents.at(-1).type };
  report.tabAHeld = plain(tabA.messages);

  // Tab A goes on from what it holds: the rolled-back answer is still in its history.
  tabA.addMessage({ id: `user-later-${threadId}`, role: "user", content: "and then" });
  const sent = [];
  await tabA.runAgent({ runId: `node-later-${threadId}` }, {
    onRunInitialized: ({ input }) => {
      sent.push(...input.messages.map((m) => m.id));
    },
  });
  report.sentIds = sent;

  const reloaded = new ReloadingAgent({ url: `${baseB}/agui`, threadId });
  await reloaded.connectAgent({ runId: `node-reload-${threadId}` });
  report.reloaded = plain(reloaded.messages);
  report.ok = true;
  console.log(JSON.stringify(report));
} catch (error) {
  report.ok = false;
  report.error = String(error && error.message ? error.message : error);
  console.log(JSON.stringify(report));
  process.exitCode = 1;
}
