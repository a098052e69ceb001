/**
 * `ctxdedup serve`: an HTTP front for the ingestion index and the message stage (Fastify).
 *
 * Routes:
 * - `POST /v1/namespaces/:ns/items`: a JSON array of items (or `{ "items": [...] }`), or NDJSON
 *   (`Content-Type: application/x-ndjson`, one item per line). Responds
 *   `{ results: IngestResult[], new, duplicate, nearDuplicate }` (`duplicate` counts both kinds,
 *   `nearDuplicate` the near ones). A malformed batch is a 400 naming the item (and the line for
 *   NDJSON) and nothing of it is recorded.
 * - `POST /v1/messages/dedupe`: `{ messages, options? }` through {@link dedupeMessagesAsync},
 *   statelessly.
 * - `GET /healthz` (never authenticated), `GET /metrics` (Prometheus text, by prom-client).
 *
 * With a token, every route but `/healthz` needs `Authorization: Bearer <token>` (401 otherwise).
 * Without one, the server listens only on a loopback address unless `allowUnauthenticated` is set.
 * Bodies over `maxBody` bytes get 413; a body that is not valid UTF-8 gets 400 naming the item (and
 * the NDJSON line): it is never decoded with replacement characters. A request whose headers take
 * longer than `headersTimeoutMs`, or that is not complete (headers and body) within
 * `bodyTimeoutMs`, gets 408 and its connection is closed. Errors are `{ error, code }` JSON.
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIPv4 } from 'node:net';
import type { default as Fastify, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type * as PromClient from 'prom-client';
import { aliased, describe, expectKnownKeys, expectObject, expectOptions, show } from '../validation.js';
import { requirePeer } from '../optional.js';
import {
  DEFAULT_STORE,
  IngestIndex,
  type Hashing,
  type IngestItem,
  type IngestResult,
  type NamespaceOptions,
  type NearDuplicateOptions,
  type SqliteStoreOptions,
  type SqliteSynchronous,
} from '../ingest/index.js';
import { dedupeMessagesAsyncCounted, type DedupeMessagesOptions, type Message } from '../stages/messages.js';
import { loadTokenizer } from '../tokens.js';
import { ServerMetrics } from './metrics.js';

export type { ServerMetrics };
import { decodeStrict, firstInvalidUtf8, invalidUtf8Message, jsonPathAt } from './utf8.js';

/** Options of {@link startServer}. */
export interface ServerOptions {
  /** Interface to listen on. Default `127.0.0.1` (loopback only). */
  host?: string;
  /** TCP port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Store spec (`memory`, `sqlite:<path>`, `redis://host:port`) or an open index. Default `sqlite:./ctxdedup-ingest.sqlite`. */
  store?: string | IngestIndex;
  /**
   * Bearer token; when set, every route but `/healthz` requires it. Printable ASCII, not empty, no
   * leading or trailing whitespace (anything else could never be presented in a header).
   */
  token?: string;
  /**
   * Without a `token`, the server refuses a `host` that is not a loopback address (`127.0.0.0/8`,
   * `::1`, `localhost`) unless this is `true`. Default false.
   */
  allowUnauthenticated?: boolean;
  /**
   * A request must arrive in full (headers and body) within this many milliseconds of its first
   * byte, or it gets 408 and its connection is closed. Default 30 000.
   */
  bodyTimeoutMs?: number;
  /**
   * The headers of a request must arrive within this many milliseconds of its first byte (408
   * otherwise). At most `bodyTimeoutMs`. Default 10 000 (or `bodyTimeoutMs` if smaller).
   */
  headersTimeoutMs?: number;
  /** Largest accepted request body in bytes. Default 16 MiB. */
  maxBody?: number;
  /** Default TTL of every namespace, in seconds. */
  ttlSeconds?: number;
  /** @deprecated Batches are always hashed natively; only `'native'` is accepted (the pure-JS baseline moved to bench/). */
  hashing?: Hashing;
  /**
   * Settings of the SQLite store, as {@link IngestIndex.open} takes them: `synchronous: 'full'`
   * (default; an acknowledged item survives power loss) or `'normal'` (it survives process
   * crashes), `busyTimeoutMs`.
   */
  sqlite?: SqliteStoreOptions;
  /** @deprecated Use `sqlite: { synchronous }` (the option name `IngestIndex.open` takes; both given must be equal). */
  sqliteSynchronous?: SqliteSynchronous;
  /** Near-duplicate mode for every namespace (see {@link NamespaceOptions.nearDuplicates}). Default off. */
  nearDuplicates?: NearDuplicateOptions | boolean;
  /** Per-namespace settings (TTL, near-duplicate mode); they override the defaults above. */
  namespaces?: Record<string, NamespaceOptions>;
  /** Log requests to stdout as JSON (pino). Default false. */
  logger?: boolean;
}

