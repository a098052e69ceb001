/**
 * Building an error message never throws (issue 12): `describe` and `show` render any value, and
 * the errors that show a caller's value name their path even for BigInts, cycles, symbols and
 * null-prototype objects, instead of failing with "Do not know how to serialize a BigInt".
 */
import fc from 'fast-check';
import { describe as suite, expect, it } from 'vitest';
import { describe, show } from '../../src/validation.js';
import { dedupeMiddleware, dedupePrompt } from '../../src/adapters/ai-sdk.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dedupeMcpClient } from '../../src/adapters/mcp.js';
import { dedupeOpenAIChat } from '../../src/adapters/requests.js';
import {
  dedupeFindings,
  dedupeMessages,
  dedupeResearch,
  dedupeSources,
  deduplicate,
  type Message,
  ResourceLedger,
  restoreMessages,
  type ToolResponse,
  tokenCounter,
} from '../../src/index.js';
import { IngestIndex } from '../../src/ingest/index.js';
import { runConformance } from '../../src/conformance/index.js';
import { ChromaMemoryStore, InMemoryStore, MemoryDeduplicator, hashedEmbedding, openMemoryStore } from '../../src/memory/index.js';
import { openStore } from '../../src/ingest/index.js';
import { startServer } from '../../src/server/index.js';
import { anyValue, unsafe } from '../support/assertions.js';

function hostile(): unknown[] {
  const cyclic: Record<string, unknown> = {};
  cyclic['self'] = cyclic;
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  const throwing = {
    toJSON(): never {
      throw new Error('toJSON says no');
    },
  };
  const getter = Object.defineProperty({}, 'x', {
    enumerable: true,
    get(): never {
      throw new Error('getter says no');
    },
  });
  return [10n, { n: 10n }, [1n], cyclic, proxy, throwing, getter, Object.create(null), Symbol('s'), () => 1, undefined, null, NaN, -0, 'x'.repeat(10_000)];
}

