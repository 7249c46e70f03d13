import { defineConfig } from "vite";

// The page is built into dist/web/ and served by dist/src/server.js next to the runtime.
export default defineConfig({
  root: "web",
  base: "/",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "../dist/web",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2022",
    reportCompressedSize: false,
  },
});
