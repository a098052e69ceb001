/**
 * Shared store: Redis, for several ingestion instances that must agree on what is new.
 *
 * One key per (namespace, content): `<prefix>{<namespace>}:<sha256>` holding the id that claimed
 * it, with a `PX` expiry when the namespace has a TTL. A batch is one `EVALSHA` of a small Lua
 * script (one round trip, whatever the batch size, up to the index's `maxBatchItems` and beyond):
 * for each content it returns the recorded id, or records the new one. Redis runs a script
 * atomically, so two instances racing on the same content get exactly one claim, and a batch is
 * never interleaved with another. The keys and ids go to the script as arrays (never spread into
 * one JavaScript call, whose argument count the engine's stack bounds: about 60,000 items). Metadata is not
 * stored in Redis. Durability is Redis's own (configure AOF for it).
 * @module
 */
import { Redis } from 'ioredis';
import { describe, typeError } from '../validation.js';
import type { ClaimOptions, ClaimRequest, IngestStore } from './store.js';

/** Default key prefix. */
export const DEFAULT_REDIS_PREFIX = 'ctxdedup:ingest:';

const CLAIM_SCRIPT = `
local ttl = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local owner = redis.call('GET', key)
  if owner then
    out[i] = owner
  else
    if ttl then
      redis.call('SET', key, ARGV[i + 1], 'PX', ttl)
    else
      redis.call('SET', key, ARGV[i + 1])
    end
    out[i] = ''
  end
end
return out
`;

/**
 * The script as ioredis defines it: `numKeys`, then the keys and the other arguments. ioredis
 * flattens array arguments into the command, so a batch of any size is passed as two arrays.
 */
type ClaimCommand = (numKeys: number, keys: readonly string[], ttl: string, ids: readonly string[]) => Promise<string[]>;

/** The ingestion index in Redis. */
export class RedisStore implements IngestStore {
  readonly kind = 'redis';
  readonly prefix: string;
  #client: Redis;
  #closed = false;

  private constructor(client: Redis, prefix: string) {
    this.#client = client;
    this.prefix = prefix;
  }

  /**
   * Connects to `url` (`redis://host:port[/db]`, `rediss://…` for TLS). Keys are
   * `<prefix>{<namespace>}:<sha256>`.
   * @throws TypeError if `prefix` is not a string.
   * @throws Error if Redis cannot be reached.
   */
  static async connect(url: string, prefix = DEFAULT_REDIS_PREFIX): Promise<RedisStore> {
    if (typeof prefix !== 'string') typeError('prefix', `must be a string, got ${describe(prefix)}`);
    let ready = false;
    const client = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 2,
      connectTimeout: 5000,
      // Fail fast if Redis is unreachable at startup; once connected, reconnect with backoff.
      retryStrategy: (times) => (ready ? Math.min(times * 100, 2000) : null),
    });
    client.once('ready', () => (ready = true));
    // Without a listener, a dropped connection would be an unhandled 'error' event.
    let lastError: Error | undefined;
    client.on('error', (error: Error) => (lastError = error));
    client.defineCommand('ctxdedupClaim', { lua: CLAIM_SCRIPT });
    try {
      await client.connect();
    } catch (error) {
      client.disconnect();
      throw new Error(`ctxdedup: cannot connect to ${redactUrl(url)}: ${(lastError ?? (error as Error)).message}`);
    }
    return new RedisStore(client, prefix);
  }

  async claim(namespace: string, requests: readonly ClaimRequest[], { ttlMs }: ClaimOptions): Promise<(string | null)[]> {
    if (this.#closed) throw new Error('ctxdedup: the Redis store is closed');
    if (requests.length === 0) return [];
    const keys = requests.map((r) => `${this.prefix}{${namespace}}:${r.sha256}`);
    const ids = requests.map((r) => r.id);
    const ttl = ttlMs === undefined ? '' : String(Math.max(1, Math.ceil(ttlMs)));
    const claim = (this.#client as unknown as { ctxdedupClaim: ClaimCommand }).ctxdedupClaim;
    // Arrays, not spread arguments: a spread of 2n + 2 values overflows the stack near n = 60,000.
    const owners = await claim.call(this.#client, keys.length, keys, ttl, ids);
    return owners.map((owner) => (owner === '' ? null : owner));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#client.quit();
    } catch {
      this.#client.disconnect();
    }
  }
}

/** The URL without its password, for error messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'the Redis URL';
  }
}
