/**
 * Building blocks of synthetic text: identifiers, code lines, prose. Everything draws from an
 * {@link Rng}, so the same seed gives the same text.
 * @module
 */
import type { Rng } from './prng.js';

const WORDS = [
  'cache',
  'index',
  'timeout',
  'build',
  'invoice',
  'vertex',
  'error',
  'price',
  'merge',
  'render',
  'create',
  'user',
  'save',
  'vector',
  'router',
  'session',
  'record',
  'result',
  'schema',
  'value',
  'status',
  'service',
  'layer',
  'handler',
  'parser',
  'scalar',
  'order',
  'encode',
  'config',
  'load',
  'mount',
  'cart',
  'texture',
  'total',
  'format',
  'graph',
  'retry',
  'split',
  'matrix',
  'item',
  'window',
  'limit',
  'queue',
  'product',
  'tensor',
  'response',
  'token',
  'account',
  'buffer',
  'client',
  'payment',
  'fetch',
  'batch',
  'frame',
  'kernel',
  'stream',
  'socket',
  'signal',
  'worker',
  'event',
  'module',
  'report',
  'filter',
  'source',
  'target',
  'update',
  'delete',
  'insert',
  'select',
  'parse',
] as const;

const KEYWORDS = ['const', 'let', 'return', 'await', 'throw', 'yield', 'export const'] as const;
const INDENTS = ['', '  ', '    ', '      '] as const;

const PROSE = [
  'the',
  'a',
  'this',
  'we',
  'it',
  'should',
  'would',
  'keeps',
  'moves',
  'changes',
  'because',
  'when',
  'after',
  'before',
  'so',
  'that',
  'handler',
  'module',
  'function',
  'test',
  'request',
  'value',
  'config',
  'error',
  'path',
  'file',
  'default',
  'stable',
  'public',
  'small',
  'faster',
  'separate',
  'document',
  'configurable',
  'explicit',
  'cached',
  'retry',
  'timeout',
  'schema',
] as const;

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}

/** A camelCase identifier of two words, e.g. `cartVertex`. */
export function identifier(rng: Rng): string {
  return rng.pick(WORDS) + capitalize(rng.pick(WORDS));
}

/** A source path such as `src/cache/retry-buffer.ts`. */
export function sourcePath(rng: Rng, unique: number): string {
  return `src/${rng.pick(WORDS)}/${rng.pick(WORDS)}-${rng.pick(WORDS)}-${unique.toString(36)}.ts`;
}

/** One line of TypeScript-looking code (~30-60 chars); `tag` makes it unique when needed. */
export function codeLine(rng: Rng, tag = ''): string {
  const name = `${rng.pick(WORDS)}_${tag}${rng.int(100)}`;
  return `${rng.pick(INDENTS)}${rng.pick(KEYWORDS)} ${name} = ${identifier(rng)}(${rng.int(10000)});`;
}

/** A sentence of 6-16 words ending with a period. */
export function sentence(rng: Rng): string {
  const words: string[] = [];
  const count = rng.range(6, 16);
  for (let i = 0; i < count; i++) words.push(rng.chance(0.15) ? `\`${identifier(rng)}\`` : rng.pick(PROSE));
  return `${capitalize(words.join(' '))}.`;
}

/** Markdown-ish prose of about `chars` characters: paragraphs and the odd bullet list. */
export function prose(rng: Rng, chars: number): string {
  const blocks: string[] = [];
  let length = 0;
  while (length < chars) {
    let block: string;
    if (rng.chance(0.25)) {
      const bullets: string[] = [];
      for (let i = rng.range(2, 5); i > 0; i--) bullets.push(`- ${sentence(rng)}`);
      block = bullets.join('\n');
    } else {
      const sentences: string[] = [];
      for (let i = rng.range(2, 5); i > 0; i--) sentences.push(sentence(rng));
      block = sentences.join(' ');
    }
    blocks.push(block);
    length += block.length + 2;
  }
  return blocks.join('\n\n');
}

/** Code lines joined by `\n`, at least `chars` characters long (callers slice if exactness matters). */
export function codeBlock(rng: Rng, chars: number, tag = ''): string {
  const lines: string[] = [];
  let length = 0;
  while (length < chars) {
    const line = codeLine(rng, tag);
    lines.push(line);
    length += line.length + 1;
  }
  return lines.join('\n');
}
