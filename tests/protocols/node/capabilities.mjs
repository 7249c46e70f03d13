// AG-UI capability discovery as a client reads it: @ag-ui/client 1.0.0 declares
// AbstractAgent.getCapabilities() but HttpAgent defines no route for it, so this subclass
// fetches PauseMesh's GET {agent url}/capabilities and parses the body with @ag-ui/core's
// AgentCapabilitiesSchema (the zod form of the AgentCapabilities type).
// Usage: node capabilities.mjs BASE_URL. Prints one JSON report line.
// Used by tests/protocols/test_agui_node_client.py.
import { HttpAgent } from "@ag-ui/client";
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";

class PauseMeshAgent extends HttpAgent {
  async getCapabilities() {
    const response = await this.fetch(`${this.url.replace(/\/$/, "")}/capabilities`, {
      headers: { ...this.headers, accept: "application/json" },
    });
    if (!response.ok) throw new Error(`capabilities: HTTP ${response.status}`);
    return AgentCapabilitiesSchema.parse(await response.json());
  }
}

// Equal as JSON: zod strips unknown keys, so a difference means the server sent something unknown.
const same = (a, b) => JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

const base = process.argv[2];
try {
  const agent = new PauseMeshAgent({ url: `${base}/agui` });
  const capabilities = await agent.getCapabilities();
  const raw = await (await fetch(`${base}/agui/capabilities`)).json();
  console.log(JSON.stringify({ ok: true, capabilities, unchanged: same(capabilities, raw) }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: String(error && error.message ? error.message : error) }));
  process.exitCode = 1;
}
