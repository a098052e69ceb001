/**
 * Entry of `ctxdedup serve`: parses the flags, starts the server, stops gracefully on SIGTERM /
 * SIGINT (stop accepting, finish in-flight batches, close the store).
 *
 * Run directly (`node dist/server/main.js --port 8787`) or through the CLI, which calls
 * {@link main} with the arguments after `serve`.
 * @module
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { setOwn } from '../validation.js';
import { cliMessage } from '../cli/errors.js';
import { DEFAULT_STORE } from '../ingest/index.js';
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_MAX_BODY,
  DEFAULT_PORT,
  MAX_TIMEOUT_MS,
  isLoopbackHost,
  startServer,
  tokenProblem,
  type RunningServer,
  type ServerOptions,
} from './index.js';

/** Usage text of `ctxdedup serve`. */
export const USAGE = `Usage: ctxdedup serve [options]

Incremental dedup index over HTTP.
  POST /v1/namespaces/:ns/items   JSON array of {id?, content, metadata?} or NDJSON
  POST /v1/messages/dedupe        {messages, options?}, stateless
  GET  /healthz                   no auth
  GET  /metrics                   Prometheus text

Options:
  --host <addr>        interface to listen on (default 127.0.0.1); without a token only a
                       loopback address (127.0.0.0/8, ::1, localhost) is accepted
  --port <n>           TCP port, 0 for any free one (default ${DEFAULT_PORT})
  --store <spec>       memory | sqlite:<path> | redis://host:port[/db] (default ${DEFAULT_STORE})
  --token <secret>     require "Authorization: Bearer <secret>" (or set CTXDEDUP_TOKEN); an empty
                       or whitespace-only token is an error, not "no authentication"
  --allow-unauthenticated
                       allow a non-loopback --host without a token (anyone who can reach it can write)
  --max-body <size>    largest request body, e.g. 1048576, 512kb, 16mb (default 16mb)
  --body-timeout <t>   a request (headers and body) must arrive within t, else 408 and the
                       connection is closed; e.g. 30s, 500ms, 2m (default ${DEFAULT_BODY_TIMEOUT_MS / 1000}s)
  --headers-timeout <t>
                       the headers must arrive within t, at most --body-timeout (default ${DEFAULT_HEADERS_TIMEOUT_MS / 1000}s)
  --ttl <seconds>      forget entries after this many seconds (default: never)
  --hashing native     deprecated: batches are always hashed natively (the pure-JS
                       baseline moved to the benchmarks)
  --sqlite-sync <mode> full (default: an acknowledged item survives power loss) |
                       normal (it survives process crashes, kill -9, but not power loss)
  --near-duplicates <t | ns=t>
                       also report near duplicates (line Jaccard >= t, in (0, 1]) of recent
                       new items: of every namespace (t), or of one (ns=t; repeatable)
  --near-window <n>    recent new items compared per namespace (default 1000)
  --log                log every request as JSON
  -h, --help           show this help
`;

/** Parses `16mb`, `512kb`, `1048576` into bytes. */
export function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(b|kb|k|mb|m|gb|g)?$/i.exec(text.trim());
  if (!match) throw new RangeError(`--max-body must be a size like 1048576, 512kb or 16mb, got ${JSON.stringify(text)}`);
  const unit = (match[2] ?? 'b').toLowerCase()[0]!;
  const factor = unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1;
  const bytes = Math.floor(Number(match[1]) * factor);
  if (bytes < 1) throw new RangeError(`--max-body must be at least 1 byte, got ${JSON.stringify(text)}`);
  return bytes;
}

/** Parses a duration flag (`30s`, `500ms`, `2m`; a bare number is seconds) into milliseconds. */
export function parseDuration(flag: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m)?$/i.exec(text.trim());
  if (!match) throw new RangeError(`${flag} must be a duration like 30s, 500ms or 2m, got ${JSON.stringify(text)}`);
  const unit = (match[2] ?? 's').toLowerCase();
  const ms = Math.round(Number(match[1]) * (unit === 'ms' ? 1 : unit === 's' ? 1000 : 60_000));
  if (ms < 1 || ms > MAX_TIMEOUT_MS) throw new RangeError(`${flag} must be between 1ms and ${MAX_TIMEOUT_MS}ms, got ${JSON.stringify(text)}`);
  return ms;
}

