/**
 * A real ChromaDB server for the memory-store suite: `chroma run` from the virtualenv that
 * `.ci/chroma.sh` installs (PyPI chromadb, pinned), on 127.0.0.1 and a free port, persisting to a
 * temporary directory. Nothing is mocked.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { exited, freePort, ROOT, tempDir } from './ingest-services.js';

/** The `chroma` CLI installed by `.ci/chroma.sh`. */
export const CHROMA_BIN = join(ROOT, '.cache', 'chroma-venv', 'bin', 'chroma');

/** How long a server may take to answer its heartbeat (it usually takes 1 to 2 s). */
const STARTUP_TIMEOUT_MS = 60_000;

/**
 * Whether the Chroma server is installed. In CI (CI=true) a missing server is an error, so the
 * suite fails instead of silently skipping; elsewhere the suite is skipped with a warning.
 */
export function chromaAvailable(): boolean {
  const found = existsSync(CHROMA_BIN);
  if (!found && process.env['CI'] === 'true') {
    throw new Error(`the Chroma server is not installed (${CHROMA_BIN} is missing); run \`bash .ci/chroma.sh\` (CI=true: not skipping)`);
  }
  if (!found) console.warn(`${CHROMA_BIN} not found: skipping the ChromaDB tests (run \`bash .ci/chroma.sh\` to install the server)`);
  return found;
}

/** A running `chroma run` process. */
export interface ChromaProcess {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** The persistence directory (`--path`). */
  path: string;
  /** Everything the server printed so far. */
  output(): string;
  /** Stops the server; removes its data directory unless the directory was passed in. */
  stop(): Promise<void>;
}

/** Options of {@link startChroma}. */
export interface StartChromaOptions {
  /**
   * Persist to this directory (kept on stop: the caller owns it), e.g. to restart a server on the
   * same data. Default: a fresh temporary directory, removed on stop.
   */
  path?: string;
}

/** Starts a Chroma server on 127.0.0.1 and a free port, and waits until it answers its heartbeat. */
export async function startChroma(options: StartChromaOptions = {}): Promise<ChromaProcess> {
  const owned = options.path === undefined ? tempDir('ctxdedup-chroma-') : undefined;
  const path = options.path ?? owned!.dir;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(CHROMA_BIN, ['run', '--path', path, '--host', '127.0.0.1', '--port', String(port)], {
    cwd: path,
    // No telemetry (it would reach for the network) and no colour codes in the captured output.
    env: { ...process.env, ANONYMIZED_TELEMETRY: 'False', NO_COLOR: '1', RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const stop = async (): Promise<void> => {
    await kill(child);
    owned?.remove();
  };
  try {
    await waitForHeartbeat(url, child, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, port, path, output: () => output, stop };
}

/** SIGTERM, then SIGKILL if the server has not exited after 10 s. */
async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited(child);
  clearTimeout(timer);
}

/** Polls `GET /api/v2/heartbeat` until it answers 200; rejects if the process exits or on timeout. */
async function waitForHeartbeat(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let exitedEarly = false;
  child.once('exit', () => (exitedEarly = true));
  let lastProblem = 'no answer yet';
  while (Date.now() < deadline) {
    if (exitedEarly) throw new Error(`chroma run exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output()}`);
    try {
      const response = await fetch(`${url}/api/v2/heartbeat`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
      lastProblem = `HTTP ${response.status}`;
    } catch (error) {
      lastProblem = (error as Error).message;
    }
    await new Promise((resolveDelay) => setTimeout(resolveDelay, 100));
  }
  throw new Error(`chroma run did not answer ${url}/api/v2/heartbeat within ${STARTUP_TIMEOUT_MS} ms (${lastProblem}):\n${output()}`);
}