/** JSON bytes of one decision and its marker besides their ids (an upper estimate). */
const DECISION_BYTES = 250;

/**
 * How many times `maxBody` the decisions of one answer may take. A full request of duplicates at
 * the default `minChars` needs about twice; only tiny duplicates with long ids get past four.
 */
const ANSWER_OVERHEAD_RATIO = 4;

/** Longest message id `POST /v1/messages/dedupe` takes (UTF-16 units). */
export const MAX_MESSAGE_ID_UNITS = 256;

/** A listening server. */
export interface RunningServer {
  /** Base URL, e.g. `http://127.0.0.1:8787`. */
  url: string;
  port: number;
  app: FastifyInstance;
  index: IngestIndex;
  metrics: ServerMetrics;
  /**
   * Graceful stop: refuse new connections (503 on kept-alive ones), let in-flight batches finish,
   * then close the index (and its store). Idempotent. A connection still open `bodyTimeoutMs`
   * after the call (a client stalled in its upload: Node stops enforcing request timeouts once the
   * server closes) is closed then, so `close()` always finishes; its request was never answered,
   * so nothing it sent was acknowledged.
   */
  close(): Promise<void>;
}

/** Default port of `ctxdedup serve`. */
export const DEFAULT_PORT = 8787;
/** Default body limit (16 MiB). */
export const DEFAULT_MAX_BODY = 16 * 1024 * 1024;
/** Default time for a whole request, headers and body (30 s). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
/** Default time for the headers of a request (10 s). */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** Largest timeout accepted (about 24.8 days, the largest timer delay). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;
/**
 * Longest route parameter in characters. Larger than any valid namespace (128 characters, even
 * percent-encoded), so a too-long namespace gets the index's 400 naming it, not the router's 414.
 */
const MAX_PARAM_LENGTH = 16 * 1024;

/** Whether `host` is a loopback address: `127.0.0.0/8`, `::1` or `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1' || (isIPv4(h) && h.startsWith('127.'));
}

/**
 * Why `token` cannot be used as a bearer token, or `undefined` if it can: it must be non-empty,
 * printable ASCII, with no leading or trailing whitespace.
 */
export function tokenProblem(token: string): string | undefined {
  if (token.trim() === '') return token === '' ? 'is empty' : 'is only whitespace';
  if (token !== token.trim()) return 'starts or ends with whitespace (it could never match an Authorization header)';
  if (!/^[\x20-\x7e]+$/.test(token)) return 'must be printable ASCII (it could never match an Authorization header)';
  return undefined;
}

const NDJSON_TYPES = ['application/x-ndjson', 'application/ndjson', 'application/jsonl', 'application/x-jsonlines'];

/** An NDJSON body: the items and the 1-based line each came from. */
interface NdjsonBody {
  ndjson: true;
  items: unknown[];
  lines: number[];
}

class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Whether `value` holds, at any depth, a key `__proto__`, or a key `constructor` whose value has a `prototype` key. */
function hasForbiddenKey(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null) continue;
    for (const key of Object.keys(v)) {
      const child = (v as Record<string, unknown>)[key];
      if (key === '__proto__') return true;
      if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return true;
      stack.push(child);
    }
  }
  return false;
}

