import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { sha256 } from '../../src/identity.js';
import { IngestIndex, type IngestResult } from '../../src/ingest/index.js';
import { hashBatch } from '../../src/ingest/hash.js';
import { hashBatchJs } from '../../bench/reference/hashing.js';
import Database from 'better-sqlite3';
import { SQLITE_SCHEMA_VERSION, SqliteStore } from '../../src/ingest/sqlite-store.js';
import { ROOT, redisAvailable, tempDir, useRedis } from '../support/ingest-services.js';

const tmp = tempDir();
afterAll(() => tmp.remove());
let dbCounter = 0;
const sqliteSpec = (): string => `sqlite:${join(tmp.dir, `index-${++dbCounter}.sqlite`)}`;

const statuses = (results: IngestResult[]): string[] => results.map((r) => (r.status === 'new' ? 'new' : `dup:${r.duplicateOf}`));

describe('native batch hashing', () => {
  it('matches node:crypto and a JS Map on mixed contents, sync and async', async () => {
    const contents = ['', 'a', 'é', '😀 x', 'a', '\uFEFFline\r\n', '', 'é', 'x'.repeat(5000)];
    const js = hashBatchJs(contents);
    const sync = await hashBatch(contents, 0, Infinity);
    const async = await hashBatch(contents, 0, 0);
    expect(sync.hex).toBe(js.hex);
    expect(async.hex).toBe(js.hex);
    expect([...sync.first]).toEqual([...js.first]);
    expect([...async.first]).toEqual([0, 1, 2, 3, 1, 5, 0, 2, 8]);
    expect(sync.hex.slice(64, 128)).toBe(sha256('a'));
  });
});

const localStores: [string, () => string][] = [
  ['memory', () => 'memory'],
  ['sqlite', sqliteSpec],
];