/** Turns `serve` arguments into {@link ServerOptions}. @throws TypeError / RangeError on bad flags. */
export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ServerOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      store: { type: 'string' },
      token: { type: 'string' },
      'allow-unauthenticated': { type: 'boolean' },
      'max-body': { type: 'string' },
      'body-timeout': { type: 'string' },
      'headers-timeout': { type: 'string' },
      ttl: { type: 'string' },
      hashing: { type: 'string' },
      'sqlite-sync': { type: 'string' },
      'near-duplicates': { type: 'string', multiple: true },
      'near-window': { type: 'string' },
      log: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const options: ServerOptions = { logger: values.log ?? false };
  if (values.host !== undefined) {
    if (values.host.trim() === '') throw new TypeError('--host is empty: give an address such as 127.0.0.1');
    options.host = values.host;
  }
  if (values.port !== undefined) {
    const port = Number(values.port);
    if (!/^\d+$/.test(values.port) || port > 65535) throw new RangeError(`--port must be an integer in [0, 65535], got ${JSON.stringify(values.port)}`);
    options.port = port;
  }
  options.store = values.store ?? env['CTXDEDUP_STORE'] ?? DEFAULT_STORE;
  // An empty token is a mistake (`--token "$TOKEN"` with $TOKEN unset), never "no authentication".
  const token = values.token ?? env['CTXDEDUP_TOKEN'];
  if (token !== undefined) {
    const problem = tokenProblem(token);
    const source = values.token !== undefined ? '--token' : 'CTXDEDUP_TOKEN';
    if (problem !== undefined) throw new TypeError(`${source} ${problem}: give a secret, or leave it out to serve unauthenticated on loopback only`);
    options.token = token;
  }
  if (values['allow-unauthenticated']) options.allowUnauthenticated = true;
  const host = options.host ?? '127.0.0.1';
  if (options.token === undefined && !options.allowUnauthenticated && !isLoopbackHost(host)) {
    throw new TypeError(
      `--host ${host} is not a loopback address and no --token (or CTXDEDUP_TOKEN) is given: anyone who can reach it could write; give a token, or --allow-unauthenticated`,
    );
  }
  options.maxBody = values['max-body'] === undefined ? DEFAULT_MAX_BODY : parseSize(values['max-body']);
  if (values['body-timeout'] !== undefined) options.bodyTimeoutMs = parseDuration('--body-timeout', values['body-timeout']);
  if (values['headers-timeout'] !== undefined) {
    options.headersTimeoutMs = parseDuration('--headers-timeout', values['headers-timeout']);
    const body = options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
    if (options.headersTimeoutMs > body) {
      throw new RangeError(
        `--headers-timeout (${options.headersTimeoutMs}ms) must not exceed --body-timeout (${body}ms): the body timeout covers the headers too`,
      );
    }
  }
  if (values.ttl !== undefined) {
    const ttl = Number(values.ttl);
    if (!Number.isFinite(ttl) || ttl <= 0) throw new RangeError(`--ttl must be a positive number of seconds, got ${JSON.stringify(values.ttl)}`);
    options.ttlSeconds = ttl;
  }
  if (values.hashing !== undefined) {
    // Deprecated: `native` is the only mode. `js` was the benchmarks' baseline (now bench/reference).
    const moved = values.hashing === 'js' ? ' (the pure-JS baseline moved to the benchmarks, bench/reference/hashing.ts)' : '';
    if (values.hashing !== 'native') throw new TypeError(`--hashing must be native${moved}, got ${JSON.stringify(values.hashing)}`);
    options.hashing = values.hashing;
  }
  const sync = values['sqlite-sync'];
  if (sync !== undefined) {
    if (sync !== 'full' && sync !== 'normal') throw new TypeError(`--sqlite-sync must be full or normal, got ${JSON.stringify(sync)}`);
    options.sqlite = { synchronous: sync };
  }
  const window = values['near-window'];
  let nearWindow: number | undefined;
  if (window !== undefined) {
    nearWindow = Number(window);
    if (!/^\d+$/.test(window) || nearWindow < 1) throw new RangeError(`--near-window must be a positive integer, got ${JSON.stringify(window)}`);
  }
  const near = values['near-duplicates'] ?? [];
  if (near.length === 0 && nearWindow !== undefined) throw new TypeError('--near-window needs --near-duplicates');
  for (const spec of near) {
    const eq = spec.lastIndexOf('=');
    const text = eq < 0 ? spec : spec.slice(eq + 1);
    const threshold = Number(text);
    if (text.trim() === '' || !(threshold > 0 && threshold <= 1)) {
      throw new RangeError(`--near-duplicates needs a threshold in (0, 1] (or <namespace>=<threshold>), got ${JSON.stringify(spec)}`);
    }
    const settings = { threshold, ...(nearWindow === undefined ? {} : { window: nearWindow }) };
    if (eq < 0) {
      options.nearDuplicates = settings;
    } else {
      options.namespaces ??= {};
      // An own property even for a name like __proto__ (which the index then rejects by name).
      setOwn(options.namespaces, spec.slice(0, eq), { nearDuplicates: settings });
    }
  }
  return options;
}