function parseNdjson(text: string): NdjsonBody {
  const items: unknown[] = [];
  const lines: number[] = [];
  const rows = text.split('\n');
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!.endsWith('\r') ? rows[i]!.slice(0, -1) : rows[i]!;
    if (row.trim() === '') continue;
    let item: unknown;
    try {
      item = JSON.parse(row);
    } catch (error) {
      throw new HttpError(400, 'INVALID_NDJSON', `line ${i + 1} is not valid JSON: ${(error as Error).message}`);
    }
    // The JSON route's rule (Fastify refuses these keys there): checked only where they can be.
    if ((row.includes('__proto__') || row.includes('constructor')) && hasForbiddenKey(item)) {
      throw new HttpError(400, 'FORBIDDEN_KEY', `line ${i + 1} has a key named "__proto__" (or "constructor" holding "prototype"): such keys are refused`);
    }
    items.push(item);
    lines.push(i + 1);
  }
  return { ndjson: true, items, lines };
}

/**
 * Parses an NDJSON body decoded strictly. Invalid UTF-8 is a 400 naming the item and line, unless
 * an earlier line is already malformed (that one is named: errors come in body order).
 */
function parseNdjsonBytes(bytes: Buffer): NdjsonBody {
  const text = decodeStrict(bytes);
  if (text !== undefined) return parseNdjson(text);
  const bad = firstInvalidUtf8(bytes);
  const lineStart = bytes.lastIndexOf(0x0a, bad) + 1; // 0x0A never occurs inside a UTF-8 sequence
  let lineEnd = bytes.indexOf(0x0a, bad);
  if (lineEnd < 0) lineEnd = bytes.length;
  // The lines before are valid UTF-8: parse them first, so an earlier error wins and items are counted.
  const before = parseNdjson(bytes.subarray(0, lineStart).toString('utf8'));
  let line = 1;
  for (let i = 0; i < lineStart; i++) if (bytes[i] === 0x0a) line++;
  // The line's own path: `[2]` for a root array, `content` for a root object's key, `body` for the root.
  const location = jsonPathAt(bytes, bad, '', lineStart, lineEnd);
  const item = `items[${before.items.length}] (line ${line})`;
  const path = location.path === 'body' ? item : location.path.startsWith('[') ? `${item}${location.path}` : `${item}.${location.path}`;
  throw new HttpError(400, 'INVALID_UTF8', invalidUtf8Message({ path, inKey: location.inKey }, `byte ${bad - lineStart + 1} of the line`));
}

/** Decodes a JSON body strictly: invalid UTF-8 is a 400 naming the JSON path of the bad string. */
function decodeJsonBytes(bytes: Buffer, arrayRoot: string): string {
  const text = decodeStrict(bytes);
  if (text !== undefined) return text;
  const bad = firstInvalidUtf8(bytes);
  throw new HttpError(400, 'INVALID_UTF8', invalidUtf8Message(jsonPathAt(bytes, bad, arrayRoot), `byte ${bad + 1} of the body`));
}

function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Names the NDJSON line of an `items[i]` error: `items[2] (line 3).content must be a string`. */
function withLine(message: string, lines: number[]): string {
  return message.replace(/^items\[(\d+)\]/, (whole, index: string) => {
    const line = lines[Number(index)];
    return line === undefined ? whole : `${whole} (line ${line})`;
  });
}

function isValidationError(error: unknown): boolean {
  return error instanceof TypeError || error instanceof RangeError;
}

/** Whether `error` is V8's "Maximum call stack size exceeded". */
function isStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && error.message === 'Maximum call stack size exceeded';
}

/** Whether `text` is JSON (for an error message only). */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The option names {@link startServer} takes. */
const SERVER_OPTIONS = [
  'host',
  'port',
  'store',
  'token',
  'allowUnauthenticated',
  'bodyTimeoutMs',
  'headersTimeoutMs',
  'maxBody',
  'ttlSeconds',
  'hashing',
  'sqlite',
  'sqliteSynchronous',
  'nearDuplicates',
  'namespaces',
  'logger',
] as const satisfies readonly (keyof ServerOptions)[];

/** The `sqlite` option for {@link IngestIndex.open}, with the deprecated `sqliteSynchronous` folded in. */
function sqliteOption(options: ServerOptions): { sqlite?: SqliteStoreOptions } {
  const { sqlite, sqliteSynchronous: legacy } = options;
  if (legacy === undefined) return sqlite === undefined ? {} : { sqlite };
  if (sqlite === undefined) return { sqlite: { synchronous: legacy } };
  // IngestIndex.open validates the rest (an object, known keys, the values).
  expectObject(sqlite as unknown, 'options.sqlite');
  const synchronous = aliased(sqlite.synchronous, 'options.sqlite.synchronous', legacy, 'options.sqliteSynchronous');
  return { sqlite: { ...sqlite, ...(synchronous === undefined ? {} : { synchronous }) } };
}

