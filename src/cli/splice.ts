/**
 * Rewrites strings inside JSON text without re-serializing it: the string tokens at given paths
 * are located in the raw UTF-8 bytes and replaced, every other byte is copied as it was.
 *
 * This is what makes output "the input with only the deduplicated contents replaced": spacing,
 * key order, escapes, a BOM or invalid UTF-8 elsewhere in the line all survive, and sessions
 * without edits are never decoded twice or encoded again (serializing dominated the CLI's profile).
 *
 * The text must be valid JSON (the caller has parsed it): the scanner only tracks structure.
 * JSON's structural characters are ASCII and UTF-8 never uses ASCII bytes inside a multi-byte
 * sequence, so scanning bytes is exact. Duplicate keys resolve like `JSON.parse`: the last wins.
 * @module
 */
import { native } from '../native.js';
import type { PathStep } from './formats.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** A located string token: byte offsets of its opening quote and just past its closing quote. */
export interface Span {
  start: number;
  end: number;
}

/** Thrown when a path does not lead to a string token (a bug in the caller: paths come from the parsed value). */
export class SpliceError extends Error {
  override readonly name = 'SpliceError';
}

interface Node {
  children: Map<PathStep, Node>;
  /** Index of the path ending here, or -1. */
  leaf: number;
  /** Indexes of every path ending at or below this node (cleared when a duplicate key re-enters it). */
  leaves: number[];
  /** UTF-8 byte lengths of the string children's keys: most keys are rejected without decoding. */
  keyLengths: Set<number>;
}

function node(): Node {
  return { children: new Map(), leaf: -1, leaves: [], keyLengths: new Set() };
}

function trieOf(paths: readonly (readonly PathStep[])[]): Node {
  const root = node();
  paths.forEach((path, index) => {
    let at = root;
    at.leaves.push(index);
    for (const step of path) {
      let next = at.children.get(step);
      if (next === undefined) {
        next = node();
        at.children.set(step, next);
        if (typeof step === 'string') at.keyLengths.add(Buffer.byteLength(step));
      }
      at = next;
      at.leaves.push(index);
    }
    at.leaf = index;
  });
  return root;
}

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(b: Uint8Array, i: number): number {
  while (isSpace(b[i])) i++;
  return i;
}

