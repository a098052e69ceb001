/**
 * The generated Rust↔TS contract (src/native-binding.ts): modes cross as named values (string
 * enums), the same parameter has one type in every function, and caller errors come from the
 * core with its message (the binding re-validates nothing).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native.js';

const units = (s: string): Uint16Array => Uint16Array.from(s, (c) => c.charCodeAt(0));

describe('native contract', () => {
  it('takes cluster linkage by name', () => {
    // a~b and b~c, but a and c are not similar: one single-linkage cluster, not a complete one.
    const angle = (deg: number): number[] => [Math.cos((deg * Math.PI) / 180), Math.sin((deg * Math.PI) / 180)];
    const data = Float32Array.from([...angle(0), ...angle(30), ...angle(60)]);
    const threshold = Math.cos((40 * Math.PI) / 180);
    expect(Array.from(native.cosineClusters(data, 2, threshold, 'single').members)).toEqual([0, 1, 2]);
    expect(native.cosineClusters(data, 2, threshold, 'complete').members.length).toBe(2);
    expect(() => native.cosineClusters(data, 2, threshold, 'bogus' as never)).toThrow(/Linkage/);
  });

  it('takes the reference template kind by name', () => {
    const plain = units('{target} {from} {to}');
    expect(native.blockTemplateError(plain, 'reference')).toBeNull();
    expect(native.blockTemplateError(plain, 'numberedReference')).toEqual(expect.any(String));
    expect(() => native.blockTemplateError(plain, 'numbered' as never)).toThrow(/TemplateKind/);
  });

  it('takes the keep rule by name', () => {
    const contents = ['x'.repeat(10), 'x'.repeat(10)];
    const lengths = Uint32Array.of(10, 10);
    const options = { minChars: 1, skipPrefixes: [], recencyStart: 0, exact: true };
    const of = (keep: 'earliest' | 'latest'): number[] =>
      Array.from(native.analyzeMessages(contents, lengths, new Uint8Array(2), new Uint8Array(2), { ...options, keep }).exactOf);
    expect(of('earliest')).toEqual([0]);
    expect(of('latest')).toEqual([1]);
    expect(() => of('first' as never)).toThrow(/Keep/);
  });

  it('counts tokens with one encoding type for one text and for a batch', () => {
    const { O200kBase, Cl100kBase } = native.TokenEncoding;
    expect(native.countTokens('hello world', Cl100kBase)).toBe(2);
    expect(Array.from(native.countTokensBatch(['hello world', ''], Cl100kBase))).toEqual([2, 0]);
    expect(native.countTokensBatch(['Hello, world!'], O200kBase)[0]).toBe(native.countTokens('Hello, world!', O200kBase));
    expect(() => native.countTokens('a', 7 as never)).toThrow(/TokenEncoding/);
  });

  it('checksums contents packed in one buffer with the end of each', () => {
    const hex = native.resourceChecksums(Buffer.from('abcdef'), Uint32Array.of(3, 6), 0);
    expect(hex).toBe(createHash('sha256').update('abc').digest('hex') + createHash('sha256').update('def').digest('hex'));
    expect(() => native.resourceChecksums(Buffer.from('abcdef'), Uint32Array.of(3, 2), 0)).toThrow('ends[1] is before the end before it or past the buffer');
    expect(() => native.resourceChecksums(Buffer.from('abc'), Uint32Array.of(4), 0)).toThrow('ends[0]');
  });

  it('reports caller errors from the core', async () => {
    expect(() => native.scoredSurvivors(['a'], new Float64Array(2))).toThrow('one score per content is required: 2 for 1 contents');
    expect(() => native.embedHashedNgrams(['a'], 0)).toThrow('dimension must be at least 1');
    await expect(native.embedHashedNgramsAsync(['a'], 0)).rejects.toThrow('dimension must be at least 1');
  });
});
