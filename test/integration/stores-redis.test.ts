/**
 * The Redis ingestion store at the documented batch limit (100,000 items in one atomic claim) and
 * the validation of `redisKeyPrefix`. A real redis-server; nothing is mocked.
 */
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { sha256 } from '../../src/identity.js';
import { IngestIndex } from '../../src/ingest/index.js';
import { RedisStore } from '../../src/ingest/redis-store.js';
import { redisAvailable, useRedis } from '../support/ingest-services.js';

describe('redisKeyPrefix', () => {
  it('must be a string, named in the error', async () => {
    const cases: [unknown, string][] = [
      [5, 'a number'],
      [null, 'null'],
      [{}, 'an object'],
      [['a'], 'an array'],
    ];
    for (const [prefix, got] of cases) {
      await expect(IngestIndex.open({ store: 'memory', redisKeyPrefix: prefix as string })).rejects.toThrow(
        new TypeError(`options.redisKeyPrefix must be a string, got ${got}`),
      );
    }
    await expect(RedisStore.connect('redis://127.0.0.1:1', 7 as unknown as string)).rejects.toThrow(new TypeError('prefix must be a string, got a number'));
  });
});

describe.skipIf(!redisAvailable())('Redis store at maxBatchItems', () => {
  const redis = useRedis();

  it('claims a batch of 100,000 items (the default maxBatchItems) in one atomic call', async () => {
    const index = await IngestIndex.open({ store: redis.url, redisKeyPrefix: 'big:' });
    const n = 100_000;
    const items = Array.from({ length: n }, (_, i) => ({ id: `i${i}`, content: `content ${i}` }));
    const first = await index.ingest('ns', items);
    expect(first.length).toBe(n);
    expect(first.every((r, i) => r.status === 'new' && r.id === `i${i}`)).toBe(true);
    // Every content was recorded under its own id.
    const again = await index.ingest(
      'ns',
      items.map((item, i) => ({ id: `j${i}`, content: item.content })),
    );
    expect(again.every((r, i) => r.status === 'duplicate' && r.duplicateOf === `i${i}`)).toBe(true);
    // A retry of the same batch is new again, ids with any characters included.
    const odd = Array.from({ length: n }, (_, i) => ({ id: `id ${i}, "quoted" \n ${'é'.repeat(i % 3)}`, content: `odd ${i}` }));
    expect((await index.ingest('odd', odd)).every((r) => r.status === 'new')).toBe(true);
    expect((await index.ingest('odd', odd)).every((r) => r.status === 'new')).toBe(true);
    const client = new Redis(redis.url);
    try {
      expect(await client.get(`big:{ns}:${sha256('content 99999')}`)).toBe('i99999');
      expect(await client.get(`big:{odd}:${sha256('odd 4')}`)).toBe(odd[4]!.id);
    } finally {
      client.disconnect();
    }
    await index.close();
  });

  it('keeps the TTL on every key of a large batch', async () => {
    const index = await IngestIndex.open({ store: redis.url, redisKeyPrefix: 'ttl:', namespaces: { t: { ttlSeconds: 1000 } } });
    const items = Array.from({ length: 70_000 }, (_, i) => ({ id: `t${i}`, content: `ttl ${i}` }));
    expect((await index.ingest('t', items)).every((r) => r.status === 'new')).toBe(true);
    const client = new Redis(redis.url);
    try {
      for (const i of [0, 34_999, 69_999]) {
        const ttl = await client.pttl(`ttl:{t}:${sha256(`ttl ${i}`)}`);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(1_000_000);
      }
    } finally {
      client.disconnect();
    }
    await index.close();
  });
});
