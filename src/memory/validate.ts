/**
 * Validation and copying of memories at the API boundary.
 * @internal
 * @module
 */
import { describe, expectArray, expectObject, rangeError, show, typeError } from '../validation.js';
import type { Memory, StoredMemory } from './store.js';

/** The largest |timestamp| a JavaScript `Date` can hold (ms since the epoch): ±100,000,000 days. */
export const MAX_TIMESTAMP_MS = 8.64e15;

/** The problem text for an id or content that is not well-formed UTF-16. */
export const LONE_SURROGATE = 'contains a lone surrogate (it has no UTF-8 encoding, so a store cannot keep it exactly)';

/** A deep copy, so that callers and stores never share mutable state. */
export function copyMemory<M extends Memory>(memory: M): M {
  const copy = { ...memory };
  if (memory.metadata !== undefined) copy.metadata = structuredClone(memory.metadata);
  if ('embedding' in memory && memory.embedding instanceof Float32Array) {
    (copy as unknown as StoredMemory).embedding = memory.embedding.slice();
  }
  return copy;
}

/**
 * Checks one memory from the caller and returns a clean copy (unknown fields dropped). A hole in
 * the caller's array arrives here as `undefined` and is rejected like any other non-object.
 */
export function validateMemory(value: unknown, path: string): Memory {
  expectObject(value, path);
  const { id, content, timestamp, metadata } = value;
  if (typeof id !== 'string') typeError(`${path}.id`, `must be a string, got ${describe(id)}`);
  if (id === '') rangeError(`${path}.id`, 'must not be empty');
  if (typeof content !== 'string') typeError(`${path}.content`, `must be a string, got ${describe(content)}`);
  // A lone surrogate has no UTF-8 encoding: SQLite would give back U+FFFD, Chroma refuses it.
  if (!id.isWellFormed()) typeError(`${path}.id`, LONE_SURROGATE);
  if (!content.isWellFormed()) typeError(`${path}.content`, LONE_SURROGATE);
  const memory: Memory = { id, content };
  if (timestamp !== undefined) {
    if (typeof timestamp !== 'number') typeError(`${path}.timestamp`, `must be a number (ms since the epoch), got ${describe(timestamp)}`);
    if (!Number.isFinite(timestamp)) rangeError(`${path}.timestamp`, `must be finite, got ${timestamp}`);
    if (Math.abs(timestamp) > MAX_TIMESTAMP_MS) {
      rangeError(`${path}.timestamp`, `must be within ±8.64e15 ms of the epoch (a valid Date), got ${timestamp}`);
    }
    memory.timestamp = timestamp;
  }
  if (metadata !== undefined) memory.metadata = copyJsonObject(metadata, `${path}.metadata`);
  return memory;
}

/** Deepest nesting of metadata accepted (deeper values are refused, not a stack overflow). */
export const MAX_METADATA_DEPTH = 512;

/**
 * Checks that `value` is a plain JSON object of JSON values (plain objects, arrays without holes,
 * strings, finite numbers, booleans, null) and returns a deep copy. Anything `JSON.stringify`
 * would silently change is refused rather than coerced: non-finite numbers (which become `null`),
 * `undefined`, functions and symbols (dropped), values with a `toJSON` method (`Date` included:
 * replaced by what it returns), other class instances (`Map`, `Set`: emptied), BigInts, holes and
 * cycles. A `"__proto__"` key is kept as an own key, as `JSON.parse` does.
 * @throws TypeError naming the offending path (`memories[0].metadata.score must be a finite number, got NaN`).
 */
export function copyJsonObject(value: unknown, path: string): Record<string, unknown> {
  expectObject(value, path);
  return copyJson(value, path, new Set(), 0) as Record<string, unknown>;
}

