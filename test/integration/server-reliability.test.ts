/**
 * Reliability of `ctxdedup serve` with real processes: restart on the same SQLite file, kill -9
 * in the middle of a stream of batches, and two instances sharing one real redis-server.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { redisAvailable, startServerProcess, tempDir, exited, useRedis } from '../support/ingest-services.js';

interface Item {
  id: string;
  content: string;
}
interface Result {
  status: 'new' | 'duplicate';
  id: string;
  duplicateOf?: string;
  sha256: string;
}

const tmp = tempDir('ctxdedup-reliability-');
afterAll(() => tmp.remove());

async function ingest(url: string, ns: string, items: Item[], token?: string): Promise<Result[]> {
  const response = await fetch(`${url}/v1/namespaces/${ns}/items`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(items),
  });
  if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { results: Result[] }).results;
}

/** `count` items with unique ids; contents repeat every `distinct` items (so later batches hold duplicates). */
function makeItems(prefix: string, count: number, distinct: number): Item[] {
  return Array.from({ length: count }, (_, i) => ({ id: `${prefix}${i}`, content: `content ${i % distinct} ${'lorem ipsum '.repeat(8)}` }));
}

function batches<T>(list: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(list.length / size) }, (_, i) => list.slice(i * size, i * size + size));
}

describe('ctxdedup serve on SQLite, real processes', () => {
  it('restart: a second process on the same file recognizes everything; SIGTERM exits 0', async () => {
    const db = join(tmp.dir, 'restart.sqlite');
    const items = makeItems('r', 1000, 1000);
    const first = await startServerProcess(['--store', `sqlite:${db}`, '--token', 'tok']);
    for (const batch of batches(items, 100)) {
      expect((await ingest(first.url, 'docs', batch, 'tok')).every((r) => r.status === 'new')).toBe(true);
    }
    expect(await first.stop()).toBe(0);
    expect(first.output()).toMatch(/stopped/);

    const second = await startServerProcess(['--store', `sqlite:${db}`, '--token', 'tok']);
    for (const batch of batches(items, 250)) {
      const resent = await ingest(
        second.url,
        'docs',
        batch.map((item) => ({ ...item, id: `again-${item.id}` })),
        'tok',
      );
      expect(resent.every((r) => r.status === 'duplicate' && r.duplicateOf === r.id.slice('again-'.length))).toBe(true);
    }
    expect(await second.stop()).toBe(0);
  });

  // synchronous=normal only gives up power-loss durability: a killed process loses nothing acknowledged.
  it.each(['full', 'normal'])('kill -9 mid-stream (--sqlite-sync %s): nothing acknowledged is lost, no content is new twice', async (sync) => {
    const db = join(tmp.dir, `kill-${sync}.sqlite`);
    const items = makeItems('k', 4000, 1500);
    const all = batches(items, 100);
    const server = await startServerProcess(['--store', `sqlite:${db}`, '--sqlite-sync', sync]);
    const acked = new Map<string, Result>();
    let sent = 0;
    let killed = false;
    // Four concurrent streams of batches; kill -9 once 15 batches are acknowledged, others in flight.
    const stream = async (): Promise<void> => {
      while (!killed && sent < all.length) {
        const batch = all[sent++]!;
        try {
          const results = await ingest(server.url, 'stream', batch);
          results.forEach((r) => acked.set(r.id, r));
          if (acked.size >= 1500 && !killed) {
            killed = true;
            server.child.kill('SIGKILL');
          }
        } catch {
          return; // the process died with this batch in flight: not acknowledged
        }
      }
    };
    await Promise.all([stream(), stream(), stream(), stream()]);
    await exited(server.child);
    expect(server.child.signalCode).toBe('SIGKILL');
    expect(acked.size).toBeGreaterThanOrEqual(1500);
    expect(acked.size).toBeLessThan(items.length);

    const restarted = await startServerProcess(['--store', `sqlite:${db}`, '--sqlite-sync', sync]);
    const after = new Map<string, Result>();
    for (const batch of batches(items, 500)) (await ingest(restarted.url, 'stream', batch)).forEach((r) => after.set(r.id, r));
    await restarted.stop();

    // Every acknowledged decision still holds: an acked `new` is the content's owner (re-sent, it is
    // `new` again: idempotent), an acked duplicate still points to the same owner.
    for (const [id, before] of acked) {
      const now = after.get(id)!;
      expect(now.status, id).toBe(before.status);
      expect(now.duplicateOf, id).toBe(before.duplicateOf);
    }
    // Exactly one id per distinct content was ever reported new, across both processes.
    const owners = new Map<string, Set<string>>();
    for (const r of [...acked.values(), ...after.values()]) {
      if (r.status !== 'new') continue;
      const set = owners.get(r.sha256) ?? new Set<string>();
      set.add(r.id);
      owners.set(r.sha256, set);
    }
    expect(owners.size).toBe(1500);
    expect([...owners.values()].every((ids) => ids.size === 1)).toBe(true);
  });
});

describe.skipIf(!redisAvailable())('two ctxdedup serve instances on one real Redis', () => {
  const redis = useRedis();

  it('the same contents posted concurrently to both give exactly one new per distinct content', async () => {
    const [a, b] = await Promise.all([startServerProcess(['--store', redis.url]), startServerProcess(['--store', redis.url])]);
    const distinct = 600;
    const post = async (url: string, prefix: string): Promise<Result[]> => {
      // Each instance gets every content twice (ids unique per instance), in shuffled batches.
      const items = makeItems(prefix, 2 * distinct, distinct).reverse();
      const results = await Promise.all(batches(items, 100).map((batch) => ingest(url, 'shared', batch)));
      return results.flat();
    };
    const results = (await Promise.all([post(a.url, 'a'), post(b.url, 'b'), post(a.url, 'a2-'), post(b.url, 'b2-')])).flat();
    expect(results).toHaveLength(4 * 2 * distinct);
    const newPerContent = new Map<string, number>();
    for (const r of results) if (r.status === 'new') newPerContent.set(r.sha256, (newPerContent.get(r.sha256) ?? 0) + 1);
    expect(newPerContent.size).toBe(distinct);
    expect([...newPerContent.values()].every((n) => n === 1)).toBe(true);
    // Every duplicate names the owner that was reported new.
    const ownerOf = new Map(results.filter((r) => r.status === 'new').map((r) => [r.sha256, r.id]));
    expect(results.every((r) => r.status === 'new' || r.duplicateOf === ownerOf.get(r.sha256))).toBe(true);
    expect(await a.stop()).toBe(0);
    expect(await b.stop()).toBe(0);
  });

  it('a server whose Redis is unreachable fails at startup with a clear message', async () => {
    await expect(startServerProcess(['--store', 'redis://127.0.0.1:1'])).rejects.toThrow(/cannot connect to redis:\/\/127\.0\.0\.1:1/);
  });
});
