/**
 * Identity primitives: SHA-256 checksums and byte-exact grouping.
 *
 * "Byte-exact" means equal JavaScript strings (the same UTF-16 code units): `'a\uD800'`,
 * `'a\uDC00'` and `'a\uFFFD'` are three distinct contents.
 * @module
 */
import { describe, typeError } from './validation.js';
import { native } from './native.js';

/**
 * Lowercase hex SHA-256 of a well-formed string's UTF-8 bytes, or of the given bytes.
 *
 * @throws TypeError if `content` is a string with a lone surrogate: it has no UTF-8 encoding,
 *   and a checksum must never silently merge distinct strings.
 * @example sha256('abc') // 'ba7816bf...15ad'
 */
export function sha256(content: string | Uint8Array): string {
  if (typeof content === 'string') {
    if (!content.isWellFormed()) {
      typeError('content', 'contains a lone surrogate and has no UTF-8 encoding to checksum');
    }
    return native.sha256String(content);
  }
  if (content instanceof Uint8Array) return native.sha256Bytes(content);
  return typeError('content', `must be a string or a Uint8Array, got ${describe(content)}`);
}

/**
 * Groups strings by byte-exact equality in one native call.
 *
 * @returns for each input, the index of the first input equal to it (itself when it is first).
 * @throws TypeError if `contents` is not an array of strings.
 */
export function groupExact(contents: readonly string[]): Uint32Array {
  if (!Array.isArray(contents)) typeError('contents', `must be an array, got ${describe(contents)}`);
  for (let i = 0; i < contents.length; i++) {
    const c: unknown = contents[i];
    if (typeof c !== 'string') typeError(`contents[${i}]`, `must be a string, got ${describe(c)}`);
  }
  return native.groupExact(contents as string[]);
}