describe.each(localStores)('IngestIndex on the %s store', (_name, spec) => {
  it('reports new, duplicates across and inside batches, with the owner id and SHA-256', async () => {
    const index = await IngestIndex.open({ store: spec() });
    const first = await index.ingest('docs', [
      { id: 'a', content: 'alpha' },
      { id: 'b', content: 'beta' },
      { id: 'c', content: 'alpha' },
    ]);
    expect(statuses(first)).toEqual(['new', 'new', 'dup:a']);
    expect(first[0]).toEqual({ status: 'new', id: 'a', sha256: sha256('alpha') });
    expect(first[2]).toEqual({ status: 'duplicate', match: 'exact', id: 'c', duplicateOf: 'a', sha256: sha256('alpha') });
    const second = await index.ingest('docs', [
      { id: 'd', content: 'beta' },
      { id: 'e', content: 'gamma' },
      { id: 'f', content: 'gamma' },
    ]);
    expect(statuses(second)).toEqual(['dup:b', 'new', 'dup:e']);
    // Namespaces are independent.
    expect(statuses(await index.ingest('other', [{ id: 'z', content: 'alpha' }]))).toEqual(['new']);
    await index.close();
  });

  it('is retry-safe: the same id and content stays new, inside a batch and across batches', async () => {
    const index = await IngestIndex.open({ store: spec() });
    const batch = [
      { id: 'a', content: 'one' },
      { id: 'b', content: 'two' },
      { id: 'a', content: 'one' },
    ];
    expect(statuses(await index.ingest('ns', batch))).toEqual(['new', 'new', 'new']);
    expect(statuses(await index.ingest('ns', batch))).toEqual(['new', 'new', 'new']);
    // A different id with known content is a duplicate of the owner, wherever it sits in the batch.
    expect(
      statuses(
        await index.ingest('ns', [
          { id: 'x', content: 'two' },
          { id: 'b', content: 'two' },
        ]),
      ),
    ).toEqual(['dup:b', 'new']);
    await index.close();
  });

  it('assigns UUIDs to items without id; re-sent, they are duplicates of the first copy', async () => {
    const index = await IngestIndex.open({ store: spec() });
    const [r1] = await index.ingest('ns', [{ content: 'anonymous' }]);
    expect(r1!.id).toMatch(/^[0-9a-f-]{36}$/);
    const [r2] = await index.ingest('ns', [{ content: 'anonymous' }]);
    expect(r2).toMatchObject({ status: 'duplicate', duplicateOf: r1!.id });
    await index.close();
  });

  it('forgets entries older than the namespace TTL', async () => {
    let now = 1_000_000;
    const index = await IngestIndex.open({ store: spec(), namespaces: { short: { ttlSeconds: 60 } }, now: () => now });
    await index.ingest('short', [{ id: 'a', content: 'c' }]);
    await index.ingest('forever', [{ id: 'a', content: 'c' }]);
    now += 59_000;
    expect(statuses(await index.ingest('short', [{ id: 'b', content: 'c' }]))).toEqual(['dup:a']);
    now += 2_000;
    expect(statuses(await index.ingest('short', [{ id: 'b', content: 'c' }]))).toEqual(['new']);
    expect(statuses(await index.ingest('short', [{ id: 'a', content: 'c' }]))).toEqual(['dup:b']);
    expect(statuses(await index.ingest('forever', [{ id: 'b', content: 'c' }]))).toEqual(['dup:a']);
    await index.close();
  });

  it('rejects bad input naming the item, and records nothing of that batch', async () => {
    const index = await IngestIndex.open({ store: spec() });
    const bad: [unknown, unknown, RegExp][] = [
      ['bad/ns', [], /^namespace "bad\/ns" is not valid/],
      [42, [], /^namespace must be a string, got a number/],
      ['ns', 'x', /^items must be an array, got a string/],
      ['ns', [{ content: 'ok' }, null], /^items\[1\] must be an object, got null/],
      ['ns', [{ content: 'ok' }, { content: 7 }], /^items\[1\]\.content must be a string, got a number/],
      ['ns', [{ content: 'ok' }, { content: 'a\uD800' }], /^items\[1\]\.content contains a lone surrogate/],
      ['ns', [{ content: 'ok' }, { content: 'x', id: 3 }], /^items\[1\]\.id must be a string, got a number/],
      ['ns', [{ content: 'ok' }, { content: 'x', id: '' }], /^items\[1\]\.id must have 1 to 1024 characters/],
      ['ns', [{ content: 'ok' }, { content: 'x', metadata: [] }], /^items\[1\]\.metadata must be an object, got an array/],
      ['ns', [{ content: 'ok' }, { content: 'x', metadata: { n: 1n } }], /^items\[1\]\.metadata is not serializable as JSON/],
    ];
    for (const [ns, items, message] of bad) {
      await expect(index.ingest(ns as string, items as never)).rejects.toThrow(message);
    }
    await expect(index.ingest('ns', [{ content: 'a\uDC00' }])).rejects.toBeInstanceOf(TypeError);
    // 'ok' came first in the rejected batches but was never recorded.
    expect(statuses(await index.ingest('ns', [{ id: 'first', content: 'ok' }]))).toEqual(['new']);
    await index.close();
    await expect(index.ingest('ns', [])).rejects.toThrow(/closed/);
  });

  it('concurrent batches with overlapping contents give exactly one new per content', async () => {
    const index = await IngestIndex.open({ store: spec() });
    const runs = await Promise.all(
      Array.from({ length: 12 }, (_, b) =>
        index.ingest(
          'concurrent',
          Array.from({ length: 50 }, (_, i) => ({ id: `b${b}-${i}`, content: `c${(b * 17 + i) % 80}` })),
        ),
      ),
    );
    const owners = new Map<string, string[]>();
    for (const r of runs.flat()) if (r.status === 'new') owners.set(r.sha256, [...(owners.get(r.sha256) ?? []), r.id]);
    expect(owners.size).toBe(80);
    expect([...owners.values()].every((ids) => ids.length === 1)).toBe(true);
    expect(runs.flat().every((r) => r.status === 'new' || owners.get(r.sha256)![0] === r.duplicateOf)).toBe(true);
    await index.close();
  });

  it('hashes large batches off the main thread with the same results as the JS baseline', async () => {
    const native = await IngestIndex.open({ store: spec(), asyncThreshold: 0 });
    const inline = await IngestIndex.open({ store: spec(), asyncThreshold: Infinity });
    const items = Array.from({ length: 3000 }, (_, i) => ({ id: `i${i}`, content: `item ${i % 1000} ${'é😀'.repeat((i % 1000) % 7)}` }));
    const [a, b] = await Promise.all([native.ingest('big', items), inline.ingest('big', items)]);
    expect(a).toEqual(b);
    expect(a.filter((r) => r.status === 'new')).toHaveLength(1000);
    // The JS baseline (bench/reference/hashing.ts): the same digests and first occurrences.
    const js = hashBatchJs(items.map((item) => item.content));
    expect(a.map((r) => r.sha256).join('')).toBe(js.hex);
    expect(a.map((r) => r.status === 'new')).toEqual([...js.first].map((first, i) => first === i));
    await Promise.all([native.close(), inline.close()]);
  });
});