suite('describe and show', () => {
  it('never throw, whatever the value', () => {
    for (const value of hostile()) {
      expect(typeof describe(value)).toBe('string');
      expect(typeof show(value)).toBe('string');
    }
    fc.assert(
      fc.property(anyValue(), (value) => {
        expect(typeof describe(value)).toBe('string');
        expect(show(value).length).toBeLessThanOrEqual(120);
      }),
      { numRuns: 500 },
    );
  });

  it('render values readably', () => {
    const [big, nested, , cyclic, revoked] = hostile();
    expect(show(big)).toBe('10n');
    expect(show(nested)).toBe('an object');
    expect(show(cyclic)).toBe('an object');
    expect(describe(revoked)).toBe('a revoked proxy');
    // Validation names the path instead of surfacing V8's "Cannot perform 'IsArray' on a proxy".
    expect(() => dedupeMessages(unsafe<Message[]>(revoked))).toThrow(new TypeError('messages must be an array, got a revoked proxy'));
    expect(() => dedupeMessages(unsafe<Message[]>([revoked]))).toThrow(new TypeError('messages[0] must be an object, got a revoked proxy'));
    expect(() => dedupeMessages([], unsafe(revoked))).toThrow(new TypeError('options must be an object, got a revoked proxy'));
    // A misspelled option is named, not silently ignored (keep 'latest' applied instead of 'earliest').
    expect(() => dedupeMessages([], unsafe({ kep: 'earliest' }))).toThrow(/^options\.kep is not an option here \(options: keep, exact, near/);
    expect(() => dedupeMessages([], unsafe({ keep: 'earliest', blocks: { minLine: 3 } }))).toThrow(/^options\.blocks\.minLine is not an option here/);
    expect(() => deduplicate([], unsafe({ enable: false }))).toThrow(new TypeError('options.enable is not an option here (options: enabled)'));
    expect(() => dedupeSources([], unsafe({ url_field: 'link' }))).toThrow(/^options\.url_field is not an option here/);
    expect(() => dedupeFindings([], unsafe({ minchars: 3 }))).toThrow(/^options\.minchars is not an option here/);
    expect(() => new ResourceLedger(unsafe({ lookback_turns: 1 }))).toThrow(/^options\.lookback_turns is not an option here/);
    expect(() => new ResourceLedger(unsafe({ tools: { read: { dedupliate: false } } }))).toThrow(/^options\.tools\["read"\]\.dedupliate is not an option here/);
    expect(() => dedupeMessages([], unsafe({ reference: { exat: 'x' } }))).toThrow(/^options\.reference\.exat is not an option here/);
    expect(() => dedupeResearch({ sources: [], findings: [] }, unsafe({ canonicalizeUrl: true }))).toThrow(/^options\.canonicalizeUrl is not an option here/);
    expect(() => new MemoryDeduplicator(unsafe({ store: new InMemoryStore(), treshold: 0.99 }))).toThrow(/^options\.treshold is not an option here/);
    expect(() => new ResourceLedger().process(unsafe<ToolResponse>({ turn: 1, tool: 't', callId: 'c', blocks: [revoked] }))).toThrow(
      new TypeError('response.blocks[0] must be an object, got a revoked proxy'),
    );
    // The adapters fix keep, recencyWindow and preserve: naming them (or a typo) is an error.
    expect(() => dedupeMiddleware(unsafe({ minchars: 5 }))).toThrow(/^options\.minchars is not an option here/);
    expect(() => dedupeMiddleware(unsafe({ keep: 'latest' }))).toThrow(/^options\.keep is not an option here/);
    expect(() => dedupeMiddleware({ onDedupe: () => undefined, minChars: 10 })).not.toThrow();
    expect(() => dedupeOpenAIChat({ messages: [] }, unsafe({ recencyWindow: 3 }))).toThrow(/^options\.recencyWindow is not an option here/);
    expect(() => dedupeMcpClient(unsafe<Client>({ callTool: () => undefined }), unsafe({ onresult: () => undefined }))).toThrow(
      /^options\.onresult is not an option here/,
    );
    // The adapters and restoreMessages name a revoked proxy too.
    expect(() => dedupeOpenAIChat({ messages: [unsafe(revoked)] })).toThrow(new TypeError('request.messages[0] must be an object, got a revoked proxy'));
    expect(() => dedupePrompt(unsafe([{ role: 'user', content: [revoked] }]))).toThrow(
      new TypeError('prompt[0].content[0] must be an object, got a revoked proxy'),
    );
    expect(() => restoreMessages(unsafe<Message[]>([revoked]), {})).toThrow(new TypeError('messages[0] must be an object, got a revoked proxy'));
    // The longest array, all holes: its first hole is named before anything is allocated.
    const holes = new Array(2 ** 32 - 1);
    expect(() => deduplicate(holes)).toThrow(new TypeError('scored[0] must be an object, got undefined'));
    expect(() => dedupeSources(holes)).toThrow(new TypeError('sources[0] must be an object, got undefined'));
    expect(show('a"b')).toBe('"a\\"b"');
    expect(show(Symbol('s'))).toBe('Symbol(s)');
    expect(show({ a: [1, 'x'] })).toBe('{"a":[1,"x"]}');
    expect(show(() => 1)).toBe('a function');
    expect(show(undefined)).toBe('undefined');
    expect(show('x'.repeat(500))).toHaveLength(120);
  });
});

suite('errors that show a value name their path (any value)', () => {
  it('MemoryDeduplicator.dedupeAll({ linkage: 10n }) names options.linkage', async () => {
    const dedup = new MemoryDeduplicator({ store: new InMemoryStore() });
    await expect(dedup.dedupeAll({ linkage: unsafe(10n) })).rejects.toThrow(new TypeError("options.linkage must be 'single' or 'complete', got 10n"));
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    await expect(dedup.dedupeAll({ linkage: unsafe(cyclic) })).rejects.toThrow(new TypeError("options.linkage must be 'single' or 'complete', got an object"));
  });

  it('hashedEmbedding(5) is rejected: options must be an object', () => {
    expect(() => hashedEmbedding(unsafe(5))).toThrow(new TypeError('options must be an object, got a number'));
    expect(() => hashedEmbedding(unsafe(null))).toThrow(new TypeError('options must be an object, got null'));
    expect(hashedEmbedding({ dim: 8 }).dim).toBe(8);
  });

  it('tokenCounter, IngestIndex.open and startServer render odd values', async () => {
    expect(() => tokenCounter(unsafe(Object.create(null)))).toThrow(/^encoding must be one of .*, got \{\}$/);
    await expect(IngestIndex.open({ hashing: unsafe(10n) })).rejects.toThrow(new TypeError("options.hashing must be 'native', got 10n"));
    // A merge function that writes through its own deduplicator is refused, not left waiting for itself.
    let inner: unknown;
    let later: Promise<unknown> | undefined;
    const selfish = new MemoryDeduplicator({
      store: new InMemoryStore(),
      lowerThreshold: 0,
      upperThreshold: 1,
      merge: async (older, newer) => {
        // A write the merge only schedules runs after it, as any other write (it is no longer inside it).
        later ??= new Promise((resolve) => setTimeout(() => resolve(selfish.checkAndMerge({ id: 'later', content: 'something else entirely' })), 0));
        inner ??= await selfish.checkAndMerge({ id: 'x', content: 'again' }).catch((error: unknown) => error);
        return `${older.content} / ${newer.content}`;
      },
    });
    await selfish.checkAndMerge({ id: 'a', content: 'the user likes tea' });
    const merged = await selfish.checkAndMerge({ id: 'b', content: 'the user likes green tea' });
    expect(merged.decision).toBe('merge');
    expect(inner).toBeInstanceOf(Error);
    expect((inner as Error).message).toMatch(/called from inside one of its own writes/);
    await expect(later).resolves.toMatchObject({ id: 'later' });
    expect(() => hashedEmbedding(unsafe({ dims: 64 }))).toThrow(/^options\.dims is not an option here/);
    await expect(openMemoryStore('memory', unsafe({ colection: 'x' }))).rejects.toThrow(/^options\.colection is not an option here/);
    await expect(ChromaMemoryStore.connect(unsafe({ urll: 'http://127.0.0.1:9' }))).rejects.toThrow(/^options\.urll is not an option here/);
    await expect(openStore('memory', unsafe({ redisKeyPrefx: 'p' }))).rejects.toThrow(/^options\.redisKeyPrefx is not an option here/);
    await expect(selfish.dedupeAll(unsafe({ dry_run: true }))).rejects.toThrow(/^options\.dry_run is not an option here/);
    await expect(runConformance(unsafe({ suite: ['scored'] }))).rejects.toThrow(/^options\.suite is not an option here/);
    await expect(IngestIndex.open(unsafe({ store: 'memory', nearDuplicates: { treshold: 0.5 } }))).rejects.toThrow(
      /^options\.nearDuplicates\.treshold is not an option here/,
    );
    // A misspelled token must not start a server without authentication.
    await expect(startServer(unsafe({ port: 0, tokne: 'a-secret-token-value' }))).rejects.toThrow(/^options\.tokne is not an option here/);
    await expect(IngestIndex.open(unsafe({ store: 'memory', ttlSecond: 5 }))).rejects.toThrow(/^options\.ttlSecond is not an option here/);
    // Metadata too deep to serialize says so, not "Maximum call stack size exceeded".
    let deep: unknown = 'x';
    for (let k = 0; k < 20_000; k++) deep = { k: deep };
    const index = await IngestIndex.open({ store: 'memory' });
    await expect(index.ingest('ns', [{ content: 'x', metadata: unsafe(deep) }])).rejects.toThrow(
      new TypeError('items[0].metadata nests too deeply to be stored as JSON'),
    );
    await index.close();
    await expect(startServer({ port: unsafe(Symbol('p')) })).rejects.toThrow(new RangeError('options.port must be an integer in [0, 65535], got Symbol(p)'));
    await expect(startServer({ port: 8080, maxBody: unsafe(Object.create(null)) })).rejects.toThrow(
      new RangeError('options.maxBody must be a positive integer (bytes), got {}'),
    );
  });
});