/**
 * Runs `ctxdedup serve` with `argv` (the arguments after `serve`). Resolves with the running
 * server; the process then lives until SIGTERM / SIGINT, which stop it gracefully and exit 0.
 * Bad flags print the reason and the usage to stderr and set exit code 2; a server that cannot
 * start (store unreachable, port taken) prints the reason and exits 1.
 */
export async function main(argv: string[] = process.argv.slice(2)): Promise<RunningServer | undefined> {
  let options: ServerOptions | 'help';
  try {
    options = parseServeArgs(argv);
  } catch (error) {
    process.stderr.write(`ctxdedup serve: ${cliMessage(error)}\n\n${USAGE}`);
    process.exitCode = 2;
    return undefined;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return undefined;
  }
  if (options.token === undefined) {
    const host = options.host ?? '127.0.0.1';
    process.stderr.write(
      isLoopbackHost(host)
        ? `ctxdedup serve: no --token: requests are not authenticated (listening on loopback ${host} only)\n`
        : `ctxdedup serve: warning: no --token and --allow-unauthenticated: requests to ${host} are not authenticated; anyone who can reach it can write\n`,
    );
  }
  let server: RunningServer;
  try {
    server = await startServer(options);
  } catch (error) {
    process.stderr.write(`ctxdedup serve: ${cliMessage(error)}\n`);
    // A half-opened client (e.g. a Redis reconnect timer) must not keep a failed server alive.
    process.exit(1);
  }
  const storeName = typeof options.store === 'string' ? options.store.replace(/\/\/[^@/]*@/, '//***@') : 'custom';
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`ctxdedup serve: ${signal}, finishing in-flight requests\n`);
    const force = setTimeout(() => {
      process.stderr.write('ctxdedup serve: shutdown took more than 10 s, exiting\n');
      process.exit(1);
    }, 10_000);
    force.unref();
    server.close().then(
      () => {
        process.stdout.write('ctxdedup serve: stopped\n');
        process.exitCode = 0;
      },
      (error: unknown) => {
        process.stderr.write(`ctxdedup serve: error while stopping: ${cliMessage(error)}\n`);
        process.exitCode = 1;
      },
    );
  };
  // Handlers first: a supervisor may send SIGTERM as soon as it reads the "listening" line.
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  process.stdout.write(`ctxdedup serve: listening on ${server.url} (store ${storeName})\n`);
  return server;
}

function isEntry(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}

if (isEntry()) void main();
