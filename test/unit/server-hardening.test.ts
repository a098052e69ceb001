/**
 * `ctxdedup serve` hardening (issue 12, items 3, 4, 9): no silent "no authentication", strict UTF-8
 * bodies (never a false duplicate from U+FFFD), request timeouts against slow clients, and the
 * documented namespace length accepted by the router. Real servers on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { startServer, type RunningServer } from '../../src/server/index.js';
import { parseDuration, parseServeArgs } from '../../src/server/main.js';
import { decodeStrict, firstInvalidUtf8 } from '../../src/server/utf8.js';
import { ROOT, exited, startServerProcess } from '../support/ingest-services.js';

const bytes = (...parts: (string | number[])[]): Buffer => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));

let server: RunningServer;
beforeAll(async () => {
  // Short timeouts so the slow-client tests end quickly; everything else is unaffected by them.
  server = await startServer({ port: 0, store: 'memory', bodyTimeoutMs: 500, headersTimeoutMs: 300 });
});
afterAll(async () => {
  await server?.close();
});

async function post(path: string, body: Buffer | string, contentType = 'application/json'): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': contentType }, body });
  const text = await response.text();
  return { status: response.status, body: text.startsWith('{') ? JSON.parse(text) : text };
}

describe('item 3: a token is never silently empty; no token means loopback only', () => {
  it('parseServeArgs: an empty or whitespace token (flag or CTXDEDUP_TOKEN) is a usage error', () => {
    expect(() => parseServeArgs(['--token', ''], {})).toThrow(/^--token is empty: give a secret/);
    expect(() => parseServeArgs(['--token', ' \t '], {})).toThrow(/^--token is only whitespace/);
    expect(() => parseServeArgs(['--token', ' secret'], {})).toThrow(/^--token starts or ends with whitespace/);
    expect(() => parseServeArgs(['--token', 'sécret'], {})).toThrow(/^--token must be printable ASCII/);
    expect(() => parseServeArgs([], { CTXDEDUP_TOKEN: '' })).toThrow(/^CTXDEDUP_TOKEN is empty/);
    expect(parseServeArgs(['--token', 'secret'], { CTXDEDUP_TOKEN: '' })).toMatchObject({ token: 'secret' });
  });

  it('parseServeArgs: without a token only a loopback --host, unless --allow-unauthenticated', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost', 'LOCALHOST']) {
      expect(parseServeArgs(['--host', host], {})).toMatchObject({ host });
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.5', 'example.com', '127.0.0.1.example.com']) {
      expect(() => parseServeArgs(['--host', host], {})).toThrow(/is not a loopback address and no --token .*--allow-unauthenticated/);
    }
    expect(() => parseServeArgs(['--host', ''], {})).toThrow(/^--host is empty/);
    expect(parseServeArgs(['--host', '0.0.0.0', '--token', 't'], {})).toMatchObject({ host: '0.0.0.0', token: 't' });
    expect(parseServeArgs(['--host', '0.0.0.0'], { CTXDEDUP_TOKEN: 't' })).toMatchObject({ host: '0.0.0.0', token: 't' });
    expect(parseServeArgs(['--host', '0.0.0.0', '--allow-unauthenticated'], {})).toMatchObject({ host: '0.0.0.0', allowUnauthenticated: true });
  });

  it('startServer applies the same rules before opening anything', async () => {
    await expect(startServer({ port: 0, store: 'memory', token: '' })).rejects.toThrow(new TypeError('options.token is empty'));
    await expect(startServer({ port: 0, store: 'memory', token: '  ' })).rejects.toThrow(new TypeError('options.token is only whitespace'));
    await expect(startServer({ port: 0, store: 'memory', token: 'a\nb' })).rejects.toThrow(/^options\.token must be printable ASCII/);
    await expect(startServer({ port: 0, store: 'memory', token: 5 as unknown as string })).rejects.toThrow(
      /^options\.token must be a non-empty string, got a number$/,
    );
    await expect(startServer({ port: 0, store: 'memory', host: '' })).rejects.toThrow(new TypeError('options.host is empty'));
    await expect(startServer({ port: 0, store: 'memory', host: '0.0.0.0' })).rejects.toThrow(
      /^options\.host "0\.0\.0\.0" is not a loopback address and options\.token is not set.*options\.allowUnauthenticated: true$/,
    );
    await expect(startServer({ port: 0, store: 'memory', host: '0.0.0.0', allowUnauthenticated: 1 as unknown as boolean })).rejects.toThrow(
      /^options\.allowUnauthenticated must be a boolean, got a number$/,
    );
  });

  it('`serve --token ""` exits 2 without listening; `serve` without a token logs one line saying so; timeout flags apply', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'server', 'main.ts'), '--port', '0', '--store', 'memory', '--token', ''], {
      cwd: ROOT,
      env: { ...process.env, CTXDEDUP_TOKEN: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString('utf8')));
    // Bounded: the original code starts listening here, so kill it if it is still running.
    const guard = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited(child);
    clearTimeout(guard);
    expect(child.exitCode).toBe(2);
    expect(output).toMatch(/^ctxdedup serve: --token is empty: give a secret/);
    expect(output).not.toMatch(/listening/);

    const open = await startServerProcess(['--store', 'memory', '--body-timeout', '600ms', '--headers-timeout', '300ms']);
    try {
      const lines = open
        .output()
        .split('\n')
        .filter((line) => /not authenticated/.test(line));
      expect(lines).toEqual(['ctxdedup serve: no --token: requests are not authenticated (listening on loopback 127.0.0.1 only)']);
      // The timeout flags reach the server: a trickling client is cut off.
      const slow = await slowClient(Number(new URL(open.url).port), 'POST /v1/namespaces/slow/items HTTP/1.1\r\nHost: 127.0.0.1\r\n', 'X-Slow: abc\r\n');
      expect(slow.closed).toBe(true);
      expect(slow.response).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    } finally {
      expect(await open.stop()).toBe(0);
    }
  }, 60_000);
});

describe('item 4: bodies are decoded strictly; invalid UTF-8 is a 400 naming the item', () => {
  it('caf\\xe9 and caf\\xe8 are rejected (not a false duplicate); nothing is recorded', async () => {
    for (const byte of [0xe9, 0xe8]) {
      const response = await post('/v1/namespaces/utf/items', bytes('[{"id":"a","content":"caf', [byte], '"}]'));
      expect(response).toEqual({ status: 400, body: { error: 'items[0].content is not valid UTF-8 (byte 26 of the body)', code: 'INVALID_UTF8' } });
    }
    // Nothing was recorded: the real texts are both new, and distinct.
    const ok = await post(
      '/v1/namespaces/utf/items',
      JSON.stringify([
        { id: 'a', content: 'café' },
        { id: 'b', content: 'cafè' },
      ]),
    );
    expect(ok.body.results.map((r: { status: string }) => r.status)).toEqual(['new', 'new']);
    // A real U+FFFD (valid UTF-8: EF BF BD) is content like any other.
    const replacement = await post(
      '/v1/namespaces/utf/items',
      bytes('[{"id":"r1","content":"caf', [0xef, 0xbf, 0xbd], '"},{"id":"r2","content":"caf\\ufffd"}]'),
    );
    expect(replacement.body.results.map((r: { status: string }) => r.status)).toEqual(['new', 'duplicate']);
  });

  it('names the JSON path of the bad string in every body shape, and rejects every kind of invalid sequence', async () => {
    const cases: [Buffer, string][] = [
      [bytes('{"items":[{"content":"ok"},{"content":"x","metadata":{"tags":["a","', [0xff], '"]}}]}'), 'items[1].metadata.tags[1] is not valid UTF-8'],
      [bytes('[{"content":"ok","', [0xc0, 0xaf], '":1}]'), 'items[0] has a property name that is not valid UTF-8'],
      [bytes('[{"content":"x\\"', [0xed, 0xa0, 0x80], '"}]'), 'items[0].content is not valid UTF-8'], // an encoded surrogate
      [bytes('[{"content":"', [0xf4, 0x90, 0x80, 0x80], '"}]'), 'items[0].content is not valid UTF-8'], // above U+10FFFF
      [bytes('[{"content":"', [0xe0, 0x80, 0xaf], '"}]'), 'items[0].content is not valid UTF-8'], // overlong
      [bytes('[{"content":"x', [0xe2, 0x82]), 'items[0].content is not valid UTF-8'], // truncated at the end
      [bytes('"caf', [0xe9], '"'), 'body is not valid UTF-8'],
    ];
    for (const [body, message] of cases) {
      const response = await post('/v1/namespaces/utf2/items', body);
      expect({ message, status: response.status, code: response.body.code }).toEqual({ message, status: 400, code: 'INVALID_UTF8' });
      expect(response.body.error.startsWith(`${message} (byte `)).toBe(true);
    }
  });

  it('NDJSON: names the item and the line; an earlier malformed line is reported first', async () => {
    const bad = await post('/v1/namespaces/utf3/items', bytes('{"content":"a"}\r\n\n{"content":"b', [0xe9], '"}\n{"content":"c"}\n'), 'application/x-ndjson');
    expect(bad).toEqual({ status: 400, body: { error: 'items[1] (line 3).content is not valid UTF-8 (byte 14 of the line)', code: 'INVALID_UTF8' } });
    const whole = await post('/v1/namespaces/utf3/items', bytes('{"content":"a"}\n', [0x80], '\n'), 'application/x-ndjson');
    expect(whole.body.error).toBe('items[1] (line 2) is not valid UTF-8 (byte 1 of the line)');
    const earlier = await post('/v1/namespaces/utf3/items', bytes('{"content":"a"\n{"content":"', [0xe9], '"}\n'), 'application/x-ndjson');
    expect(earlier.status).toBe(400);
    expect(earlier.body.error).toMatch(/^line 1 is not valid JSON/);
    const ok = await post('/v1/namespaces/utf3/items', '{"id":"a","content":"a"}\n{"id":"b","content":"b\u00e9"}\n', 'application/x-ndjson');
    expect(ok.body.results.map((r: { status: string }) => r.status)).toEqual(['new', 'new']);
  });

  it('the message stage route is strict too (messages[i] named); plain text is 415', async () => {
    const content = 'the same long tool output\n'.repeat(10);
    const body = (byte: number): Buffer =>
      bytes(
        `{"messages":[{"id":"m0","role":"tool","content":${JSON.stringify(content)}},{"id":"m1","role":"tool","content":"${content.replace(/\n/g, '\\n')}`,
        [byte],
        '"}]}',
      );
    const response = await post('/v1/messages/dedupe', body(0xe9));
    expect(response).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/^messages\[1\]\.content is not valid UTF-8 \(byte \d+ of the body\)$/), code: 'INVALID_UTF8' },
    });
    const array = await post('/v1/messages/dedupe', bytes('[{"id":"m0","role":"user","content":"', [0xfe], '"}]'));
    expect(array.body.error).toMatch(/^messages\[0\]\.content is not valid UTF-8/);
    expect((await post('/v1/namespaces/utf4/items', '[{"content":"x"}]', 'text/plain')).status).toBe(415);
    expect((await post('/v1/messages/dedupe', '{"messages":[]}', 'text/plain; charset=utf-8')).status).toBe(415);
    // Prototype-poisoning keys are refused with a message that says so (not "not valid JSON").
    const poisoned = await post('/v1/messages/dedupe', '{"messages":[{"id":"a","content":"x","metadata":{"__proto__":{"polluted":1}}}]}');
    expect(poisoned.status).toBe(400);
    expect(poisoned.body).toEqual({ error: expect.stringMatching(/key named "__proto__"/), code: 'FORBIDDEN_KEY' });
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    // The NDJSON route refuses them too, naming the line, and records nothing.
    const ndjson = await post(
      '/v1/namespaces/proto/items',
      '{"id":"p0","content":"fine"}\n{"id":"p1","content":"x","metadata":{"a":{"__proto__":{"polluted":1}}}}\n',
      'application/x-ndjson',
    );
    expect(ndjson.status).toBe(400);
    expect(ndjson.body).toEqual({ error: expect.stringMatching(/^line 2 has a key named "__proto__"/), code: 'FORBIDDEN_KEY' });
    const ctor = await post('/v1/namespaces/proto/items', '{"id":"p2","content":"y","metadata":{"constructor":{"prototype":{}}}}\n', 'application/x-ndjson');
    expect(ctor.body.code).toBe('FORBIDDEN_KEY');
    const fine = await post('/v1/namespaces/proto/items', '{"id":"p0","content":"fine","metadata":{"constructor":"ok"}}\n', 'application/x-ndjson');
    expect(fine.status).toBe(200);
    expect(fine.body.results[0].status).toBe('new');
    // Any depth parses; a response echoing 50,000 nested arrays cannot be serialized: say so.
    const deep = `${'['.repeat(50_000)}"x"${']'.repeat(50_000)}`;
    const nested = await post('/v1/messages/dedupe', `{"messages":[{"id":"a","role":"user","content":"hi","metadata":${deep}}]}`);
    expect(nested).toEqual({ status: 400, body: { error: expect.stringMatching(/^body nests too deeply/), code: 'TOO_DEEP' } });
    expect((await post('/v1/messages/dedupe', '{"messages":[}')).body.code).toBe('FST_ERR_CTP_INVALID_JSON_BODY');
  });

  it('firstInvalidUtf8 agrees with the fatal TextDecoder on arbitrary bytes', () => {
    const byte = fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0x80, 0xbf, 0xc2, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0x9f, 0xa0, 0x90, 0x8f));
    fc.assert(
      fc.property(fc.array(byte, { maxLength: 24 }), (list) => {
        const buffer = Buffer.from(list);
        const at = firstInvalidUtf8(buffer);
        expect(at === -1).toBe(decodeStrict(buffer) !== undefined);
        if (at >= 0) {
          expect(decodeStrict(buffer.subarray(0, at))).toBeDefined();
          // The decoder fails on the sequence starting there, even with nothing after it.
          expect(decodeStrict(buffer.subarray(0, Math.min(at + 4, buffer.length)))).toBeUndefined();
        }
      }),
      { numRuns: 3000, seed: 12 },
    );
  });
});

/** A raw client that sends `head`, then one byte of `trickle` every 50 ms; resolves when the server closes. */
function slowClient(port: number, head: string, trickle: string): Promise<{ response: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let response = '';
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const finish = (closed: boolean): void => {
      clearInterval(timer);
      clearTimeout(guard);
      socket.destroy();
      resolve({ response, closed });
    };
    // Bounds the test, not a timing assertion: without a timeout the server would wait for minutes.
    const guard = setTimeout(() => finish(false), 15_000);
    socket.on('data', (chunk: Buffer) => (response += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => finish(true));
    socket.on('connect', () => {
      socket.write(head);
      timer = setInterval(() => {
        if (!socket.writable) return;
        socket.write(trickle[sent % trickle.length]!);
        sent++;
      }, 50);
    });
  });
}

