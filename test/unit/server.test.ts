import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { sha256 } from '../../src/identity.js';
import { startServer, type RunningServer } from '../../src/server/index.js';
import { parseServeArgs, parseSize } from '../../src/server/main.js';
import { tempDir } from '../support/ingest-services.js';

const TOKEN = 'test-token-123';
const auth = { authorization: `Bearer ${TOKEN}` };
const json = { 'content-type': 'application/json', ...auth };
const ndjson = { 'content-type': 'application/x-ndjson', ...auth };

let server: RunningServer;
const tmp = tempDir('ctxdedup-server-');

beforeAll(async () => {
  server = await startServer({ port: 0, store: `sqlite:${join(tmp.dir, 'server.sqlite')}`, token: TOKEN, maxBody: 64 * 1024 });
});
afterAll(async () => {
  await server?.close();
  tmp.remove();
});

async function post(path: string, body: string | undefined, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.url}${path}`, { method: 'POST', headers, ...(body === undefined ? {} : { body }) });
  const text = await response.text();
  return { status: response.status, body: text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : text };
}

describe('ctxdedup serve routes (in-process, real HTTP on 127.0.0.1)', () => {
  it('listens on loopback and answers /healthz without a token', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(`${server.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', store: 'sqlite' });
  });

  it('ingests a JSON array, then reports duplicates', async () => {
    const first = await post(
      '/v1/namespaces/docs/items',
      JSON.stringify([
        { id: 'a', content: 'hello' },
        { id: 'b', content: 'hello' },
      ]),
      json,
    );
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      results: [
        { status: 'new', id: 'a', sha256: sha256('hello') },
        { status: 'duplicate', match: 'exact', id: 'b', duplicateOf: 'a', sha256: sha256('hello') },
      ],
      stats: { items: 2, new: 1, exactDuplicates: 1, nearDuplicates: 0 },
      new: 1,
      duplicate: 1,
      nearDuplicate: 0,
    });
    const second = await post(
      '/v1/namespaces/docs/items',
      JSON.stringify({
        items: [
          { id: 'a', content: 'hello' },
          { id: 'c', content: 'hello' },
        ],
      }),
      json,
    );
    expect(second.body.results.map((r: { status: string }) => r.status)).toEqual(['new', 'duplicate']);
  });

  it('ingests NDJSON, skipping blank lines and CRLF endings', async () => {
    const body = '{"id":"n1","content":"nd one"}\r\n\n{"id":"n2","content":"nd one"}\n{"id":"n3","content":"nd two"}\n';
    const response = await post('/v1/namespaces/nd/items', body, ndjson);
    expect(response.status).toBe(200);
    expect(response.body.results.map((r: { status: string }) => r.status)).toEqual(['new', 'duplicate', 'new']);
  });

  it('rejects bad input of every kind with a 400 naming the item or line, recording nothing', async () => {
    const cases: [string | undefined, Record<string, string>, number, RegExp][] = [
      [undefined, auth, 400, /body is empty/],
      ['', json, 400, /Body cannot be empty/],
      ['', ndjson, 400, /body has no NDJSON lines/],
      ['{"items": 5}', json, 400, /body must be a JSON array of items or an object with an "items" array, got an object/],
      ['"text"', json, 400, /got a string/],
      ['[{"id":"x1","content":"fresh 1"}, {"id":"x2","content":42}]', json, 400, /^items\[1\]\.content must be a string, got a number$/],
      ['[{"id":"x1","content":"fresh 1"}, "nope"]', json, 400, /^items\[1\] must be an object, got a string$/],
      ['[{"id":"x1","content":"fresh 1"}, {"id":7,"content":"x"}]', json, 400, /^items\[1\]\.id must be a string, got a number$/],
      ['[{"id":"x1","content":"fresh 1"}, {"content":"\\ud800"}]', json, 400, /^items\[1\]\.content contains a lone surrogate/],
      ['[{"id":"x1","content":"fresh 1"}, {"content":"x","metadata":"m"}]', json, 400, /^items\[1\]\.metadata must be an object, got a string$/],
      ['[{"id":"x1","content":"fresh 1"}', json, 400, /JSON/],
      ['{"id":"x1","content":"fresh 1"}\n{"id":"x2","content":"fresh 2"\n', ndjson, 400, /^line 2 is not valid JSON/],
      ['{"id":"x1","content":"fresh 1"}\n\n[1]\n', ndjson, 400, /^items\[1\] \(line 3\) must be an object, got an array$/],
      ['{"id":"x1","content":"fresh 1"}\n{"id":"x2"}\n', ndjson, 400, /^items\[1\] \(line 2\)\.content must be a string, got undefined$/],
      ['{"__proto__":{"x":1}}', json, 400, /key named "__proto__"/],
    ];
    for (const [body, headers, status, message] of cases) {
      const response = await post('/v1/namespaces/bad/items', body, headers);
      expect({ body, status: response.status }).toEqual({ body, status });
      expect(response.body.error).toMatch(message);
    }
    // Not half-applied: the valid first items of the rejected batches were never recorded.
    const clean = await post('/v1/namespaces/bad/items', JSON.stringify([{ id: 'y', content: 'fresh 1' }]), json);
    expect(clean.body.results[0]).toMatchObject({ status: 'new', id: 'y' });
    const badNamespace = await post('/v1/namespaces/bad%20ns/items', '[]', json);
    expect(badNamespace.status).toBe(400);
    expect(badNamespace.body.error).toMatch(/^namespace "bad ns" is not valid/);
  });

  it('answers 413 beyond --max-body, 415 for unknown types, 404 for unknown routes', async () => {
    const big = JSON.stringify([{ content: 'x'.repeat(70 * 1024) }]);
    expect((await post('/v1/namespaces/big/items', big, json)).status).toBe(413);
    expect((await post('/v1/namespaces/big/items', big, ndjson)).status).toBe(413);
    expect((await post('/v1/namespaces/big/items', '<a/>', { ...auth, 'content-type': 'application/xml' })).status).toBe(415);
    const missing = await fetch(`${server.url}/v2/nothing`, { headers: auth });
    expect(missing.status).toBe(404);
  });

  it('answers 401 without the token or with a wrong one, on every route but /healthz', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: TOKEN }, { authorization: `Basic ${TOKEN}` }] as Record<string, string>[]) {
      const ingest = await post('/v1/namespaces/docs/items', '[]', { 'content-type': 'application/json', ...headers });
      expect(ingest.status).toBe(401);
      expect((await fetch(`${server.url}/metrics`, { headers })).status).toBe(401);
      expect((await post('/v1/messages/dedupe', '{"messages":[]}', { 'content-type': 'application/json', ...headers })).status).toBe(401);
    }
    const ok = await fetch(`${server.url}/v1/namespaces/docs/items`, { method: 'POST', headers: json, body: '[]' });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('www-authenticate')).toBeNull();
    // /healthz with a query string is still /healthz; the scheme is case-insensitive.
    expect((await fetch(`${server.url}/healthz?probe=1`)).status).toBe(200);
    const lower = { ...json, authorization: (json as Record<string, string>)['authorization']?.replace('Bearer', 'bearer') ?? '' };
    expect((await fetch(`${server.url}/v1/namespaces/docs/items`, { method: 'POST', headers: lower, body: '[]' })).status).toBe(200);
  });

  it('runs the message stage statelessly and rejects bad conversations with 400', async () => {
    const content = 'the same long tool output\n'.repeat(20);
    const messages = [
      { id: 'm1', role: 'tool', content },
      { id: 'm2', role: 'user', content: 'next' },
      { id: 'm3', role: 'tool', content },
    ];
    const response = await post('/v1/messages/dedupe', JSON.stringify({ messages, options: { keep: 'earliest' } }), json);
    expect(response.status).toBe(200);
    expect(response.body.stats.exactDuplicates).toBe(1);
    expect(response.body.verbatim.m3.content).toBe(content);
    const bad = await post('/v1/messages/dedupe', JSON.stringify({ messages: [{ id: 1 }] }), json);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^messages\[0\]/);
    const badOption = await post('/v1/messages/dedupe', JSON.stringify({ messages, options: { threshold: 2 } }), json);
    expect(badOption.status).toBe(400);
    expect(badOption.body.error).toMatch(/threshold/);
    // A long id would be repeated once per replaced copy in the response (a 1 MiB id and a few
    // thousand short copies made a 420 MB answer): ids are capped.
    const long = 'k'.repeat(257);
    const copies = [{ id: long, role: 'user', content: 'abcd' }, ...Array.from({ length: 3 }, (_, i) => ({ id: `c${i}`, role: 'user', content: 'abcd' }))];
    const tooLong = await post('/v1/messages/dedupe', JSON.stringify({ messages: copies, options: { minChars: 0, reference: { exact: '.' } } }), json);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toEqual({ error: 'messages[0].id is 257 characters long; the server takes ids of at most 256', code: 'INVALID_INPUT' });
    const atLimit = await post(
      '/v1/messages/dedupe',
      JSON.stringify({ messages: [{ ...copies[0], id: long.slice(1) }, ...copies.slice(1)], options: { minChars: 0 } }),
      json,
    );
    expect(atLimit.status).toBe(200);
    // Tiny duplicates with a long keeper id: each replacement adds a decision and a marker naming
    // it, up to four times --max-body of them (here 64 KiB: 256 KiB); past that, refused.
    const keeper = { id: 'k'.repeat(256), role: 'user', content: 'ab' };
    const tiny = [keeper, ...Array.from({ length: 1000 }, (_, i) => ({ id: `${i}`, role: 'user', content: 'ab' }))];
    const amplified = await post('/v1/messages/dedupe', JSON.stringify({ messages: tiny, options: { minChars: 0, reference: { exact: '' } } }), json);
    expect(amplified.status).toBe(400);
    expect(amplified.body.code).toBe('ANSWER_TOO_LARGE');
    expect(amplified.body.error).toMatch(
      /^the answer would carry about 1 MiB of decisions for 1000 replacements, more than 4 times the largest request \(65536 bytes\)/,
    );
    // A request as large, full of ordinary duplicates, is answered.
    const body = 'a repeated tool output line\n'.repeat(8);
    const ordinary = Array.from({ length: 200 }, (_, i) => ({ id: `o${i}`, role: 'tool', content: body }));
    const answered = await post('/v1/messages/dedupe', JSON.stringify({ messages: ordinary }), json);
    expect(answered.status).toBe(200);
    expect(answered.body.stats.exactDuplicates).toBe(199);
  });

  it('exposes Prometheus metrics: items new vs duplicate, latency histogram, store errors', async () => {
    const response = await fetch(`${server.url}/metrics`, { headers: auth });
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    expect(text).toMatch(/^ctxdedup_ingest_items_total\{status="new"\} [1-9]\d*$/m);
    expect(text).toMatch(/^ctxdedup_ingest_items_total\{status="duplicate"\} [1-9]\d*$/m);
    expect(text).toMatch(/^ctxdedup_store_errors_total 0$/m);
    // prom-client prints a bucket's `le` before the series' labels (label order carries no meaning).
    expect(text).toMatch(/^ctxdedup_http_request_duration_seconds_bucket\{le="\+Inf",route="\/v1\/namespaces\/:ns\/items"\} \d+$/m);
    expect(text).toMatch(/^ctxdedup_http_requests_total\{route="\/v1\/namespaces\/:ns\/items",method="POST",status="400"\} \d+$/m);
    expect(text).toMatch(/# TYPE ctxdedup_http_request_duration_seconds histogram/);
  });
});

