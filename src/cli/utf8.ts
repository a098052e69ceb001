/**
 * UTF-8 decoding of input lines, as `Buffer#toString('utf8')` does it, faster on large non-ASCII
 * text.
 *
 * V8's UTF-8 decoder validates and decodes in two passes of its own and runs at about 300 MB/s on
 * mostly non-ASCII text (the real transcripts in ../shared/corpus are largely Japanese: decoding
 * was the largest single cost of `ctxdedup dedupe`). For valid UTF-8 the result is fixed by the
 * encoding, so any correct converter gives the same string: a range of at least
 * {@link TRANSCODE_MIN_BYTES} that `isUtf8` accepts is converted by ICU (`buffer.transcode`, 1–2
 * GB/s) to UTF-16 and taken as a string. ASCII is copied byte for byte. Anything else, including
 * invalid UTF-8 (where the replacement-character rules matter), goes to `toString('utf8')`.
 * @module
 */
import { constants, isAscii, isUtf8, transcode } from 'node:buffer';

/** Below this many bytes the converter's fixed cost outweighs V8's slower decoding. */
export const TRANSCODE_MIN_BYTES = 2048;

/** Whether `buffer.transcode` works here (Node built without ICU has no converter). */
const canTranscode = ((): boolean => {
  try {
    return transcode(Buffer.from('é', 'utf8'), 'utf8', 'utf16le').toString('utf16le') === 'é';
  } catch {
    return false;
  }
})();

/** `b.toString('utf8', start, end)`, the same string. */
export function decodeUtf8(b: Buffer, start = 0, end = b.length): string {
  // Past the longest string V8 makes, `toString` throws at once; converting first would not.
  if (end - start < TRANSCODE_MIN_BYTES || end - start > constants.MAX_STRING_LENGTH || !canTranscode) return b.toString('utf8', start, end);
  const range = b.subarray(start, end);
  if (isAscii(range)) return b.toString('latin1', start, end);
  if (!isUtf8(range)) return b.toString('utf8', start, end);
  return transcode(range, 'utf8', 'utf16le').toString('utf16le');
}

/** A decoded input range, or why it cannot be one string without changing its bytes. */
export type Decoded = { text: string } | { problem: string };

/** Why an input is refused: decoding would replace its invalid bytes by U+FFFD. */
export const NOT_UTF8 = 'not valid UTF-8 (decoding would replace bytes, and the output would not give them back)';

/**
 * {@link decodeUtf8} for inputs that are deduplicated: a range that is not valid UTF-8, or longer
 * than the longest string V8 holds, is a problem to report, not a string (decoding invalid bytes
 * would turn different inputs into equal strings, and their output would not restore).
 */
export function decodeInput(b: Buffer, start = 0, end = b.length): Decoded {
  const range = b.subarray(start, end);
  // Validated once here; the branches below are decodeUtf8's for valid input.
  const ascii = isAscii(range);
  if (!ascii && !isUtf8(range)) return { problem: NOT_UTF8 };
  try {
    if (ascii) return { text: b.toString('latin1', start, end) };
    if (end - start < TRANSCODE_MIN_BYTES || end - start > constants.MAX_STRING_LENGTH || !canTranscode) return { text: b.toString('utf8', start, end) };
    return { text: transcode(range, 'utf8', 'utf16le').toString('utf16le') };
  } catch (error) {
    if (error instanceof Error && (error as { code?: unknown }).code === 'ERR_STRING_TOO_LONG') {
      return { problem: `longer than the longest string this runtime holds (${constants.MAX_STRING_LENGTH} characters)` };
    }
    throw error;
  }
}
