// The durable runner is a module of this package, imported by its name (no copying): an app
// that installs examples/copilotkit imports "pausemesh-copilotkit-example/durable-runner".
import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentRunner } from "@copilotkit/runtime/v2";
import { PauseMeshRunner, connectInput } from "pausemesh-copilotkit-example/durable-runner";

test("the runner is importable by the package's name and is a CopilotKit AgentRunner", () => {
  const runner = new PauseMeshRunner({ connectUrl: "http://127.0.0.1:8787/agui/connect" });
  assert.ok(runner instanceof AgentRunner);
  assert.equal(connectInput("t-1").threadId, "t-1");
});
