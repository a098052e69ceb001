/**
 * Memory-deduplication settings from a TOML file (used by `ctxdedup memories dedupe --config`),
 * and opening a memory store from a spec string.
 *
 * ```toml
 * [memory]
 * store = "sqlite:./memories.db"   # or "chroma:http://127.0.0.1:8000", or "memory"
 * collection = "ctxdedup-memories" # ChromaDB collection
 * upper_threshold = 0.95
 * lower_threshold = 0.90
 * enabled = true
 * linkage = "single"               # or "complete"
 * merge_command = "my-llm-merge"   # optional: gets the merge prompt on stdin, prints the memory
 *
 * [memory.embedding]
 * kind = "hashed"                  # the built-in offline embedder
 * dim = 512
 * ```
 *
 * Every key is optional; unknown keys inside `[memory]` are errors, to catch typos.
 * @module
 */
import { parse } from 'smol-toml';
import { describe, expectKnownKeys, expectOptions, rangeError, show, typeError } from '../validation.js';
import type { MemoryStore } from './store.js';

/** Settings read from a memory config file, in API names. */
export interface MemoryConfig {
  store?: string;
  collection?: string;
  upperThreshold?: number;
  lowerThreshold?: number;
  enabled?: boolean;
  linkage?: 'single' | 'complete';
  mergeCommand?: string;
  embedding?: { kind: 'hashed'; dim?: number };
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function expect<T>(value: unknown, path: string, kind: 'string' | 'number' | 'boolean'): T {
  if (typeof value !== kind) typeError(path, `must be a ${kind}, got ${describe(value)}`);
  return value as T;
}

function threshold(value: unknown, path: string): number {
  const n = expect<number>(value, path, 'number');
  if (!(n >= 0 && n <= 1)) rangeError(path, `must be in [0, 1], got ${n}`);
  return n;
}

/**
 * Parses the `[memory]` table of TOML text. `source` (a file name, say) prefixes errors.
 * @throws TypeError / RangeError naming the key, e.g. `memory.lower_threshold must be in [0, 1]`.
 */
export function parseMemoryConfig(toml: string, source = 'config'): MemoryConfig {
  let doc: Record<string, unknown>;
  try {
    doc = parse(toml) as Record<string, unknown>;
  } catch (error) {
    return typeError(source, `is not valid TOML: ${(error as Error).message}`);
  }
  const memory = doc['memory'];
  if (memory === undefined) return {};
  if (!isTable(memory)) typeError(`${source}: memory`, `must be a table, got ${describe(memory)}`);
  const config: MemoryConfig = {};
  for (const [key, value] of Object.entries(memory)) {
    const path = `${source}: memory.${key}`;
    switch (key) {
      case 'store':
        config.store = expect<string>(value, path, 'string');
        break;
      case 'collection':
        config.collection = expect<string>(value, path, 'string');
        break;
      case 'upper_threshold':
        config.upperThreshold = threshold(value, path);
        break;
      case 'lower_threshold':
        config.lowerThreshold = threshold(value, path);
        break;
      case 'enabled':
        config.enabled = expect<boolean>(value, path, 'boolean');
        break;
      case 'linkage': {
        const linkage = expect<string>(value, path, 'string');
        if (linkage !== 'single' && linkage !== 'complete') rangeError(path, `must be "single" or "complete", got ${JSON.stringify(linkage)}`);
        config.linkage = linkage;
        break;
      }
      case 'merge_command':
        config.mergeCommand = expect<string>(value, path, 'string');
        break;
      case 'embedding': {
        if (!isTable(value)) typeError(path, `must be a table, got ${describe(value)}`);
        const kind = value['kind'] ?? 'hashed';
        if (kind !== 'hashed') rangeError(`${path}.kind`, `must be "hashed" (the built-in embedder), got ${show(kind)}`);
        const embedding: NonNullable<MemoryConfig['embedding']> = { kind };
        if (value['dim'] !== undefined) {
          const dim = expect<number>(value['dim'], `${path}.dim`, 'number');
          if (!Number.isInteger(dim) || dim < 1) rangeError(`${path}.dim`, `must be a positive integer, got ${dim}`);
          embedding.dim = dim;
        }
        for (const other of Object.keys(value)) {
          if (other !== 'kind' && other !== 'dim') rangeError(`${path}.${other}`, 'is not a known key');
        }
        config.embedding = embedding;
        break;
      }
      default:
        rangeError(path, 'is not a known key');
    }
  }
  if (config.lowerThreshold !== undefined && config.upperThreshold !== undefined && config.lowerThreshold > config.upperThreshold) {
    rangeError(`${source}: memory.lower_threshold`, `must not exceed upper_threshold (${config.upperThreshold})`);
  }
  return config;
}

/**
 * Opens a memory store from a spec: `sqlite:<path>` (embedded, the default kind), `memory`
 * (process-local), or `chroma:<url>` (a ChromaDB server; `collection` names the collection).
 * @throws TypeError for an unknown spec.
 */
export async function openMemoryStore(spec: string, options: { collection?: string } = {}): Promise<MemoryStore> {
  if (typeof spec !== 'string') typeError('store', `must be 'sqlite:<path>', 'chroma:<url>' or 'memory', got ${describe(spec)}`);
  expectOptions(options);
  expectKnownKeys(options, 'options', ['collection']);
  if (spec === 'memory') {
    const { InMemoryStore } = await import('./memory-store.js');
    return new InMemoryStore();
  }
  if (spec.startsWith('sqlite:')) {
    const path = spec.slice('sqlite:'.length);
    if (path === '') typeError('store', 'sqlite: needs a file path, e.g. sqlite:./memories.db');
    const { SqliteMemoryStore } = await import('./sqlite-store.js');
    return new SqliteMemoryStore(path);
  }
  if (spec.startsWith('chroma:')) {
    const url = spec.slice('chroma:'.length);
    const { ChromaMemoryStore } = await import('./chroma-store.js');
    return ChromaMemoryStore.connect({ url, ...(options.collection === undefined ? {} : { collection: options.collection }) });
  }
  return typeError('store', `must be 'sqlite:<path>', 'chroma:<url>' or 'memory', got ${JSON.stringify(spec)}`);
}
