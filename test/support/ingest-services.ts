/**
 * Real services for the ingestion and server suites: a redis-server process on 127.0.0.1 and
 * `ctxdedup serve` processes. Nothing is mocked.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll } from 'vitest';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Whether a redis-server binary is on PATH. In CI (CI=true) a missing binary is an error. */
export function redisAvailable(): boolean {
  const found = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!found && process.env['CI'] === 'true') {
    throw new Error('redis-server is not installed; .ci/services.sh installs it (CI=true: not skipping)');
  }
  if (!found) console.warn('redis-server not found on PATH: skipping the Redis tests (run `bash .ci/services.sh` to install it)');
  return found;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Resolves when `child` has exited (or at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => child.once('exit', () => done()));
}

/** Waits until `child` prints a line matching `pattern`; rejects on exit or after `timeoutMs`. */
function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolveLine, reject) => {
    let seen = '';
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString('utf8');
      const match = seen.match(pattern);
      if (match) finish(() => resolveLine(match));
    };
    const onExit = (code: number | null, signal: string | null): void =>
      finish(() => reject(new Error(`process exited (${code ?? signal}) before ready:\n${seen}`)));
    const timer = setTimeout(() => finish(() => reject(new Error(`not ready after ${timeoutMs} ms:\n${seen}`))), timeoutMs);
    const finish = (then: () => void): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      then();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('exit', onExit);
  });
}

/** A running redis-server. */
export interface RedisProcess {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts redis-server on a free port, 127.0.0.1 only, without persistence. */
export async function startRedis(): Promise<RedisProcess> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes', '--loglevel', 'notice'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  try {
    await waitForLine(child, /Ready to accept connections/, 10_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      child.kill('SIGTERM');
      await exited(child);
    },
  };
}

/**
 * Starts a redis-server before the tests of the calling `describe` and stops it after them. Read
 * `url` inside the tests (the server exists only then).
 */
export function useRedis(): { readonly url: string } {
  let redis: RedisProcess | undefined;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  return {
    get url(): string {
      if (redis === undefined) throw new Error('useRedis: the redis-server is not started (read url inside a test)');
      return redis.url;
    },
  };
}

/**
 * A function that returns a fresh path `name` in a temporary directory of its own (`prefix`); the
 * directories are removed after each test. Call it at the top of a test file.
 */
export function tempFiles(prefix: string, name: string): () => string {
  const dirs: string[] = [];
  afterEach(() => {
    for (let dir = dirs.pop(); dir !== undefined; dir = dirs.pop()) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    return join(dir, name);
  };
}

/** A `ctxdedup serve` process started from the TypeScript sources. */
export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Everything the process printed so far. */
  output(): string;
  /** SIGTERM, then wait for the exit; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `src/server/main.ts` with `args` (plus `--port 0`) and waits for its listening line. */
export async function startServerProcess(args: string[], env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'server', 'main.ts'), '--port', '0', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
  let match: RegExpMatchArray;
  try {
    match = await waitForLine(child, /listening on (http:\/\/127\.0\.0\.1:\d+)/, 20_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    url: match[1]!,
    child,
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited(child);
      return child.exitCode;
    },
  };
}

/** A fresh temporary directory and its removal. */
export function tempDir(prefix = 'ctxdedup-ingest-'): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