function copyJson(value: unknown, path: string, ancestors: Set<object>, depth: number): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) typeError(path, `must be a finite number, got ${value}`);
      return value;
    case 'object':
      break;
    default:
      return typeError(path, `must be a JSON value, got ${value === undefined ? 'undefined' : `a ${typeof value}`}`);
  }
  if (value === null) return null;
  if (ancestors.has(value)) typeError(path, 'is a cycle (it contains itself)');
  if (depth >= MAX_METADATA_DEPTH) rangeError(path, `is nested more than ${MAX_METADATA_DEPTH} levels deep`);
  const isArray = Array.isArray(value);
  if (!isArray) {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
      typeError(
        path,
        `must be a plain object, array, string, finite number, boolean or null, got ${typeof name === 'string' && name !== '' ? `a ${name}` : 'an object with a prototype'}`,
      );
    }
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    typeError(path, 'has a toJSON method (JSON would store what it returns, not the object)');
  }
  ancestors.add(value);
  let copy: unknown;
  if (isArray) {
    const array = value as unknown[];
    const out = new Array<unknown>(array.length);
    for (let i = 0; i < array.length; i++) {
      if (!(i in array)) typeError(`${path}[${i}]`, 'must be a JSON value, got a hole');
      out[i] = copyJson(array[i], `${path}[${i}]`, ancestors, depth + 1);
    }
    copy = out;
  } else {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const item = copyJson((value as Record<string, unknown>)[key], `${path}${keyPath(key)}`, ancestors, depth + 1);
      Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
    }
    copy = out;
  }
  ancestors.delete(value);
  return copy;
}

/** `.key` for identifier-like keys, `["key"]` otherwise. */
function keyPath(key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/**
 * Asserts `vector` is a non-empty `Float32Array` of finite numbers (what the stores keep): a NaN
 * or infinite component would make every later similarity NaN.
 * @throws TypeError if it is not a `Float32Array`; RangeError naming the component (`memory.embedding[1] is NaN`).
 */
export function expectVector(vector: unknown, path: string): asserts vector is Float32Array {
  if (!(vector instanceof Float32Array)) typeError(path, 'must be a Float32Array');
  if (vector.length === 0) rangeError(path, 'is empty');
  for (let i = 0; i < vector.length; i++) {
    if (!Number.isFinite(vector[i]!)) rangeError(`${path}[${i}]`, `is ${show(vector[i])}`);
  }
}

/**
 * Asserts the `k` of `nearest(vector, k)` is a non-negative integer (0 asks for nothing).
 * @throws TypeError if it is not a number; RangeError otherwise.
 */
export function expectNearestK(k: unknown): asserts k is number {
  if (typeof k !== 'number') typeError('k', `must be a number, got ${describe(k)}`);
  if (!Number.isInteger(k) || k < 0) rangeError('k', `must be a non-negative integer, got ${show(k)}`);
}

/** Checks what an embedding function returned for `count` texts; returns one `Float32Array` each. */
export function validateEmbeddings(value: unknown, count: number, dim: number | undefined): Float32Array[] {
  const path = 'embed() result';
  expectArray(value, path);
  if (value.length !== count) rangeError(path, `has ${value.length} vectors for ${count} texts`);
  const vectors: Float32Array[] = [];
  for (let i = 0; i < value.length; i++) {
    const row: unknown = value[i];
    if (!Array.isArray(row) && !(row instanceof Float32Array) && !(row instanceof Float64Array)) {
      typeError(`${path}[${i}]`, `must be an array of numbers, got ${describe(row)}`);
    }
    const expected = dim ?? vectors[0]?.length;
    if (row.length === 0) rangeError(`${path}[${i}]`, 'is empty');
    if (expected !== undefined && row.length !== expected) {
      rangeError(`${path}[${i}]`, `has ${row.length} dimensions, expected ${expected}`);
    }
    const vector = Float32Array.from(row as ArrayLike<number>);
    for (let j = 0; j < row.length; j++) {
      const v: unknown = row[j];
      // Checked after the float32 conversion too: 1e39 is finite but overflows to Infinity.
      if (typeof v !== 'number' || !Number.isFinite(vector[j])) {
        typeError(`${path}[${i}][${j}]`, `must be a finite float32 number, got ${show(v)}`);
      }
    }
    vectors.push(vector);
  }
  return vectors;
}

/**
 * Checks every memory of a caller's array (index loop: holes are `undefined`, not skipped) and
 * returns clean copies.
 */
export function validateMemories(value: unknown, path: string): Memory[] {
  expectArray(value, path);
  const clean = new Array<Memory>(value.length);
  for (let i = 0; i < value.length; i++) clean[i] = validateMemory(value[i], `${path}[${i}]`);
  return clean;
}

/** Validates a threshold in [0, 1]. */
export function validateThreshold(value: unknown, path: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') typeError(path, `must be a number, got ${describe(value)}`);
  if (!(value >= 0 && value <= 1)) rangeError(path, `must be in [0, 1], got ${value}`);
  return value;
}
