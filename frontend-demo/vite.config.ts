import { defineConfig } from "vite";

// The bundle ships inside the Python package (backend/pausemesh/demo/static/) and a test
// rebuilds it from this source and compares bytes, so the output must depend on nothing but
// the source and the lockfile: relative asset URLs, no source maps, no build-time values.
export default defineConfig({
  base: "./",
  build: {
    outDir: "../backend/pausemesh/demo/static",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2022",
    reportCompressedSize: false,
    modulePreload: { polyfill: false },
  },
  server: {
    proxy: { "/agui": "http://127.0.0.1:8787" },
  },
});
