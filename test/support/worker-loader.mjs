// Starts the CLI's TypeScript worker (src/cli/worker.ts) when the CLI runs from source in the
// tests: registers tsx (a devDependency) in this thread, then loads the entry. The CLI gets this
// module through `RunHooks.workerLoader` (see cli-helpers.ts); the built CLI uses
// dist/cli/worker.js and needs no loader.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
