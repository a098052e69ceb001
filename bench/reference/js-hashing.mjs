// Runs the ingestion server on the pure-JS hashing baseline (bench/reference/hashing.ts) without a
// product switch: `node --import tsx --import ./bench/reference/js-hashing.mjs src/server/main.ts ...`.
// Registers a resolve hook that hands the product's src/ingest/hash.ts importers this baseline.
import { register } from 'node:module';

register('./js-hashing-hooks.mjs', import.meta.url);