/** `i` is at an opening quote; returns the offset just past the closing quote. */
function skipString(b: Buffer, i: number): number {
  let j = i + 1;
  // Keys, ids and roles are short: a byte loop beats a native indexOf call for them.
  const stop = Math.min(j + 32, b.length);
  while (j < stop) {
    const c = b[j] as number;
    if (c === QUOTE) return j + 1;
    j += c === BACKSLASH ? 2 : 1;
  }
  for (;;) {
    const q = b.indexOf(QUOTE, j);
    if (q === -1) throw new SpliceError('unterminated string');
    // The quote is escaped if an odd number of backslashes precede it.
    let k = q - 1;
    while (b[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    j = q + 1;
  }
}

/** Skips one value starting at `i` (no leading space); returns the offset just past it. */
function skipValue(b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return skipString(b, i);
  if (c === LBRACE || c === LBRACKET) {
    let depth = 0;
    let j = i;
    const n = b.length;
    while (j < n) {
      const d = b[j] as number;
      if (d === QUOTE) {
        j = skipString(b, j);
        continue;
      }
      if (d === LBRACE || d === LBRACKET) depth++;
      else if (d === RBRACE || d === RBRACKET) {
        if (--depth === 0) return j + 1;
      }
      j++;
    }
    throw new SpliceError('unterminated container');
  }
  // A number or a literal.
  let j = i;
  for (let d = b[j]; d !== undefined && d !== COMMA && d !== RBRACE && d !== RBRACKET && !isSpace(d); d = b[++j]);
  return j;
}

function hasBackslash(b: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (b[i] === BACKSLASH) return true;
  return false;
}

function clear(n: Node, spans: (Span | undefined)[]): void {
  for (const leaf of n.leaves) spans[leaf] = undefined;
}

/** Walks the value at `i` (no leading space) along the trie; returns the offset just past it. */
function walk(b: Buffer, i: number, at: Node, spans: (Span | undefined)[]): number {
  const c = b[i];
  if (at.leaf !== -1) {
    const end = skipValue(b, i);
    if (c === QUOTE) spans[at.leaf] = { start: i, end };
    return end;
  }
  if (c === LBRACE) {
    let j = skipSpace(b, i + 1);
    if (b[j] === RBRACE) return j + 1;
    for (;;) {
      const keyStart = j;
      const keyEnd = skipString(b, j);
      j = skipSpace(b, keyEnd);
      if (b[j] !== COLON) throw new SpliceError('expected a colon');
      j = skipSpace(b, j + 1);
      let child: Node | undefined;
      const escaped = hasBackslash(b, keyStart + 1, keyEnd - 1);
      if (escaped || at.keyLengths.has(keyEnd - keyStart - 2)) {
        const key = escaped ? (JSON.parse(b.toString('utf8', keyStart, keyEnd)) as string) : b.toString('utf8', keyStart + 1, keyEnd - 1);
        child = at.children.get(key);
      }
      if (child === undefined) j = skipValue(b, j);
      else {
        clear(child, spans);
        j = walk(b, j, child, spans);
      }
      j = skipSpace(b, j);
      if (b[j] === COMMA) j = skipSpace(b, j + 1);
      else if (b[j] === RBRACE) return j + 1;
      else throw new SpliceError('expected , or }');
    }
  }
  if (c === LBRACKET) {
    let j = skipSpace(b, i + 1);
    if (b[j] === RBRACKET) return j + 1;
    for (let index = 0; ; index++) {
      const child = at.children.get(index);
      j = child === undefined ? skipValue(b, j) : walk(b, j, child, spans);
      j = skipSpace(b, j);
      if (b[j] === COMMA) j = skipSpace(b, j + 1);
      else if (b[j] === RBRACKET) return j + 1;
      else throw new SpliceError('expected , or ]');
    }
  }
  return skipValue(b, i);
}

/**
 * Finds the string tokens at `paths` in the JSON text `b[start, end)` (a leading BOM and
 * whitespace are skipped). Entry i is the span of path i, or `undefined` when the value there
 * is not a string or does not exist.
 */
export function locateStrings(b: Buffer, start: number, end: number, paths: readonly (readonly PathStep[])[]): (Span | undefined)[] {
  const spans: (Span | undefined)[] = new Array<Span | undefined>(paths.length).fill(undefined);
  if (paths.length === 0) return spans;
  let i = start;
  if (b[i] === 0xef && b[i + 1] === 0xbb && b[i + 2] === 0xbf) i += 3;
  i = skipSpace(b, i);
  // Bound the scan to the text: a view ending at `end` keeps a malformed caller from reading on.
  const view = end === b.length ? b : b.subarray(0, end);
  walk(view, i, trieOf(paths), spans);
  return spans;
}

/**
 * Output of a job as replacements of input byte ranges, in increasing order: the output is the
 * input with each range swapped for its bytes. Nothing is copied while a job runs, and the
 * input buffer itself carries the output back (no fresh output buffer per job).
 */
export interface Patches {
  /** `[start, end]` input offsets per patch, increasing and disjoint. */
  ranges: Float64Array;
  /** The replacement bytes of all patches, back to back. */
  bytes: Uint8Array;
  /** Replacement length per patch. */
  lengths: Uint32Array;
}

/** Collects patches in input order. */
export class PatchBuilder {
  private readonly ranges: number[] = [];
  private readonly pieces: Uint8Array[] = [];
  private total = 0;
  private last = 0;

  /** Replaces input bytes `[start, end)` by `bytes` (calls must come in increasing order). */
  replace(start: number, end: number, bytes: Uint8Array): void {
    if (start < this.last) throw new SpliceError('patches out of order');
    this.ranges.push(start, end);
    this.pieces.push(bytes);
    this.total += bytes.length;
    this.last = end;
  }

  /** The patches, in buffers of their own (so they can be transferred to another thread). */
  finish(): Patches {
    const bytes = new Uint8Array(this.total);
    const lengths = new Uint32Array(this.pieces.length);
    let at = 0;
    this.pieces.forEach((piece, i) => {
      bytes.set(piece, at);
      at += piece.length;
      lengths[i] = piece.length;
    });
    return { ranges: Float64Array.from(this.ranges), bytes, lengths };
  }
}

/**
 * From this many UTF-16 units a string is JSON-encoded natively: one pass from UTF-16 to escaped
 * UTF-8, where `JSON.stringify` then `Buffer.from` take two (and were a fifth of a `--blocks`
 * worker's time); below it the call costs more than it saves.
 */
const NATIVE_QUOTE_UNITS = 1024;

/** The UTF-8 bytes of `JSON.stringify(value)`. */
export function jsonStringBytes(value: string): Uint8Array {
  return value.length >= NATIVE_QUOTE_UNITS ? native.jsonStringUtf8(value) : Buffer.from(JSON.stringify(value));
}

/** One replacement inside a JSON text: the string at `path` becomes `value`. */
export interface StringEdit {
  path: readonly PathStep[];
  value: string;
  /** The exact JSON string literal to write (quotes included) instead of encoding `value`. */
  raw?: string;
}

/**
 * The JSON string literals (quotes and escapes as written) at `paths` of the JSON text
 * `b[start, end)` that `JSON.stringify` might write otherwise, `undefined` for the others: a
 * literal of valid UTF-8 without `\u` or `\/` escapes is exactly `JSON.stringify` of its value
 * (its other escapes are the short forms `JSON.stringify` uses for the characters that must be
 * escaped, and every other character is written raw by both).
 */
export function unusualLiteralsAt(b: Buffer, start: number, end: number, paths: readonly (readonly PathStep[])[]): (string | undefined)[] {
  return locateStrings(b, start, end, paths).map((span, k) => {
    if (span === undefined) throw new SpliceError(`no string at ${paths[k]?.join('.')}`);
    const bytes = b.subarray(span.start, span.end);
    return bytes.includes('\\u') || bytes.includes('\\/') ? bytes.toString('utf8') : undefined;
  });
}

/**
 * Replaces the strings at `edits` in the JSON text `b[start, end)` (JSON-encoded as
 * `JSON.stringify` does) and returns the input spans of the string tokens at `locate` (which
 * must not be edited), as `[start, end]` pairs.
 * @throws SpliceError if a path does not lead to a string (a caller bug: paths come from the parsed text).
 */
export function spliceStrings(
  b: Buffer,
  start: number,
  end: number,
  edits: readonly StringEdit[],
  locate: readonly (readonly PathStep[])[],
  out: PatchBuilder,
): number[] {
  const paths = edits.length === 0 ? locate : locate.length === 0 ? edits.map((e) => e.path) : [...edits.map((e) => e.path), ...locate];
  const spans = locateStrings(b, start, end, paths);
  const located: number[] = new Array<number>(locate.length * 2).fill(-1);
  const order: number[] = [];
  for (let k = 0; k < spans.length; k++) {
    const span = spans[k];
    if (span === undefined) throw new SpliceError(`no string at ${paths[k]?.join('.')}`);
    if (k < edits.length) order.push(k);
    else {
      located[2 * (k - edits.length)] = span.start;
      located[2 * (k - edits.length) + 1] = span.end;
    }
  }
  order.sort((x, y) => (spans[x] as Span).start - (spans[y] as Span).start);
  for (const k of order) {
    const span = spans[k] as Span;
    const edit = edits[k] as StringEdit;
    out.replace(span.start, span.end, edit.raw === undefined ? jsonStringBytes(edit.value) : Buffer.from(edit.raw, 'utf8'));
  }
  return located;
}
