import { defineConfig } from 'vitest/config';

/**
 * Tests by kind: `unit` (in-process, no services), `golden` (conformance vectors and the CCE golden
 * cases in ../shared), `integration` (real Redis, ChromaDB, Chromium, the ONNX model, packed installs).
 * `npm test` runs the fast projects first and the integration project after them.
 */
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { extends: true, test: { name: 'golden', include: ['test/golden/**/*.test.ts'] } },
      { extends: true, test: { name: 'integration', include: ['test/integration/**/*.test.ts'] } },
    ],
  },
});
