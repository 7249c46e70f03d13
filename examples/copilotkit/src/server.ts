/**
 * The CopilotKit runtime with PauseMesh as its agent, and the built React page, in one process.
 *
 *   PAUSEMESH_URL  PauseMesh's base URL (default http://127.0.0.1:8787)
 *   HOST, PORT     where this server listens (default 127.0.0.1:4000)
 *
 * `/api/copilotkit/*` is CopilotKit's runtime (`/info`, `/agent/default/run`, `.../connect`);
 * everything else is the page from `dist/page/`.
 */

import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

import { PauseMeshRunner } from "./durable-runner.js";

const pausemesh = (process.env.PAUSEMESH_URL ?? "http://127.0.0.1:8787").replace(/\/+$/, "");
const host = process.env.HOST ?? "127.0.0.1";
const port = Number(process.env.PORT ?? "4000");
const webRoot = resolve(fileURLToPath(new URL("../page", import.meta.url)));
const basePath = "/api/copilotkit";

const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url: `${pausemesh}/agui` }) },
  runner: new PauseMeshRunner({ connectUrl: `${pausemesh}/agui/connect` }),
});
const copilotkit = createCopilotNodeListener({ runtime, basePath, activateChannels: false });

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".woff2": "font/woff2",
};

async function page(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const path = new URL(request.url ?? "/", "http://localhost").pathname;
  // The page is one document: any path that is not an asset gets index.html (thread in ?thread=).
  const wanted = path.startsWith("/assets/") ? normalize(path) : "/index.html";
  const file = join(webRoot, wanted);
  if (!file.startsWith(webRoot)) {
    response.writeHead(404).end();
    return;
  }
  try {
    const body = await readFile(file);
    response.writeHead(200, {
      "content-type": TYPES[extname(file)] ?? "application/octet-stream",
      "cache-control": "no-cache",
    });
    response.end(body);
  } catch {
    response.writeHead(404, { "content-type": "text/plain" }).end("not found");
  }
}

const server = createServer((request, response) => {
  const path = new URL(request.url ?? "/", "http://localhost").pathname;
  if (path === "/healthz") {
    response.writeHead(200, { "content-type": "text/plain" }).end("ok");
  } else if (path === basePath || path.startsWith(`${basePath}/`)) {
    void copilotkit(request, response);
  } else {
    void page(request, response);
  }
});

server.listen(port, host, () => {
  console.log(`CopilotKit on PauseMesh: http://${host}:${port}/ (PauseMesh at ${pausemesh})`);
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}
