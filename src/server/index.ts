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
 * - `GET /healthz` (never authenticated), `GET /metrics` (Prometheus text).
 *
 * With a token, every route but `/healthz` needs `Authorization: Bearer <token>` (401 otherwise).
 * Bodies over `maxBody` bytes get 413. Errors are `{ error, code }` JSON.
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { describe, show } from '../errors.js';
import {
  DEFAULT_STORE,
  IngestIndex,
  type Hashing,
  type IngestItem,
  type IngestResult,
  type NamespaceOptions,
  type NearDuplicateOptions,
  type SqliteSynchronous,
} from '../ingest/index.js';
import { dedupeMessagesAsync, type DedupeMessagesOptions, type Message } from '../stages/messages.js';
import { ServerMetrics } from './metrics.js';

/** Options of {@link startServer}. */
export interface ServerOptions {
  /** Interface to listen on. Default `127.0.0.1` (loopback only). */
  host?: string;
  /** TCP port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Store spec (`memory`, `sqlite:<path>`, `redis://host:port`) or an open index. Default `sqlite:./ctxdedup-ingest.sqlite`. */
  store?: string | IngestIndex;
  /** Bearer token; when set, every route but `/healthz` requires it. */
  token?: string;
  /** Largest accepted request body in bytes. Default 16 MiB. */
  maxBody?: number;
  /** Default TTL of every namespace, in seconds. */
  ttlSeconds?: number;
  /** Batch hashing: `native` (default) or `js` (the benchmark baseline). */
  hashing?: Hashing;
  /** SQLite durability: `full` (default; survives power loss) or `normal` (survives process crashes). */
  sqliteSynchronous?: SqliteSynchronous;
  /** Near-duplicate mode for every namespace (see {@link NamespaceOptions.nearDuplicates}). Default off. */
  nearDuplicates?: NearDuplicateOptions | boolean;
  /** Per-namespace settings (TTL, near-duplicate mode); they override the defaults above. */
  namespaces?: Record<string, NamespaceOptions>;
  /** Log requests to stdout as JSON (pino). Default false. */
  logger?: boolean;
}

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
   * then close the index (and its store). Idempotent.
   */
  close(): Promise<void>;
}

/** Default port of `ctxdedup serve`. */
export const DEFAULT_PORT = 8787;
/** Default body limit (16 MiB). */
export const DEFAULT_MAX_BODY = 16 * 1024 * 1024;

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

function parseNdjson(text: string): NdjsonBody {
  const items: unknown[] = [];
  const lines: number[] = [];
  const rows = text.split('\n');
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!.endsWith('\r') ? rows[i]!.slice(0, -1) : rows[i]!;
    if (row.trim() === '') continue;
    try {
      items.push(JSON.parse(row));
    } catch (error) {
      throw new HttpError(400, 'INVALID_NDJSON', `line ${i + 1} is not valid JSON: ${(error as Error).message}`);
    }
    lines.push(i + 1);
  }
  return { ndjson: true, items, lines };
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

/**
 * Starts the server and resolves once it listens.
 * @throws TypeError / RangeError for bad options; Error if the store cannot be opened or the port is taken.
 */
export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? DEFAULT_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`options.port must be an integer in [0, 65535], got ${show(port)}`);
  const maxBody = options.maxBody ?? DEFAULT_MAX_BODY;
  if (!Number.isInteger(maxBody) || maxBody < 1) throw new RangeError(`options.maxBody must be a positive integer (bytes), got ${show(maxBody)}`);
  if (options.token !== undefined && (typeof options.token !== 'string' || options.token === '')) {
    throw new TypeError(`options.token must be a non-empty string, got ${describe(options.token)}`);
  }
  const expected = options.token === undefined ? undefined : tokenDigest(options.token);

  const index =
    options.store instanceof IngestIndex
      ? options.store
      : await IngestIndex.open({
          store: options.store ?? DEFAULT_STORE,
          ...(options.ttlSeconds === undefined ? {} : { ttlSeconds: options.ttlSeconds }),
          ...(options.hashing === undefined ? {} : { hashing: options.hashing }),
          ...(options.sqliteSynchronous === undefined ? {} : { sqlite: { synchronous: options.sqliteSynchronous } }),
          ...(options.nearDuplicates === undefined ? {} : { nearDuplicates: options.nearDuplicates }),
          ...(options.namespaces === undefined ? {} : { namespaces: options.namespaces }),
        });
  const metrics = new ServerMetrics();
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: maxBody,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  });

  app.addContentTypeParser(NDJSON_TYPES, { parseAs: 'string', bodyLimit: maxBody }, (_request, body, done) => {
    try {
      done(null, parseNdjson(body as string));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (expected === undefined || request.url === '/healthz') return;
    const header = request.headers.authorization;
    const given = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : undefined;
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
    if (isValidationError(error)) return reply.code(400).send({ error: error.message, code: 'INVALID_INPUT' });
    reply.log.error(error);
    return reply.code(500).send({ error: 'internal error', code: 'INTERNAL' });
  });

  app.setNotFoundHandler((request, reply) => reply.code(404).send({ error: `no route ${request.method} ${request.url.split('?')[0]}`, code: 'NOT_FOUND' }));

  app.get('/healthz', async () => ({ status: 'ok', store: index.store.kind }));

  app.get('/metrics', async (_request, reply) => reply.type('text/plain; version=0.0.4; charset=utf-8').send(metrics.render()));

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
      metrics.storeErrors.value++;
      request.log.error(error);
      return reply.code(503).send({ error: `store error, nothing recorded: ${(error as Error).message}`, code: 'STORE_ERROR' });
    }
    let fresh = 0;
    let near = 0;
    for (const r of results) {
      if (r.status === 'new') fresh++;
      else if (r.match === 'near') near++;
    }
    metrics.itemsNew.value += fresh;
    metrics.itemsDuplicate.value += results.length - fresh;
    metrics.itemsNearDuplicate.value += near;
    metrics.batches.value++;
    return { results, new: fresh, duplicate: results.length - fresh, nearDuplicate: near };
  });

  app.post('/v1/messages/dedupe', async (request) => {
    const body: unknown = request.body;
    if (body === undefined || body === null || (body as NdjsonBody).ndjson === true) {
      throw new HttpError(400, 'INVALID_INPUT', 'body must be a JSON object { "messages": [...], "options"?: {...} }');
    }
    const { messages, options } = Array.isArray(body) ? { messages: body, options: undefined } : (body as { messages?: unknown; options?: unknown });
    const result = await dedupeMessagesAsync(messages as Message[], options as DedupeMessagesOptions | undefined);
    metrics.messagesDeduped.value++;
    return result;
  });

  try {
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
        await app.close();
        await index.close();
      })();
      return closing;
    },
  };
}
