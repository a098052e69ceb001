/**
 * Token counters for the block-dedup baseline's net-positive rule: gpt-tokenizer's o200k_base
 * (plain JS, the baseline proper), and the addon's o200k_base counter called once per text (to
 * show how much of the baseline's time is token counting).
 * @module
 */
import { createRequire } from 'node:module';
import { native } from '../../src/native.js';
import type { RefTokenCounter } from './blocks.js';

interface Bpe {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}

const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** gpt-tokenizer's o200k_base counter; special-token text counts as plain text, as natively. */
export function jsTokenCounter(): RefTokenCounter {
  const bpe = createRequire(import.meta.url)('gpt-tokenizer/encoding/o200k_base') as Bpe;
  return (text) => (text.length === 0 ? 0 : bpe.countTokens(text, PLAIN_TEXT));
}

interface NativeTokens {
  countTokens(text: string, encoding: number): number;
  countTokensBatch(texts: string[], encoding: number): Uint32Array;
}

/** The addon's o200k_base counter (the one the native pass uses), one call per text. */
export function nativeTokenCounter(): RefTokenCounter {
  const n = native as unknown as NativeTokens;
  return (text) => n.countTokens(text, 0); // 0: o200k_base
}

/** The addon's o200k_base counts of many texts in one call. */
export function nativeTokenCounts(texts: string[]): Uint32Array {
  return (native as unknown as NativeTokens).countTokensBatch(texts, 0); // 0: o200k_base
}
