import { defineConfig } from "vite";

// The page is built into dist/page/ and served by dist/src/server.js next to the runtime.
export default defineConfig({
  root: "web",
  base: "/",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "../dist/page",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2022",
    reportCompressedSize: false,
    // CopilotKit's chat bundles its markdown and code renderers: large chunks are expected.
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      onwarn(warning, warn) {
        // Radix UI (inside CopilotKit) marks modules "use client"; that means nothing here.
        if (warning.code === "MODULE_LEVEL_DIRECTIVE") return;
        warn(warning);
      },
    },
  },
});
