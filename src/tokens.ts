/**
 * Token counting for the stage reports.
 *
 * The default counter is a real BPE tokenizer (the `gpt-tokenizer` package, which ships the
 * `o200k_base` and `cl100k_base` vocabularies and works offline). An encoding is loaded on first
 * use, not at import time. Any function from text to a token count can be plugged in instead.
 * @module
 */
import { createRequire } from 'node:module';
import { describe, rangeError, show, typeError } from './errors.js';

/** Counts the tokens of a text. Must return a non-negative integer. */
export type TokenCounter = (text: string) => number;

/** The built-in BPE encodings: `o200k_base` (GPT-4o and later), `cl100k_base` (GPT-4, GPT-3.5). */
export type TokenEncoding = 'o200k_base' | 'cl100k_base';

/** The encoding used when none is given. */
export const DEFAULT_ENCODING: TokenEncoding = 'o200k_base';

/** What a stage accepts as its `countTokens` option: an encoding name or a counter function. */
export type TokenCounterOption = TokenEncoding | TokenCounter;

interface BpeModule {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}

const ENCODINGS: readonly TokenEncoding[] = ['o200k_base', 'cl100k_base'];
const loaded = new Map<TokenEncoding, TokenCounter>();
const require = createRequire(import.meta.url);
// Special-token text such as `<|endoftext|>` inside content is counted as ordinary text.
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/**
 * The BPE counter of `encoding`, loaded on first use (about 0.1 to 0.2 s, once per process).
 *
 * Text is counted as plain text: special-token markers in it are ordinary characters, never an
 * error. Lone surrogates count as U+FFFD.
 * @throws TypeError if `encoding` is not one of the built-in encodings.
 * @example tokenCounter('cl100k_base')('hello world') // 2
 */
export function tokenCounter(encoding: TokenEncoding = DEFAULT_ENCODING): TokenCounter {
  if (!ENCODINGS.includes(encoding)) {
    typeError('encoding', `must be one of ${ENCODINGS.join(', ')}, got ${show(encoding)}`);
  }
  let counter = loaded.get(encoding);
  if (counter === undefined) {
    const bpe = require(`gpt-tokenizer/encoding/${encoding}`) as BpeModule;
    counter = (text: string) => (text.length === 0 ? 0 : bpe.countTokens(text, PLAIN_TEXT));
    loaded.set(encoding, counter);
  }
  return counter;
}

/**
 * Number of BPE tokens in `text` (default encoding `o200k_base`).
 *
 * @throws TypeError if `text` is not a string or `encoding` is unknown.
 * @example countTokens('Hello, world!') // 4
 */
export function countTokens(text: string, encoding: TokenEncoding = DEFAULT_ENCODING): number {
  if (typeof text !== 'string') typeError('text', `must be a string, got ${describe(text)}`);
  return tokenCounter(encoding)(text);
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