describe('metrics', () => {
  /** The samples of a /metrics text, by name and labels as printed (`name{a="b"}`). */
  async function scrape(url: string): Promise<{ contentType: string | null; samples: Map<string, number> }> {
    const response = await fetch(`${url}/metrics`);
    expect(response.status).toBe(200);
    const samples = new Map<string, number>();
    for (const line of (await response.text()).split('\n')) {
      const match = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
      if (match) samples.set(match[1]!, Number(match[2]));
    }
    return { contentType: response.headers.get('content-type'), samples };
  }

  it('move after requests, per server: each server has its own registry, not the global one', async () => {
    const [one, two] = await Promise.all([startServer({ port: 0, store: 'memory' }), startServer({ port: 0, store: 'memory' })]);
    try {
      const before = await scrape(one.url);
      expect(before.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
      for (const name of [
        'ctxdedup_ingest_items_total{status="new"}',
        'ctxdedup_ingest_items_total{status="duplicate"}',
        'ctxdedup_ingest_near_duplicates_total',
        'ctxdedup_ingest_batches_total',
        'ctxdedup_store_errors_total',
        'ctxdedup_messages_dedupe_requests_total',
      ]) {
        expect(before.samples.get(name), name).toBe(0);
      }
      const send = (path: string, body: unknown): Promise<Response> =>
        fetch(`${one.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect((await send('/v1/namespaces/m/items', [{ content: 'a' }, { content: 'a' }, { content: 'b' }])).status).toBe(200);
      expect((await send('/v1/namespaces/m/items', [{ content: 'b' }])).status).toBe(200);
      expect((await send('/v1/namespaces/m/items', [{ content: 1 }])).status).toBe(400);
      expect((await send('/v1/messages/dedupe', { messages: [{ id: 'x', role: 'user', content: 'hi' }] })).status).toBe(200);
      const after = (await scrape(one.url)).samples;
      expect(after.get('ctxdedup_ingest_items_total{status="new"}')).toBe(2);
      expect(after.get('ctxdedup_ingest_items_total{status="duplicate"}')).toBe(2);
      expect(after.get('ctxdedup_ingest_batches_total')).toBe(2);
      expect(after.get('ctxdedup_messages_dedupe_requests_total')).toBe(1);
      const items = 'route="/v1/namespaces/:ns/items"';
      expect(after.get(`ctxdedup_http_requests_total{${items},method="POST",status="200"}`)).toBe(2);
      expect(after.get(`ctxdedup_http_requests_total{${items},method="POST",status="400"}`)).toBe(1);
      // The first scrape is counted too.
      expect(after.get('ctxdedup_http_requests_total{route="/metrics",method="GET",status="200"}')).toBe(1);
      expect(after.get(`ctxdedup_http_request_duration_seconds_count{${items}}`)).toBe(3);
      expect(after.get(`ctxdedup_http_request_duration_seconds_bucket{le="+Inf",${items}}`)).toBe(3);
      expect(after.get(`ctxdedup_http_request_duration_seconds_bucket{le="10",${items}}`)).toBe(3);
      // The other server counted nothing of it, and nothing went to prom-client's default registry.
      const other = (await scrape(two.url)).samples;
      expect(other.get('ctxdedup_ingest_items_total{status="new"}')).toBe(0);
      expect(other.get(`ctxdedup_http_request_duration_seconds_count{${items}}`)).toBeUndefined();
      const { register } = await import('prom-client');
      expect(await register.metrics()).not.toMatch(/ctxdedup_/);
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });
});

describe('sqlite option', () => {
  it("takes IngestIndex.open's `sqlite: { synchronous }`; `sqliteSynchronous` stays as a deprecated alias", async () => {
    const dir = tempDir('ctxdedup-sync-');
    const synchronousOf = (s: RunningServer): unknown => (s.index.store as unknown as { synchronous?: unknown }).synchronous;
    for (const options of [
      { sqlite: { synchronous: 'normal' as const } },
      { sqliteSynchronous: 'normal' as const },
      { sqlite: { synchronous: 'normal' as const }, sqliteSynchronous: 'normal' as const },
    ]) {
      const local = await startServer({ port: 0, store: `sqlite:${join(dir.dir, 'sync.sqlite')}`, ...options });
      try {
        expect(synchronousOf(local)).toBe('normal');
      } finally {
        await local.close();
      }
    }
    await expect(startServer({ port: 0, store: 'memory', sqlite: { synchronous: 'full' }, sqliteSynchronous: 'normal' })).rejects.toThrow(
      /options\.sqliteSynchronous is a deprecated alias of options\.sqlite\.synchronous and disagrees with it/,
    );
    await expect(startServer({ port: 0, store: 'memory', sqlite: { synchronus: 'full' } as never })).rejects.toThrow(
      /options\.sqlite\.synchronus is not an option here/,
    );
  });
});

describe('graceful close', () => {
  it('finishes an in-flight batch, then refuses new connections and closes the store', async () => {
    const dir = tempDir('ctxdedup-close-');
    const local = await startServer({ port: 0, store: `sqlite:${join(dir.dir, 'close.sqlite')}` });
    const items = Array.from({ length: 5000 }, (_, i) => ({ id: `g${i}`, content: `graceful ${i} ${'z'.repeat(200)}` }));
    let closed: Promise<void> | undefined;
    local.app.server.once('request', () => {
      closed = local.close();
    });
    const body = JSON.stringify(items);
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${local.url}/v1/namespaces/g/items`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(200);
    await closed;
    await expect(fetch(`${local.url}/healthz`)).rejects.toThrow();
    await expect(local.index.ingest('g', [])).rejects.toThrow(/closed/);
    dir.remove();
  });
});

describe('near-duplicate mode over HTTP', () => {
  it('reports near duplicates per namespace, with counts and a metric', async () => {
    const local = await startServer({ port: 0, store: 'memory', namespaces: { near: { nearDuplicates: { threshold: 0.8, window: 10 } } } });
    const doc = (edit?: number): string => Array.from({ length: 10 }, (_, i) => (i === edit ? 'changed' : `line ${i}`)).join('\n');
    const send = async (ns: string, items: unknown[]): Promise<any> => {
      const response = await fetch(`${local.url}/v1/namespaces/${ns}/items`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(items),
      });
      expect(response.status).toBe(200);
      return response.json();
    };
    const items = [
      { id: 'a', content: doc() },
      { id: 'b', content: doc(9) },
      { id: 'c', content: doc() },
    ];
    expect(await send('near', items)).toEqual({
      results: [
        { status: 'new', id: 'a', sha256: sha256(doc()) },
        { status: 'duplicate', match: 'near', id: 'b', duplicateOf: 'a', similarity: 9 / 11, sha256: sha256(doc(9)) },
        { status: 'duplicate', match: 'exact', id: 'c', duplicateOf: 'a', sha256: sha256(doc()) },
      ],
      stats: { items: 3, new: 1, exactDuplicates: 1, nearDuplicates: 1 },
      new: 1,
      duplicate: 2,
      nearDuplicate: 1,
    });
    expect((await send('plain', items)).stats.nearDuplicates).toBe(0);
    const metrics = await (await fetch(`${local.url}/metrics`)).text();
    expect(metrics).toMatch(/^ctxdedup_ingest_near_duplicates_total 1$/m);
    expect(metrics).toMatch(/^ctxdedup_ingest_items_total\{status="duplicate"\} 3$/m);
    await local.close();
  });
});

describe('serve flags', () => {
  it('parses --near-duplicates for every namespace or one, and --near-window', () => {
    expect(parseServeArgs(['--near-duplicates', '0.9'], {})).toMatchObject({ nearDuplicates: { threshold: 0.9 } });
    expect(parseServeArgs(['--near-duplicates', '1', '--near-window', '50'], {})).toMatchObject({ nearDuplicates: { threshold: 1, window: 50 } });
    const perNamespace = parseServeArgs(['--near-duplicates', 'docs=0.8', '--near-duplicates', 'chat=0.95'], {});
    expect(perNamespace).toMatchObject({ namespaces: { docs: { nearDuplicates: { threshold: 0.8 } }, chat: { nearDuplicates: { threshold: 0.95 } } } });
    expect(perNamespace).not.toHaveProperty('nearDuplicates');
    for (const bad of ['0', '1.5', 'x', 'docs=', 'docs=0', '']) {
      expect(() => parseServeArgs(['--near-duplicates', bad], {})).toThrow(/--near-duplicates needs a threshold in \(0, 1\]/);
    }
    expect(() => parseServeArgs(['--near-duplicates', '0.9', '--near-window', '0'], {})).toThrow(/--near-window must be a positive integer/);
    expect(() => parseServeArgs(['--near-window', '10'], {})).toThrow(/--near-window needs --near-duplicates/);
    expect(parseServeArgs(['--sqlite-sync', 'normal'], {})).toMatchObject({ sqlite: { synchronous: 'normal' } });
    expect(() => parseServeArgs(['--sqlite-sync', 'off'], {})).toThrow(/--sqlite-sync must be full or normal/);
  });

  it('parses sizes and flags, and rejects bad ones', () => {
    expect(parseSize('512kb')).toBe(512 * 1024);
    expect(parseSize('16mb')).toBe(16 * 1024 * 1024);
    expect(parseSize('100')).toBe(100);
    expect(() => parseSize('lots')).toThrow(/--max-body/);
    expect(parseServeArgs(['--port', '0', '--store', 'memory', '--token', 't', '--max-body', '1kb', '--ttl', '60'], {})).toMatchObject({
      port: 0,
      store: 'memory',
      token: 't',
      maxBody: 1024,
      ttlSeconds: 60,
    });
    expect(parseServeArgs([], { CTXDEDUP_TOKEN: 'env-token' })).toMatchObject({ token: 'env-token' });
    expect(() => parseServeArgs(['--port', 'x'], {})).toThrow(/--port/);
    expect(() => parseServeArgs(['--nope'], {})).toThrow(/nope/);
    expect(() => parseServeArgs(['--hashing', 'md5'], {})).toThrow(/--hashing/);
    expect(parseServeArgs(['--help'], {})).toBe('help');
  });

  it('--hashing is deprecated: native is the only mode, the JS baseline lives in the benchmarks', () => {
    expect(parseServeArgs(['--hashing', 'native'], {})).toMatchObject({ hashing: 'native' });
    expect(() => parseServeArgs(['--hashing', 'js'], {})).toThrow(
      /^--hashing must be native \(the pure-JS baseline moved to the benchmarks, bench\/reference\/hashing\.ts\), got "js"$/,
    );
  });
});
