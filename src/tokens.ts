/**
 * Token counting for the stage reports.
 *
 * The built-in encodings (`o200k_base`, `cl100k_base`) are counted natively (ctxdedup-core, on the
 * `bpe-openai` vocabularies), in time linear in the text length, with exactly the counts of the
 * `gpt-tokenizer` package (its JavaScript pre-tokenization included). Any function from text to a
 * token count can be plugged in instead.
 * @module
 */
import { describe, expectArray, rangeError, show, typeError } from './validation.js';
import { native, type NativeTokenEncoding } from './native.js';

/** Counts the tokens of a text. Must return a non-negative integer. */
export type TokenCounter = (text: string) => number;

/** The built-in BPE encodings: `o200k_base` (GPT-4o and later), `cl100k_base` (GPT-4, GPT-3.5). */
export type TokenEncoding = 'o200k_base' | 'cl100k_base';

/** The encoding used when none is given. */
export const DEFAULT_ENCODING: TokenEncoding = 'o200k_base';

/** What a stage accepts as its `countTokens` option: an encoding name or a counter function. */
export type TokenCounterOption = TokenEncoding | TokenCounter;

const ENCODINGS: readonly TokenEncoding[] = ['o200k_base', 'cl100k_base'];
// The native calls take the encoding as a number (a call per short text then converts no name).
const NATIVE_ENCODINGS: ReadonlyMap<TokenEncoding, NativeTokenEncoding> = new Map([
  ['o200k_base', native.TokenEncoding.O200kBase],
  ['cl100k_base', native.TokenEncoding.Cl100kBase],
]);
const counters = new Map<TokenEncoding, TokenCounter>(
  ENCODINGS.map((encoding) => {
    const id = NATIVE_ENCODINGS.get(encoding) as NativeTokenEncoding;
    return [encoding, (text: string) => (text.length === 0 ? 0 : native.countTokens(text, id))];
  }),
);

function checkEncoding(encoding: unknown): TokenEncoding {
  if (!ENCODINGS.includes(encoding as TokenEncoding)) {
    typeError('encoding', `must be one of ${ENCODINGS.join(', ')}, got ${show(encoding)}`);
  }
  return encoding as TokenEncoding;
}

/**
 * The BPE counter of `encoding` (the same function on every call). Its vocabulary is loaded on
 * first use, once per process (about 0.05 to 0.15 s).
 *
 * Text is counted as plain text: special-token markers in it are ordinary characters, never an
 * error. Lone surrogates count as U+FFFD. Counts equal those of `gpt-tokenizer` 4 on Node.js with
 * Unicode 17 character tables; time is linear in the text length.
 * @throws TypeError if `encoding` is not one of the built-in encodings.
 * @example tokenCounter('cl100k_base')('hello world') // 2
 */
export function tokenCounter(encoding: TokenEncoding = DEFAULT_ENCODING): TokenCounter {
  return counters.get(checkEncoding(encoding)) as TokenCounter;
}

/**
 * Number of BPE tokens in `text` (default encoding `o200k_base`); see {@link tokenCounter}.
 *
 * @throws TypeError if `text` is not a string or `encoding` is unknown.
 * @example countTokens('Hello, world!') // 4
 */
export function countTokens(text: string, encoding: TokenEncoding = DEFAULT_ENCODING): number {
  if (typeof text !== 'string') typeError('text', `must be a string, got ${describe(text)}`);
  return tokenCounter(encoding)(text);
}

/**
 * Number of BPE tokens of each text, in one native call (cheaper than one call per text when the
 * texts are many and short); see {@link tokenCounter}.
 *
 * @throws TypeError naming `texts[i]` if an element is not a string (holes included), or if
 *   `encoding` is unknown.
 * @example countTokensBatch(['hello world', '']) // [2, 0]
 */
export function countTokensBatch(texts: readonly string[], encoding: TokenEncoding = DEFAULT_ENCODING): number[] {
  expectArray(texts, 'texts');
  for (let i = 0; i < texts.length; i++) {
    const text: unknown = texts[i];
    if (typeof text !== 'string') typeError(`texts[${i}]`, `must be a string, got ${describe(text)}`);
  }
  const id = NATIVE_ENCODINGS.get(checkEncoding(encoding)) as NativeTokenEncoding;
  return Array.from(native.countTokensBatch(texts as string[], id));
}

/**
 * Loads the vocabulary of `encoding` on a background thread and resolves when it is ready. The
 * first count of a process otherwise loads it on the spot (about 0.05 s for `o200k_base`, once per
 * process, shared by its worker threads): a server calls this at startup so its first request does
 * not pay for it, and the CLI while its worker threads start. Later calls resolve at once.
 *
 * @throws TypeError if `encoding` is not one of the built-in encodings.
 * @example await loadTokenizer('o200k_base')
 */
export function loadTokenizer(encoding: TokenEncoding = DEFAULT_ENCODING): Promise<void> {
  return native.loadTokenizer(NATIVE_ENCODINGS.get(checkEncoding(encoding)) as NativeTokenEncoding);
}

/**
 * Resolves a stage's `countTokens` option (validated, `path` names it in errors) into a counter
 * whose results are checked: a plugged-in counter that returns anything but a non-negative
 * integer raises an error naming the option.
 * @internal
 */
export function resolveTokenCounter(option: unknown, path: string): TokenCounter {
  if (option === undefined) return tokenCounter(DEFAULT_ENCODING);
  if (typeof option === 'string') {
    if (!ENCODINGS.includes(option as TokenEncoding)) {
      typeError(path, `must be one of ${ENCODINGS.join(', ')} or a function, got ${JSON.stringify(option)}`);
    }
    return tokenCounter(option as TokenEncoding);
  }
  if (typeof option !== 'function') typeError(path, `must be an encoding name or a function, got ${describe(option)}`);
  const counter = option as (text: string) => unknown;
  return (text: string) => {
    const n = counter(text);
    if (typeof n !== 'number') typeError(`${path}()`, `must return a number, got ${describe(n)}`);
    if (!Number.isInteger(n) || n < 0) rangeError(`${path}()`, `must return a non-negative integer, got ${n}`);
    return n;
  };
}
