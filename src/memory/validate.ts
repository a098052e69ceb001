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
  if (metadata !== undefined) {
    expectObject(metadata, `${path}.metadata`);
    try {
      memory.metadata = JSON.parse(JSON.stringify(metadata)) as Record<string, unknown>;
    } catch (error) {
      typeError(`${path}.metadata`, `must be JSON-serializable (${(error as Error).message})`);
    }
  }
  return memory;
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