describe('item 9: request timeouts and the namespace length', () => {
  it('a client trickling its body gets 408 and its connection is closed', async () => {
    const head = 'POST /v1/namespaces/slow/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[{"content":"';
    const { response, closed } = await slowClient(server.port, head, 'x');
    expect(closed).toBe(true);
    expect(response).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    // Nothing of it was recorded, and the server still serves.
    const ok = await post('/v1/namespaces/slow/items', JSON.stringify([{ content: 'x' }]));
    expect(ok.body.results[0].status).toBe('new');
  }, 30_000);

  it('close() finishes while a client is stalled in its upload (its connection is closed after bodyTimeoutMs)', async () => {
    const local = await startServer({ port: 0, store: 'memory', bodyTimeoutMs: 300, headersTimeoutMs: 200 });
    const socket = connect(local.port, '127.0.0.1');
    const closedSocket = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.on('connect', () => resolve()));
    socket.write('POST /v1/namespaces/slow/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[');
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Bounded by the test's own timeout: before the fix close() never settled.
    await local.close();
    await closedSocket;
  }, 15_000);

  it('a client trickling its headers gets 408 and its connection is closed', async () => {
    const { response, closed } = await slowClient(
      server.port,
      'POST /v1/namespaces/slow/items HTTP/1.1\r\nHost: 127.0.0.1\r\n',
      'X-Slow: abcdefghijklmnopqrstuvwxyz\r\n',
    );
    expect(closed).toBe(true);
    expect(response).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  }, 30_000);

  it('timeouts: defaults 30 s / 10 s, options and flags validated', async () => {
    const defaults = await startServer({ port: 0, store: 'memory' });
    try {
      expect([defaults.app.server.requestTimeout, defaults.app.server.headersTimeout]).toEqual([30_000, 10_000]);
    } finally {
      await defaults.close();
    }
    await expect(startServer({ port: 0, store: 'memory', bodyTimeoutMs: 0 })).rejects.toThrow(
      /^options\.bodyTimeoutMs must be an integer in \[1, 2147483647\] \(milliseconds\), got 0$/,
    );
    await expect(startServer({ port: 0, store: 'memory', bodyTimeoutMs: Number.NaN })).rejects.toThrow(/^options\.bodyTimeoutMs .* got NaN$/);
    await expect(startServer({ port: 0, store: 'memory', bodyTimeoutMs: 1000, headersTimeoutMs: 2000 })).rejects.toThrow(
      /^options\.headersTimeoutMs must be an integer in \[1, options\.bodyTimeoutMs = 1000\] \(milliseconds\), got 2000$/,
    );
    expect(parseServeArgs(['--body-timeout', '45s', '--headers-timeout', '500ms'], {})).toMatchObject({ bodyTimeoutMs: 45_000, headersTimeoutMs: 500 });
    expect(parseServeArgs(['--body-timeout', '2m'], {})).toMatchObject({ bodyTimeoutMs: 120_000 });
    expect(parseDuration('--body-timeout', '1.5')).toBe(1500);
    expect(() => parseServeArgs(['--body-timeout', 'soon'], {})).toThrow(/^--body-timeout must be a duration like 30s, 500ms or 2m, got "soon"$/);
    expect(() => parseServeArgs(['--body-timeout', '0s'], {})).toThrow(/^--body-timeout must be between 1ms and/);
    expect(() => parseServeArgs(['--headers-timeout', '40s'], {})).toThrow(/^--headers-timeout \(40000ms\) must not exceed --body-timeout \(30000ms\)/);
  });

  it('namespaces of up to 128 characters are accepted (plain or percent-encoded); 129 is a 400 naming it', async () => {
    for (const ns of ['n'.repeat(101), 'n'.repeat(128), '%6E'.repeat(128)]) {
      const response = await post(`/v1/namespaces/${ns}/items`, JSON.stringify([{ content: `in ${ns.length}` }]));
      expect({ length: ns.length, status: response.status }).toEqual({ length: ns.length, status: 200 });
    }
    for (const ns of ['n'.repeat(129), '%6E'.repeat(129), 'n'.repeat(5000)]) {
      const response = await post(`/v1/namespaces/${ns}/items`, JSON.stringify([{ content: 'x' }]));
      expect({ length: ns.length, status: response.status }).toEqual({ length: ns.length, status: 400 });
      expect(response.body).toMatchObject({
        code: 'INVALID_INPUT',
        error: expect.stringMatching(/^namespace "n+" is not valid \(letters, digits, \. _ -; 1 to 128, not starting with \. _ -\)$/),
      });
    }
  });
});