/**
 * Starts the server and resolves once it listens, with the o200k_base vocabulary loaded (block
 * dedup counts tokens; loading it takes about 0.05 s, which the first request would pay otherwise).
 * @throws TypeError / RangeError for bad options; Error if the store cannot be opened or the port is taken,
 *   or if the optional packages fastify and prom-client (or the store's: better-sqlite3, ioredis) are not installed.
 */
export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  expectOptions(options);
  // A misspelled `token` must not start a server without authentication.
  expectKnownKeys(options as Record<string, unknown>, 'options', SERVER_OPTIONS);
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? DEFAULT_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`options.port must be an integer in [0, 65535], got ${show(port)}`);
  const maxBody = options.maxBody ?? DEFAULT_MAX_BODY;
  if (!Number.isInteger(maxBody) || maxBody < 1) throw new RangeError(`options.maxBody must be a positive integer (bytes), got ${show(maxBody)}`);
  if (typeof host !== 'string') throw new TypeError(`options.host must be a non-empty string, got ${describe(host)}`);
  if (host.trim() === '') throw new TypeError('options.host is empty');
  if (options.token !== undefined) {
    if (typeof options.token !== 'string') throw new TypeError(`options.token must be a non-empty string, got ${describe(options.token)}`);
    const problem = tokenProblem(options.token);
    if (problem !== undefined) throw new TypeError(`options.token ${problem}`);
  }
  const allowUnauthenticated = options.allowUnauthenticated ?? false;
  if (typeof allowUnauthenticated !== 'boolean') {
    throw new TypeError(`options.allowUnauthenticated must be a boolean, got ${describe(allowUnauthenticated)}`);
  }
  if (options.token === undefined && !allowUnauthenticated && !isLoopbackHost(host)) {
    throw new RangeError(
      `options.host ${show(host)} is not a loopback address and options.token is not set: anyone who can reach it could write; set options.token, or options.allowUnauthenticated: true`,
    );
  }
  const bodyTimeoutMs = options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
  if (!Number.isInteger(bodyTimeoutMs) || bodyTimeoutMs < 1 || bodyTimeoutMs > MAX_TIMEOUT_MS) {
    throw new RangeError(`options.bodyTimeoutMs must be an integer in [1, ${MAX_TIMEOUT_MS}] (milliseconds), got ${String(bodyTimeoutMs)}`);
  }
  const headersTimeoutMs = options.headersTimeoutMs ?? Math.min(DEFAULT_HEADERS_TIMEOUT_MS, bodyTimeoutMs);
  if (!Number.isInteger(headersTimeoutMs) || headersTimeoutMs < 1 || headersTimeoutMs > bodyTimeoutMs) {
    throw new RangeError(
      `options.headersTimeoutMs must be an integer in [1, options.bodyTimeoutMs = ${bodyTimeoutMs}] (milliseconds), got ${String(headersTimeoutMs)}`,
    );
  }
  const expected = options.token === undefined ? undefined : tokenDigest(options.token);
  // Before the index opens: a missing Fastify or prom-client must not leave a store open.
  const fastify = requirePeer<typeof Fastify>('fastify', 'the server (ctxdedup/server, ctxdedup serve)');
  const prom = requirePeer<typeof PromClient>('prom-client', 'the server (ctxdedup/server, ctxdedup serve)');

  const index =
    options.store instanceof IngestIndex
      ? options.store
      : await IngestIndex.open({
          store: options.store ?? DEFAULT_STORE,
          ...(options.ttlSeconds === undefined ? {} : { ttlSeconds: options.ttlSeconds }),
          ...(options.hashing === undefined ? {} : { hashing: options.hashing }),
          ...sqliteOption(options),
          ...(options.nearDuplicates === undefined ? {} : { nearDuplicates: options.nearDuplicates }),
          ...(options.namespaces === undefined ? {} : { namespaces: options.namespaces }),
        });
  const metrics = new ServerMetrics(prom);
  const app = fastify({
    logger: options.logger ?? false,
    bodyLimit: maxBody,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Node answers 408 and closes the connection; it checks its connections at this interval.
    requestTimeout: bodyTimeoutMs,
    http: {
      requestTimeout: bodyTimeoutMs,
      headersTimeout: headersTimeoutMs,
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(headersTimeoutMs / 4))),
    },
  });

  // Bodies are read as bytes and decoded strictly (never with U+FFFD replacements). Plain text is
  // not accepted (415): no route takes it.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const jsonParser = app.getDefaultJsonParser(app.initialConfig.onProtoPoisoning ?? 'error', app.initialConfig.onConstructorPoisoning ?? 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: maxBody }, (request, body, done) => {
    let text: string;
    try {
      text = decodeJsonBytes(body as Buffer, request.routeOptions.url === '/v1/messages/dedupe' ? 'messages' : 'items');
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    jsonParser(request, text, (error, value) => {
      // Fastify's parser refuses prototype-poisoning keys with its "not valid JSON" error: say why.
      if (error !== null && /"(__proto__|constructor)"\s*:/.test(text) && isJson(text)) {
        const refused = Object.assign(new Error('Body has a key named "__proto__" (or "constructor" holding "prototype"): such keys are refused'), {
          statusCode: 400,
          code: 'FORBIDDEN_KEY',
        });
        done(refused, undefined);
        return;
      }
      done(error, value);
    });
  });
  app.addContentTypeParser(NDJSON_TYPES, { parseAs: 'buffer', bodyLimit: maxBody }, (_request, body, done) => {
    try {
      done(null, parseNdjsonBytes(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    // The matched route, not the raw URL: `/healthz?probe=1` is /healthz too.
    if (expected === undefined || request.routeOptions.url === '/healthz') return;
    const header = request.headers.authorization;
    // The scheme is case-insensitive (RFC 9110, 11.1).
    const given = typeof header === 'string' && /^bearer /i.test(header) ? header.slice(7) : undefined;
    if (given === undefined || !timingSafeEqual(tokenDigest(given), expected)) {
      reply.header('www-authenticate', 'Bearer realm="ctxdedup"');
      await reply.code(401).send({ error: given === undefined ? 'missing bearer token' : 'wrong bearer token', code: 'UNAUTHORIZED' });
    }
  });

  // Responses finished while closing end their connection, so close() need not wait for keep-alive.
  let draining = false;
  app.addHook('onSend', async (_request, reply, payload) => {
    if (draining) reply.header('connection', 'close');
    return payload;
  });

  app.addHook('onResponse', async (request: FastifyRequest, reply: FastifyReply) => {
    metrics.observeRequest(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000);
  });

  app.setErrorHandler((error: FastifyError | Error, _request, reply) => {
    // Fastify's own errors (some are RangeErrors, e.g. body too large) carry their status.
    const status = (error as FastifyError).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(status).send({ error: error.message, code: (error as FastifyError).code ?? 'BAD_REQUEST' });
    }
    if (isStackOverflow(error)) {
      // JSON.parse reads any depth; answering echoes the messages, and JSON.stringify recurses.
      return reply.code(400).send({
        error: 'body nests too deeply to be answered (the JSON serializer ran out of stack): flatten the values inside the messages',
        code: 'TOO_DEEP',
      });
    }
    if (isValidationError(error)) return reply.code(400).send({ error: error.message, code: 'INVALID_INPUT' });
    reply.log.error(error);
    return reply.code(500).send({ error: 'internal error', code: 'INTERNAL' });
  });

  app.setNotFoundHandler((request, reply) => reply.code(404).send({ error: `no route ${request.method} ${request.url.split('?')[0]}`, code: 'NOT_FOUND' }));

  app.get('/healthz', async () => ({ status: 'ok', store: index.store.kind }));

  app.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));

  app.post<{ Params: { ns: string } }>('/v1/namespaces/:ns/items', async (request, reply) => {
    const body: unknown = request.body;
    let items: unknown;
    let lines: number[] | undefined;
    if (body === undefined || body === null || body === '') {
      throw new HttpError(400, 'EMPTY_BODY', 'body is empty: send a JSON array of items, or NDJSON with one item per line');
    } else if (typeof body === 'object' && (body as NdjsonBody).ndjson === true && Array.isArray((body as NdjsonBody).items)) {
      ({ items, lines } = body as NdjsonBody);
      if ((items as unknown[]).length === 0) throw new HttpError(400, 'EMPTY_BODY', 'body has no NDJSON lines');
    } else if (Array.isArray(body)) {
      items = body;
    } else if (typeof body === 'object' && Array.isArray((body as { items?: unknown }).items)) {
      items = (body as { items: unknown[] }).items;
    } else {
      throw new HttpError(400, 'INVALID_INPUT', `body must be a JSON array of items or an object with an "items" array, got ${describe(body)}`);
    }
    let results: IngestResult[];
    try {
      results = await index.ingest(request.params.ns, items as IngestItem[]);
    } catch (error) {
      if (isValidationError(error)) {
        const message = (error as Error).message;
        throw new HttpError(400, 'INVALID_INPUT', lines ? withLine(message, lines) : message);
      }
      metrics.recordStoreError();
      request.log.error(error);
      return reply.code(503).send({ error: `store error, nothing recorded: ${(error as Error).message}`, code: 'STORE_ERROR' });
    }
    let fresh = 0;
    let near = 0;
    for (const r of results) {
      if (r.status === 'new') fresh++;
      else if (r.match === 'near') near++;
    }
    metrics.recordBatch(fresh, results.length - fresh, near);
    // `stats` has the message stage's names; the top-level counts are the deprecated 0.1 shape.
    const stats = { items: results.length, new: fresh, exactDuplicates: results.length - fresh - near, nearDuplicates: near };
    return { results, stats, new: fresh, duplicate: results.length - fresh, nearDuplicate: near };
  });

  app.post('/v1/messages/dedupe', async (request) => {
    const body: unknown = request.body;
    if (body === undefined || body === null || (body as NdjsonBody).ndjson === true) {
      throw new HttpError(400, 'INVALID_INPUT', 'body must be a JSON object { "messages": [...], "options"?: {...} }');
    }
    const { messages, options } = Array.isArray(body) ? { messages: body, options: undefined } : (body as { messages?: unknown; options?: unknown });
    // Every replaced message and its decision name the kept one by id: a long id, repeated in the
    // response once per copy, would make a small request a huge response.
    if (Array.isArray(messages)) {
      for (let i = 0; i < messages.length; i++) {
        const id: unknown = (messages[i] as { id?: unknown } | null)?.id;
        if (typeof id === 'string' && id.length > MAX_MESSAGE_ID_UNITS) {
          throw new HttpError(
            400,
            'INVALID_INPUT',
            `messages[${i}].id is ${id.length} characters long; the server takes ids of at most ${MAX_MESSAGE_ID_UNITS}`,
          );
        }
      }
    }
    // The response carries every decision: block runs are counted in the pass (cheaper than on read).
    const result = await dedupeMessagesAsyncCounted(messages as Message[], options as DedupeMessagesOptions | undefined, true);
    // The messages and the originals in `verbatim` are bounded by the request; each replacement
    // adds a decision and a marker naming two ids, which tiny duplicates (`minChars: 0`) can make
    // many times the request. Refused before the answer is built.
    const overhead = result.decisions.reduce((sum, d) => sum + DECISION_BYTES + 3 * (d.id.length + d.duplicateOfId.length), 0);
    if (overhead > ANSWER_OVERHEAD_RATIO * maxBody) {
      throw new HttpError(
        400,
        'ANSWER_TOO_LARGE',
        `the answer would carry about ${Math.ceil(overhead / 2 ** 20)} MiB of decisions for ${result.decisions.length} replacements, more than ${ANSWER_OVERHEAD_RATIO} times the largest request (${maxBody} bytes): send fewer messages per request, or raise options.minChars`,
      );
    }
    metrics.recordMessagesDedupe();
    return result;
  });

  try {
    await loadTokenizer();
    await app.listen({ host, port });
  } catch (error) {
    await index.close();
    throw error;
  }
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shownHost}:${boundPort}`,
    port: boundPort,
    app,
    index,
    metrics,
    close() {
      closing ??= (async () => {
        draining = true;
        const cap = setTimeout(() => app.server.closeAllConnections(), bodyTimeoutMs);
        try {
          await app.close();
        } finally {
          clearTimeout(cap);
        }
        await index.close();
      })();
      return closing;
    },
  };
}
