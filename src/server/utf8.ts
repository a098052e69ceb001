/**
 * Strict UTF-8 decoding of request bodies. A body is decoded with a fatal decoder, never with
 * replacement characters (two different invalid byte sequences would otherwise both become U+FFFD
 * and share one identity). When decoding fails, the first invalid sequence is located and named by
 * its JSON path (`items[3].content`), so the error says which item to fix.
 * @module
 */

/** Fatal decoder; a leading BOM is kept (the JSON parser strips it, as before). */
const STRICT = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Decodes `bytes` as UTF-8, or returns `undefined` when they are not valid UTF-8 (overlong forms,
 * encoded surrogates, code points above U+10FFFF, stray or truncated sequences).
 */
export function decodeStrict(bytes: Uint8Array): string | undefined {
  try {
    return STRICT.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * Offset of the first byte of the first invalid UTF-8 sequence in `bytes[start, end)`, or -1 when
 * there is none. Follows the WHATWG decoder (the one {@link decodeStrict} uses), so both agree.
 */
export function firstInvalidUtf8(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let i = start;
  while (i < end) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lower = 0x80;
    let upper = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) need = 1;
    else if (lead >= 0xe0 && lead <= 0xef) {
      need = 2;
      if (lead === 0xe0) lower = 0xa0;
      else if (lead === 0xed) upper = 0x9f; // U+D800..U+DFFF (surrogates) are not scalar values
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      need = 3;
      if (lead === 0xf0) lower = 0x90;
      else if (lead === 0xf4) upper = 0x8f; // nothing above U+10FFFF
    } else return i;
    if (i + need >= end) return i; // truncated at the end
    for (let k = 1; k <= need; k++) {
      const byte = bytes[i + k]!;
      if (byte < lower || byte > upper) return i;
      lower = 0x80;
      upper = 0xbf;
    }
    i += need + 1;
  }
  return -1;
}

/** Where an offset falls in a JSON text: the path of the value (or of the object whose key) holds it. */
export interface JsonLocation {
  /** E.g. `items[3].content`, `messages[0]`, or `body` for the root. */
  path: string;
  /** The offset is inside a property name of the object at `path`. */
  inKey: boolean;
}

type Frame = { kind: 'array'; index: number } | { kind: 'object'; key: string | undefined; expectKey: boolean };

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

function keyText(bytes: Uint8Array, from: number, to: number): string {
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset + from, to - from).toString('utf8');
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

function formatPath(arrayRoot: string, stack: Frame[]): string {
  let path = '';
  for (let depth = 0; depth < stack.length; depth++) {
    const frame = stack[depth]!;
    // Each container names the slot being read: an index, or the key whose value is being read.
    if (frame.kind === 'array') {
      path += `${depth === 0 ? arrayRoot : ''}[${frame.index}]`;
    } else if (frame.key !== undefined && !frame.expectKey) {
      const key = frame.key;
      if (/^[A-Za-z_$][\w$]*$/.test(key)) path += depth === 0 ? key : `.${key}`;
      else path += `[${JSON.stringify(key)}]`;
    } else {
      break;
    }
  }
  return path === '' ? 'body' : path;
}

/**
 * Locates `offset` in the JSON text `bytes[start, end)` by a structural scan (strings, brackets,
 * commas), without parsing values. A root array is named `arrayRoot` (`items[2].content`); the keys of
 * a root object are named bare (`items[2]` for `{"items": [...]}`); the root itself is `body`.
 * Best effort on malformed JSON.
 */
export function jsonPathAt(bytes: Uint8Array, offset: number, arrayRoot: string, start = 0, end = bytes.length): JsonLocation {
  const stack: Frame[] = [];
  let i = start;
  while (i < end && i < offset) {
    const byte = bytes[i]!;
    if (isSpace(byte)) {
      i++;
      continue;
    }
    const top = stack[stack.length - 1];
    if (byte === 0x22) {
      // A string: find its closing quote (a backslash escapes the next byte).
      let j = i + 1;
      while (j < end && bytes[j] !== 0x22) j += bytes[j] === 0x5c ? 2 : 1;
      const inKey = top !== undefined && top.kind === 'object' && top.expectKey;
      if (offset <= j) {
        if (inKey) {
          // The path of the object itself: hide the key being read.
          return { path: formatPath(arrayRoot, stack.slice(0, -1).concat({ kind: 'object', key: undefined, expectKey: true })), inKey: true };
        }
        return { path: formatPath(arrayRoot, stack), inKey: false };
      }
      if (inKey) {
        top.key = keyText(bytes, i + 1, Math.min(j, end));
        top.expectKey = false;
      }
      i = j + 1;
      continue;
    }
    if (byte === 0x5b) stack.push({ kind: 'array', index: 0 });
    else if (byte === 0x7b) stack.push({ kind: 'object', key: undefined, expectKey: true });
    else if (byte === 0x5d || byte === 0x7d) stack.pop();
    else if (byte === 0x2c && top !== undefined) {
      if (top.kind === 'array') top.index++;
      else {
        top.key = undefined;
        top.expectKey = true;
      }
    }
    i++;
  }
  const top = stack[stack.length - 1];
  const inKey = top !== undefined && top.kind === 'object' && top.expectKey;
  return { path: formatPath(arrayRoot, stack), inKey };
}

/** The error message for invalid UTF-8 at `offset`: `items[3].content is not valid UTF-8 (byte 812)`. */
export function invalidUtf8Message(location: JsonLocation, where: string): string {
  return location.inKey ? `${location.path} has a property name that is not valid UTF-8 (${where})` : `${location.path} is not valid UTF-8 (${where})`;
}
