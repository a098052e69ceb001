// Starts the TypeScript worker (worker.ts) when the CLI runs from source (tests, benchmarks via
// tsx): registers tsx in this thread, then loads the entry. The built CLI uses dist/cli/worker.js.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
