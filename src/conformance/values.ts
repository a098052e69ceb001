/**
 * Vector values: decoding the JSON encodings of FORMAT.md (`$number`, `$bytes`, `$repeat`,
 * `$concat`), rendering values unambiguously (lone surrogates and invisible characters escaped),
 * and listing where an actual result differs from the expected one.
 * @internal
 * @module
 */
import { typeError } from '../validation.js';

const SPECIAL_NUMBERS: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };

function defineOwn(record: Record<string, unknown>, key: string, value: unknown): void {
  // `__proto__` from JSON stays a plain key.
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

function decodeString(value: unknown, where: string): string {
  const decoded = decodeValue(value, where);
  if (typeof decoded !== 'string') typeError(where, 'must decode to a string');
  return decoded;
}

/**
 * Decodes a vector value: arrays and objects recursively; an object whose keys start with `$` is
 * one of the encodings of FORMAT.md. @internal
 */
export function decodeValue(value: unknown, where: string): unknown {
  if (Array.isArray(value)) return value.map((v, i) => decodeValue(v, `${where}[${i}]`));
  if (typeof value !== 'object' || value === null) return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.some((k) => k.startsWith('$'))) {
    if (keys.length === 1 && keys[0] === '$number') {
      const n = SPECIAL_NUMBERS[String(record['$number'])];
      if (n === undefined) typeError(`${where}.$number`, 'must be "NaN", "Infinity", "-Infinity" or "-0"');
      return n;
    }
    if (keys.length === 1 && keys[0] === '$bytes') {
      const hex = record['$bytes'];
      if (typeof hex !== 'string' || !/^(?:[0-9a-f]{2})*$/.test(hex)) typeError(`${where}.$bytes`, 'must be lowercase hex digits, two per byte');
      return Uint8Array.from(Buffer.from(hex, 'hex'));
    }
    if (keys.length === 2 && keys.includes('$repeat') && keys.includes('times')) {
      const times = record['times'];
      if (typeof times !== 'number' || !Number.isSafeInteger(times) || times < 0) typeError(`${where}.times`, 'must be a non-negative integer');
      return decodeString(record['$repeat'], `${where}.$repeat`).repeat(times);
    }
    if (keys.length === 1 && keys[0] === '$concat') {
      const parts = record['$concat'];
      if (!Array.isArray(parts)) typeError(`${where}.$concat`, 'must be an array');
      return parts.map((p, i) => decodeString(p, `${where}.$concat[${i}]`)).join('');
    }
    return typeError(where, `is an unknown encoding (keys ${keys.join(', ')})`);
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) defineOwn(out, key, decodeValue(record[key], `${where}.${key}`));
  return out;
}

const MAX_RENDER = 160;

function escapeUnit(c: number, ch: string): string {
  if (c === 0x22) return '\\"';
  if (c === 0x5c) return '\\\\';
  if (c === 0x0a) return '\\n';
  if (c === 0x0d) return '\\r';
  if (c === 0x09) return '\\t';
  if (c < 0x20 || c > 0x7e) return `\\u${c.toString(16).padStart(4, '0')}`;
  return ch;
}

/** Runs of this many equal code units or more are shown as `"c"×250`. */
const RUN = 8;

/**
 * A string quoted, every code unit outside printable ASCII escaped; long runs of one code unit
 * are shown as `"c"×250`, joined to the rest with `+`.
 */
function renderString(s: string): string {
  const parts: string[] = [];
  let literal = '';
  let i = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    let j = i + 1;
    while (j < s.length && s.charCodeAt(j) === c) j++;
    if (j - i >= RUN) {
      if (literal !== '') parts.push(`"${literal}"`);
      literal = '';
      parts.push(`"${escapeUnit(c, s[i] as string)}"×${j - i}`);
    } else {
      for (let k = i; k < j; k++) literal += escapeUnit(c, s[k] as string);
    }
    i = j;
  }
  if (literal !== '' || parts.length === 0) parts.push(`"${literal}"`);
  return parts.join(' + ');
}

function renderFull(value: unknown, depth: number): string {
  if (typeof value === 'string') return renderString(value);
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === undefined || value === null || typeof value === 'boolean') return String(value);
  if (typeof value === 'function') return '[function]';
  if (typeof value === 'symbol') return value.toString();
  if (value instanceof Uint8Array) return `<bytes ${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}>`;
  if (depth > 6) return '…';
  if (Array.isArray(value)) return `[${value.map((v) => renderFull(v, depth + 1)).join(', ')}]`;
  const entries = Object.keys(value as object).map(
    (k) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : renderString(k)}: ${renderFull((value as Record<string, unknown>)[k], depth + 1)}`,
  );
  return `{${entries.join(', ')}}`;
}

/**
 * A value as a failure diff shows it: strings quoted with every character outside printable
 * ASCII escaped (`"a\ud800"`, `"\ufeffx"`), `-0` as `-0`, bytes as hex; long renderings cut.
 */
export function renderValue(value: unknown): string {
  const text = renderFull(value, 0);
  return text.length > MAX_RENDER ? `${text.slice(0, MAX_RENDER - 1)}…` : text;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
}

/**
 * Where `actual` differs from `expected`, one line per path. With `partial`, only the keys of
 * `expected` are compared at this level (a vector asserts the parts of a result it names). @internal
 */
export function diffValues(expected: unknown, actual: unknown, path: string, partial = false): string[] {
  const at = path === '' ? 'result' : path;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${at}: expected ${renderValue(expected)}, got ${renderValue(actual)}`];
    const lines: string[] = [];
    if (expected.length !== actual.length) {
      const entries = (n: number): string => `${n} ${n === 1 ? 'entry' : 'entries'}`;
      lines.push(`${at}: expected ${entries(expected.length)}, got ${actual.length}: expected ${renderValue(expected)}, got ${renderValue(actual)}`);
      return lines;
    }
    for (let i = 0; i < expected.length; i++) lines.push(...diffValues(expected[i], actual[i], `${path}[${i}]`));
    return lines;
  }
  if (expected instanceof Uint8Array) {
    return actual instanceof Uint8Array && bytesEqual(expected, actual) ? [] : [`${at}: expected ${renderValue(expected)}, got ${renderValue(actual)}`];
  }
  if (isPlainObject(expected)) {
    if (!isPlainObject(actual)) return [`${at}: expected ${renderValue(expected)}, got ${renderValue(actual)}`];
    const lines: string[] = [];
    for (const key of Object.keys(expected)) {
      if (!Object.hasOwn(actual, key) || actual[key] === undefined) {
        if (expected[key] !== undefined) lines.push(`${join(path, key)}: missing, expected ${renderValue(expected[key])}`);
        continue;
      }
      lines.push(...diffValues(expected[key], actual[key], join(path, key)));
    }
    if (!partial) {
      for (const key of Object.keys(actual)) {
        if (!Object.hasOwn(expected, key) && actual[key] !== undefined) lines.push(`${join(path, key)}: unexpected ${renderValue(actual[key])}`);
      }
    }
    return lines;
  }
  if (typeof expected === 'string' && typeof actual === 'string' && expected !== actual) {
    let i = 0;
    while (i < expected.length && i < actual.length && expected.charCodeAt(i) === actual.charCodeAt(i)) i++;
    const where = expected.length > 20 || actual.length > 20 ? ` (first difference at code unit ${i})` : '';
    return [`${at}: expected ${renderValue(expected)}, got ${renderValue(actual)}${where}`];
  }
  return Object.is(expected, actual) ? [] : [`${at}: expected ${renderValue(expected)}, got ${renderValue(actual)}`];
}
