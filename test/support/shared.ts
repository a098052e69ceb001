import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** ../shared beside the repository: conformance and golden data (read-only). */
export const SHARED = resolve(join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'shared'));

if (!existsSync(SHARED)) {
  throw new Error(`shared test data not found at ${SHARED} (it must sit beside the repository)`);
}
