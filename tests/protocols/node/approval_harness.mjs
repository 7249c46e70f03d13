// Drives the official @ag-ui/client 1.0.0 HttpAgent against a PauseMesh server whose agent asks
// for a tool approval (the pydantic-ai and LangGraph refund examples): ask -> the approval
// interrupt; reload (a fresh agent restored through POST /agui/connect) -> the same messages,
// state and pendingInterrupts; approve -> the tool runs and the run succeeds. Prints one JSON
// object on stdout; exits non-zero if the client rejects a run. Console warnings are reported.
//
// usage: node approval_harness.mjs <base-url> <thread-id> <user text>
import {
  HttpAgent,
  buildResumeArray,
  enforceOutgoingInput,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";

const [base, threadId, text] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    warnings.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
    original(...args);
  };
}

// HttpAgent 1.0.0 has no connect(); this one restores from the server's connect route.
class ReloadingAgent extends HttpAgent {
  connect(input) {
    const url = `${base}/agui/connect`;
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(url, this.requestInit(enforceOutgoingInput(input)))),
      this.debugLogger,
    );
  }
}

const types = (events) => events.map((e) => e.type);
function recorder() {
  const events = [];
  const errors = [];
  return {
    events,
    errors,
    subscriber: {
      onEvent: ({ event }) => {
        events.push(event);
      },
      onRunErrorEvent: ({ event }) => {
        errors.push(event);
      },
    },
  };
}

const report = { warnings };
try {
  const first = new HttpAgent({
    url: `${base}/agui`,
    threadId,
    initialMessages: [{ id: `user-${threadId}`, role: "user", content: text }],
  });
  const asked = recorder();
  await first.runAgent({ runId: "node-ask" }, asked.subscriber);
  report.ask = {
    types: types(asked.events),
    errors: asked.errors,
    pendingInterrupts: first.pendingInterrupts,
    messages: first.messages,
    state: first.state,
  };

  const reloaded = new ReloadingAgent({ url: `${base}/agui`, threadId });
  const restored = recorder();
  await reloaded.connectAgent({ runId: "node-reload" }, restored.subscriber);
  report.reload = {
    types: types(restored.events),
    errors: restored.errors,
    pendingInterrupts: reloaded.pendingInterrupts,
    messages: reloaded.messages,
    state: reloaded.state,
  };

  const pending = reloaded.pendingInterrupts;
  const responses = Object.fromEntries(
    pending.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
  );
  const answered = recorder();
  await reloaded.runAgent(
    { runId: "node-answer", resume: buildResumeArray(pending, responses) },
    answered.subscriber,
  );
  report.answer = {
    types: types(answered.events),
    errors: answered.errors,
    pendingInterrupts: reloaded.pendingInterrupts,
    messages: reloaded.messages,
    state: reloaded.state,
  };
  report.ok = true;
} catch (error) {
  report.ok = false;
  report.error = String(error && error.stack ? error.stack : error);
}
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(report.ok ? 0 : 1);