describe('IngestIndex options', () => {
  it('rejects bad options with their path', async () => {
    await expect(IngestIndex.open({ store: 'mysql://x' })).rejects.toThrow(/store must be 'memory'/);
    await expect(IngestIndex.open({ store: 'sqlite:' })).rejects.toThrow(/needs a file path/);
    await expect(IngestIndex.open({ store: 'memory', ttlSeconds: -1 })).rejects.toThrow(/^options\.ttlSeconds must be in/);
    await expect(IngestIndex.open({ store: 'memory', namespaces: { 'a b': {} } })).rejects.toThrow(/is not a valid namespace/);
    await expect(IngestIndex.open({ store: 'memory', hashing: 'md5' as never })).rejects.toThrow(/^options\.hashing/);
    // Deprecated: only 'native'; the JS baseline moved to the benchmarks.
    await expect(IngestIndex.open({ store: 'memory', hashing: 'js' as never })).rejects.toThrow(
      /^options\.hashing must be 'native' \(the pure-JS baseline moved/,
    );
    await (await IngestIndex.open({ store: 'memory', hashing: 'native' })).close();
    await expect(
      IngestIndex.open({ store: 'memory', maxBatchItems: 2 }).then((i) => i.ingest('n', [{ content: 'a' }, { content: 'b' }, { content: 'c' }])),
    ).rejects.toThrow(/^items has 3 items, more than the limit of 2/);
  });
});

describe('SQLite store durability', () => {
  it('keeps every entry across close and reopen of the same file', async () => {
    const spec = sqliteSpec();
    const items = Array.from({ length: 500 }, (_, i) => ({ id: `k${i}`, content: `content ${i}`, metadata: { i } }));
    const first = await IngestIndex.open({ store: spec });
    expect((await first.ingest('ns', items)).every((r) => r.status === 'new')).toBe(true);
    await first.close();
    const second = await IngestIndex.open({ store: spec });
    const again = await second.ingest(
      'ns',
      items.map((item) => ({ ...item, id: `other-${item.id}` })),
    );
    expect(again.every((r, i) => r.status === 'duplicate' && r.duplicateOf === `k${i}`)).toBe(true);
    expect((second.store as SqliteStore).count('ns')).toBe(500);
    await second.close();
  });
});

describe('SQLite store: schema, options, worker thread', () => {
  it('opens in a process run with --input-type=module (its workers do not inherit the flag)', () => {
    const path = join(tmp.dir, 'input-type.sqlite');
    const module = pathToFileURL(join(ROOT, 'dist', 'ingest', 'index.js')).href;
    const script = `const { IngestIndex } = await import(${JSON.stringify(module)});
const index = await IngestIndex.open({ store: ${JSON.stringify(`sqlite:${path}`)} });
const [a, b] = await index.ingest('ns', [{ id: 'a', content: 'same' }, { id: 'b', content: 'same' }]);
await index.close();
console.log(a.status, b.status);`;
    for (const env of [undefined, { ...process.env, NODE_OPTIONS: '--input-type=module' }]) {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env });
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe('new duplicate\n');
    }
    // The flag from NODE_OPTIONS alone (a script given with -e is then a module).
    const viaEnv = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '--input-type=module' } });
    expect(viaEnv.stderr).toBe('');
    expect(viaEnv.stdout).toBe('new duplicate\n');
  });

  it('upgrades a schema 1 file (hex digests) in place, keeping every entry', async () => {
    const path = join(tmp.dir, 'v1.sqlite');
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    old.exec(`
      CREATE TABLE ctxdedup_ingest (namespace TEXT NOT NULL, sha256 TEXT NOT NULL, id TEXT NOT NULL, created_ms INTEGER NOT NULL,
        expires_ms INTEGER, metadata TEXT, PRIMARY KEY (namespace, sha256)) WITHOUT ROWID;
      CREATE INDEX ctxdedup_ingest_expiry ON ctxdedup_ingest (expires_ms) WHERE expires_ms IS NOT NULL;
      PRAGMA user_version = 1;
    `);
    const insert = old.prepare('INSERT INTO ctxdedup_ingest VALUES (?, ?, ?, ?, ?, ?)');
    for (let i = 0; i < 50; i++) insert.run('ns', sha256(`old ${i}`), `old-${i}`, 1, null, JSON.stringify({ i }));
    old.close();

    const index = await IngestIndex.open({ store: `sqlite:${path}` });
    const again = await index.ingest(
      'ns',
      Array.from({ length: 51 }, (_, i) => ({ id: `new-${i}`, content: `old ${i}` })),
    );
    expect(again.slice(0, 50).every((r, i) => r.status === 'duplicate' && r.duplicateOf === `old-${i}`)).toBe(true);
    expect(again[50]!.status).toBe('new');
    expect((index.store as SqliteStore).count('ns')).toBe(51);
    await index.close();
    const check = new Database(path, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    expect(check.prepare('SELECT DISTINCT typeof(sha256) AS t, length(sha256) AS n FROM ctxdedup_ingest').all()).toEqual([{ t: 'blob', n: 32 }]);
    expect(check.prepare('SELECT metadata FROM ctxdedup_ingest WHERE id = ?').get('old-7')).toEqual({ metadata: '{"i":7}' });
    check.close();
  });

  it('refuses a file with a newer schema, and bad SQLite options', async () => {
    const path = join(tmp.dir, 'future.sqlite');
    const db = new Database(path);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION + 1}`);
    db.close();
    await expect(IngestIndex.open({ store: `sqlite:${path}` })).rejects.toThrow(/has ingest schema 3, newer than this version supports \(2\)/);
    await expect(IngestIndex.open({ store: sqliteSpec(), sqlite: { synchronous: 'off' as never } })).rejects.toThrow(
      new TypeError(`options.sqlite.synchronous must be 'full' or 'normal', got a string`),
    );
    await expect(IngestIndex.open({ store: sqliteSpec(), sqlite: { busyTimeoutMs: -1 } })).rejects.toThrow(/^options\.sqlite\.busyTimeoutMs/);
  });

  it('open errors name the file and keep the driver error as the cause', async () => {
    const garbage = join(tmp.dir, 'garbage.sqlite');
    writeFileSync(garbage, 'not a database '.repeat(100));
    const cases: [string, RegExp][] = [
      [tmp.dir, /unable to open database file/],
      [join(tmp.dir, 'missing', 'index.sqlite'), /directory does not exist/],
      [garbage, /file is not a database/],
    ];
    for (const [path, driverMessage] of cases) {
      const error = await IngestIndex.open({ store: `sqlite:${path}` }).then(
        () => expect.fail(`opened ${path}`),
        (e: unknown) => e as Error,
      );
      expect(error).toBeInstanceOf(Error);
      expect(error.message).toContain(`cannot open the SQLite ingest store ${JSON.stringify(path)}`);
      expect(error.message).toMatch(driverMessage);
      expect(error.cause).toBeInstanceOf(Error);
      expect((error.cause as Error).message).toMatch(driverMessage);
    }
    for (const path of [undefined, null, '']) {
      expect(() => new SqliteStore(path as unknown as string)).toThrow(TypeError);
      expect(() => new SqliteStore(path as unknown as string)).toThrow(/^path must be a file path, got /);
    }
    await expect(IngestIndex.open({ store: 'sqlite::memory:' })).rejects.toThrow(/^path must be a file: an in-memory database/);
  });

  it('takes synchronous=normal, answers claims posted before close, then refuses more', async () => {
    const index = await IngestIndex.open({ store: sqliteSpec(), sqlite: { synchronous: 'normal' } });
    const store = index.store as SqliteStore;
    expect(store.synchronous).toBe('normal');
    const claims = Array.from({ length: 20 }, (_, b) => store.claim('c', [{ sha256: sha256(`c${b % 10}`), id: `id${b}` }], { nowMs: 1 }));
    const closed = store.close();
    const owners = await Promise.all(claims);
    await closed;
    // The first ten claimed their content; the next ten found it (one transaction or several, in order).
    expect(owners.flat()).toEqual([...Array.from({ length: 10 }, () => null), ...Array.from({ length: 10 }, (_, b) => `id${b}`)]);
    await expect(store.claim('c', [{ sha256: sha256('x'), id: 'x' }], { nowMs: 1 })).rejects.toThrow(/closed/);
  });
});

describe.skipIf(!redisAvailable())('IngestIndex on a real Redis', () => {
  const redis = useRedis();

  it('reports new / duplicate / retry like the local stores', async () => {
    const index = await IngestIndex.open({ store: redis.url });
    expect(
      statuses(
        await index.ingest('r1', [
          { id: 'a', content: 'x' },
          { id: 'b', content: 'x' },
          { id: 'c', content: 'y' },
        ]),
      ),
    ).toEqual(['new', 'dup:a', 'new']);
    expect(
      statuses(
        await index.ingest('r1', [
          { id: 'a', content: 'x' },
          { id: 'd', content: 'y' },
        ]),
      ),
    ).toEqual(['new', 'dup:c']);
    await index.close();
  });

  it('two indexes racing on the same contents give exactly one new per content', async () => {
    const [a, b] = await Promise.all([IngestIndex.open({ store: redis.url }), IngestIndex.open({ store: redis.url })]);
    const contents = Array.from({ length: 200 }, (_, i) => `shared ${i}`);
    const batches = (who: string): { id: string; content: string }[][] =>
      Array.from({ length: 10 }, (_, j) => contents.slice(j * 20, j * 20 + 20).map((content, k) => ({ id: `${who}-${j}-${k}`, content })));
    const results = (
      await Promise.all([...batches('a').map((batch) => a.ingest('race', batch)), ...batches('b').map((batch) => b.ingest('race', batch))])
    ).flat();
    const newPerContent = new Map<string, number>();
    for (const r of results) if (r.status === 'new') newPerContent.set(r.sha256, (newPerContent.get(r.sha256) ?? 0) + 1);
    expect(newPerContent.size).toBe(200);
    expect([...newPerContent.values()].every((n) => n === 1)).toBe(true);
    await Promise.all([a.close(), b.close()]);
  });

  it('expires entries with the namespace TTL (Redis PX)', async () => {
    const index = await IngestIndex.open({ store: redis.url, namespaces: { ttl: { ttlSeconds: 0.3 } } });
    await index.ingest('ttl', [{ id: 'a', content: 'soon gone' }]);
    expect(statuses(await index.ingest('ttl', [{ id: 'b', content: 'soon gone' }]))).toEqual(['dup:a']);
    await new Promise((r) => setTimeout(r, 450));
    expect(statuses(await index.ingest('ttl', [{ id: 'b', content: 'soon gone' }]))).toEqual(['new']);
    await index.close();
  });

  it('fails clearly when Redis is unreachable', async () => {
    await expect(IngestIndex.open({ store: 'redis://127.0.0.1:1' })).rejects.toThrow(/cannot connect to redis:\/\/127\.0\.0\.1:1/);
  });
});
