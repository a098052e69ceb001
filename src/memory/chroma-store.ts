/**
 * A {@link MemoryStore} in a ChromaDB collection, through the `chromadb` HTTP client (v3).
 *
 * One Chroma record per memory: the record id is the memory id, the document is the content, the
 * embedding is passed explicitly (Chroma never embeds anything here: the collection gets an
 * embedding function that throws, so the client never loads a model either), and the record's
 * flat metadata holds
 *
 * - `timestamp`: the memory's timestamp (a number), when it has one;
 * - `ctxdedup_has_timestamp`: whether it has one. Chroma's `update` merges metadata and the JS
 *   client drops `null` values, so a `timestamp` key cannot be removed by an update; this flag is
 *   what says whether the memory still has one;
 * - `ctxdedup_metadata`: the memory's metadata as JSON text, or `''` when it has none (Chroma
 *   metadata values must be flat scalars).
 *
 * Embeddings come back within float32 precision, not always bit for bit: in cosine space Chroma
 * keeps the normalized vector and scales it back, which can move a value by one unit in the last
 * place.
 *
 * The collection uses cosine space. `nearest` asks Chroma's index for candidates, then reads their
 * stored embeddings and ranks them by cosine similarity computed here in float64, with ties broken
 * by id, so results and scores agree with the embedded stores (Chroma's own distances are float32,
 * and its query results carry re-normalized embeddings). The index is approximate (HNSW), as any
 * Chroma query is; on small collections it is exact.
 *
 * Chroma 1.5 silently ignores `add` of an existing id and `update` of a missing one, so both are
 * checked with a `get` first; writes from one store instance are serialized so that the check and
 * the write cannot interleave with another write of the same instance (there is no such guarantee
 * across processes: Chroma has no transactions).
 *
 * The deduplicator's audit log ({@link ChromaMemoryStore.audit}) lives on the same server, in a
 * companion collection (`<collection>-audit` by default): one record per entry, id = the entry's
 * sequence number, holding the audited memory as above plus the entry's fields (`ctxdedup_seq`,
 * `ctxdedup_at`, `ctxdedup_action`, `ctxdedup_memory_id`, `ctxdedup_replaced_by`,
 * `ctxdedup_similarity` with `ctxdedup_has_similarity`, `ctxdedup_undone`). So history and `undo`
 * survive the process, as with the SQLite store.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { ChromaClient, Collection, EmbeddingFunction, Metadata } from 'chromadb';
import type { AuditEntry, AuditLog, AuditRecord } from './audit.js';
import type { MemoryStore, NearestMemory, StoredMemory } from './store.js';
import { expectKnownKeys, show } from '../validation.js';
import { importPeer } from '../optional.js';
import { expectNearestK, expectVector } from './validate.js';

/** Where {@link ChromaMemoryStore.connect} goes when no URL is given (Chroma's default port). */
export const DEFAULT_CHROMA_URL = 'http://127.0.0.1:8000';

/** The collection {@link ChromaMemoryStore.connect} uses when none is given. */
export const DEFAULT_CHROMA_COLLECTION = 'ctxdedup-memories';

/** Appended to the collection's name to name its audit collection, unless `auditCollection` is given. */
export const CHROMA_AUDIT_SUFFIX = '-audit';

/** Options of {@link ChromaMemoryStore.connect}. */
export interface ChromaMemoryStoreOptions {
  /** The Chroma server, `http://host:port` or `https://host:port`. Default {@link DEFAULT_CHROMA_URL}. */
  url?: string | undefined;
  /**
   * The collection (3 to 512 characters of `[a-zA-Z0-9._-]`, starting and ending with a letter or
   * digit). Created with cosine space if missing. Default {@link DEFAULT_CHROMA_COLLECTION}.
   */
  collection?: string | undefined;
  /**
   * The collection that holds the deduplicator's audit log (same naming rules). Created if
   * missing. Default: the collection's name followed by {@link CHROMA_AUDIT_SUFFIX}.
   */
  auditCollection?: string | undefined;
  /** Chroma tenant; the server's default tenant when absent. */
  tenant?: string | undefined;
  /** Chroma database; the server's default database when absent. */
  database?: string | undefined;
  /** Extra HTTP headers for every request (e.g. `{ 'x-chroma-token': '…' }`). */
  headers?: Record<string, string> | undefined;
}

/** Metadata keys the store writes on every record. */
const TIMESTAMP_KEY = 'timestamp';
const HAS_TIMESTAMP_KEY = 'ctxdedup_has_timestamp';
const METADATA_KEY = 'ctxdedup_metadata';

/** Records per `get` request when listing or fetching many ids (well under Chroma's batch limit). */
const PAGE_SIZE = 1000;

/** Extra candidates `nearest` asks the index for beyond `k`, so that ties at the k-th place are seen. */
const NEAREST_MARGIN = 8;

/**
 * How far (in similarity) Chroma's float32 cosine distance may be from the float64 similarity
 * computed here; used to decide whether a memory the index did not return could still rank in the
 * top k.
 */
const DISTANCE_SLACK = 1e-5;

/**
 * Given to Chroma as the collection's embedding function so that nothing is ever embedded by
 * Chroma or the client: every call passes embeddings explicitly, and a stray text query fails
 * loudly instead of downloading a model.
 */
const NO_EMBEDDING: EmbeddingFunction = {
  generate(): Promise<number[][]> {
    return Promise.reject(new Error('ChromaMemoryStore: embeddings are always passed explicitly; Chroma must not embed text'));
  },
};

/** An error this module raised itself, passed through {@link ChromaMemoryStore}'s wrapping unchanged. */
class StoreError extends Error {}

/** A memory store in a ChromaDB collection (cosine space). Create one with {@link ChromaMemoryStore.connect}. */
export class ChromaMemoryStore implements MemoryStore {
  /** Always `'chroma'`. */
  readonly kind = 'chroma';
  /** The server URL this store talks to. */
  readonly url: string;
  /** The collection's name. */
  readonly collectionName: string;
  /** The audit log, in the companion collection on the same server. */
  readonly audit: AuditLog;
  #collection: Collection;
  #closed = false;
  /** Tail of the chain that serializes this instance's writes (check, then write). */
  #writes: Promise<unknown> = Promise.resolve();

  private constructor(url: string, collection: Collection, auditCollection: Collection) {
    this.url = url;
    this.collectionName = collection.name;
    this.#collection = collection;
    this.audit = new ChromaAuditLog(
      url,
      auditCollection,
      () => this.#checkOpen(),
      (op, write) => this.#exclusive(op, write),
    );
  }

  /**
   * Connects to a Chroma server and gets or creates the collection (cosine space).
   * @throws TypeError / RangeError for malformed options.
   * @throws Error naming the store and the URL if the server cannot be reached or refuses, or if
   *   an existing collection of that name does not use cosine space.
   */
  static async connect(options: ChromaMemoryStoreOptions = {}): Promise<ChromaMemoryStore> {
    if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
    // A misspelled url or headers must not connect to the default server without them.
    expectKnownKeys(options as Record<string, unknown>, 'options', ['url', 'collection', 'auditCollection', 'tenant', 'database', 'headers']);
    const url = options.url ?? DEFAULT_CHROMA_URL;
    const name = options.collection ?? DEFAULT_CHROMA_COLLECTION;
    if (typeof url !== 'string') throw new TypeError('options.url must be a string');
    if (typeof name !== 'string') throw new TypeError('options.collection must be a string');
    const auditName = options.auditCollection ?? `${name}${CHROMA_AUDIT_SUFFIX}`;
    if (typeof auditName !== 'string') throw new TypeError('options.auditCollection must be a string');
    if (auditName === name) throw new RangeError('options.auditCollection must differ from options.collection');
    const { host, port, ssl } = parseServerUrl(url);
    // Loaded on first use so that importing ctxdedup does not load the Chroma client.
    const { ChromaClient: Client } = await importPeer('chromadb', 'ChromaMemoryStore', () => import('chromadb'));
    const client: ChromaClient = new Client({
      host,
      port,
      ssl,
      ...(options.tenant !== undefined ? { tenant: options.tenant } : {}),
      ...(options.database !== undefined ? { database: options.database } : {}),
      ...(options.headers !== undefined ? { headers: options.headers } : {}),
    });
    let collection: Collection;
    try {
      collection = await client.getOrCreateCollection({
        name,
        configuration: { hnsw: { space: 'cosine' } },
        embeddingFunction: NO_EMBEDDING,
      });
    } catch (error) {
      throw storeError(url, name, 'connect', error);
    }
    // getOrCreate returns an existing collection as it is, whatever configuration was asked for;
    // an l2 or ip index would rank candidates by the wrong measure.
    const space = collection.configuration.hnsw?.space ?? collection.configuration.spann?.space;
    if (space !== 'cosine') {
      throw new Error(
        `ChromaMemoryStore (${url}, collection '${name}'): the collection exists with distance space '${space ?? 'unknown'}', ` +
          `not 'cosine'; use another collection name`,
      );
    }
    let auditCollection: Collection;
    try {
      auditCollection = await client.getOrCreateCollection({ name: auditName, configuration: { hnsw: { space: 'cosine' } }, embeddingFunction: NO_EMBEDDING });
    } catch (error) {
      throw storeError(url, auditName, 'connect', error);
    }
    return new ChromaMemoryStore(url, collection, auditCollection);
  }

  async add(memory: StoredMemory): Promise<void> {
    const record = toRecord(memory, 'memory');
    await this.#exclusive('add', async () => {
      if (await this.#exists(record.id)) throw new StoreError(`${this.#label()}: add: a memory with id ${JSON.stringify(record.id)} already exists`);
      await this.#collection.add({ ids: [record.id], embeddings: [record.embedding], documents: [record.document], metadatas: [record.metadata] });
    });
  }

  async update(memory: StoredMemory): Promise<void> {
    const record = toRecord(memory, 'memory');
    await this.#exclusive('update', async () => {
      if (!(await this.#exists(record.id))) throw new StoreError(`${this.#label()}: update: no memory with id ${JSON.stringify(record.id)}`);
      await this.#collection.update({ ids: [record.id], embeddings: [record.embedding], documents: [record.document], metadatas: [record.metadata] });
    });
  }

  async delete(id: string): Promise<boolean> {
    expectId(id, 'id');
    return this.#exclusive('delete', async () => {
      // Chroma's delete reports a count even for ids it does not have, so look first.
      if (!(await this.#exists(id))) return false;
      await this.#collection.delete({ ids: [id] });
      return true;
    });
  }

  async get(id: string): Promise<StoredMemory | undefined> {
    expectId(id, 'id');
    this.#checkOpen();
    const found = await this.#call('get', () => this.#fetch([id]));
    return found.get(id);
  }

  async list(): Promise<StoredMemory[]> {
    this.#checkOpen();
    return this.#call('list', async () => {
      const out: StoredMemory[] = [];
      // Offset paging: consistent as long as nobody writes while the list is read.
      for (let offset = 0; ; offset += PAGE_SIZE) {
        const page = await this.#collection.get({ limit: PAGE_SIZE, offset, include: ['embeddings', 'documents', 'metadatas'] });
        for (let i = 0; i < page.ids.length; i++) out.push(fromRecord(page, i));
        if (page.ids.length < PAGE_SIZE) return out;
      }
    });
  }

  async nearest(vector: Float32Array, k: number): Promise<NearestMemory[]> {
    expectVector(vector, 'vector');
    expectNearestK(k);
    this.#checkOpen();
    if (k === 0) return [];
    const query = Array.from(vector);
    return this.#call('nearest', async () => {
      // Chroma rejects n_results of 0 and older servers reject n_results above the count.
      const count = await this.#collection.count();
      if (count === 0) return [];
      let n = Math.min(count, k + NEAREST_MARGIN);
      for (;;) {
        const result = await this.#collection.query({ queryEmbeddings: [query], nResults: n, include: ['distances'] });
        const ids = result.ids[0] ?? [];
        const distances = result.distances[0] ?? [];
        // The query's own embeddings are re-normalized by the index: read the stored ones.
        const found = await this.#fetch(ids);
        const ranked: NearestMemory[] = [];
        for (const id of ids) {
          const memory = found.get(id);
          // Absent if deleted between the query and the read.
          if (memory) ranked.push({ memory, similarity: cosine(vector, memory.embedding) });
        }
        ranked.sort(bySimilarityThenId);
        if (ids.length < n || n >= count || ranked.length < k) return ranked.slice(0, k);
        // Every memory the index left out is at least as far as the farthest one it returned. If
        // such a memory could still tie or beat the k-th, ask for more candidates.
        let farthest = 0;
        for (const d of distances) if (typeof d === 'number' && d > farthest) farthest = d;
        const bestLeftOut = 1 - farthest + DISTANCE_SLACK;
        if (ranked[k - 1]!.similarity > bestLeftOut) return ranked.slice(0, k);
        n = Math.min(count, n * 2);
      }
    });
  }

  /** Marks the store closed (the HTTP client holds no connection to release). Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
  }

  /** Whether a record with this id exists. */
  async #exists(id: string): Promise<boolean> {
    const result = await this.#collection.get({ ids: [id], include: [] });
    return result.ids.length > 0;
  }

  /** The stored memories with these ids (missing ones are absent from the map). */
  async #fetch(ids: readonly string[]): Promise<Map<string, StoredMemory>> {
    const found = new Map<string, StoredMemory>();
    for (let start = 0; start < ids.length; start += PAGE_SIZE) {
      const chunk = ids.slice(start, start + PAGE_SIZE);
      const page = await this.#collection.get({ ids: chunk, include: ['embeddings', 'documents', 'metadatas'] });
      for (let i = 0; i < page.ids.length; i++) {
        const memory = fromRecord(page, i);
        found.set(memory.id, memory);
      }
    }
    return found;
  }

  /** Runs a write after every earlier write of this instance (audit log included) has settled. */
  #exclusive<T>(op: string, write: () => Promise<T>): Promise<T> {
    this.#checkOpen();
    const run = this.#writes.then(() => this.#call(op, write));
    this.#writes = run.catch(() => undefined);
    return run;
  }

  /** Runs `body`, turning the client's errors into ones that name the store and the operation. */
  async #call<T>(op: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      if (error instanceof StoreError) throw error;
      throw storeError(this.url, this.collectionName, op, error);
    }
  }

  #checkOpen(): void {
    if (this.#closed) throw new StoreError(`${this.#label()}: the store is closed`);
  }

  #label(): string {
    return `ChromaMemoryStore (${this.url}, collection '${this.collectionName}')`;
  }
}

/** Metadata keys of an audit record, beside those of the audited memory. */
const AUDIT_SEQ_KEY = 'ctxdedup_seq';
const AUDIT_AT_KEY = 'ctxdedup_at';
const AUDIT_ACTION_KEY = 'ctxdedup_action';
const AUDIT_MEMORY_ID_KEY = 'ctxdedup_memory_id';
const AUDIT_REPLACED_BY_KEY = 'ctxdedup_replaced_by';
const AUDIT_SIMILARITY_KEY = 'ctxdedup_similarity';
const AUDIT_HAS_SIMILARITY_KEY = 'ctxdedup_has_similarity';
const AUDIT_UNDONE_KEY = 'ctxdedup_undone';
/** A random token per record, to tell whether an add took effect (Chroma ignores one of an existing id). */
const AUDIT_NONCE_KEY = 'ctxdedup_nonce';

/**
 * The audit log of a {@link ChromaMemoryStore}, in its companion collection. Sequence numbers
 * continue from the largest one in the collection; one instance's writes are serialized with the
 * store's (like the store, it has no transaction across processes: two processes recording at
 * the same moment may race for one number, and the later one then takes the next).
 */
class ChromaAuditLog implements AuditLog {
  readonly #url: string;
  readonly #collection: Collection;
  readonly #checkOpen: () => void;
  readonly #exclusive: <T>(op: string, write: () => Promise<T>) => Promise<T>;
  /** The next sequence number to try; read from the collection once, on the first record. */
  #next: number | undefined;

  constructor(url: string, collection: Collection, checkOpen: () => void, exclusive: <T>(op: string, write: () => Promise<T>) => Promise<T>) {
    this.#url = url;
    this.#collection = collection;
    this.#checkOpen = checkOpen;
    this.#exclusive = exclusive;
  }

  async record(entry: AuditRecord): Promise<AuditEntry> {
    const record = toRecord(entry.memory, 'entry.memory');
    if (typeof entry.at !== 'number' || !Number.isFinite(entry.at)) throw new TypeError(`entry.at must be a finite number, got ${String(entry.at)}`);
    if (entry.similarity !== null && (typeof entry.similarity !== 'number' || !Number.isFinite(entry.similarity))) {
      throw new TypeError(`entry.similarity must be a finite number or null, got ${String(entry.similarity)}`);
    }
    expectId(entry.replacedBy, 'entry.replacedBy');
    return this.#exclusive('audit record', async () => {
      // Chroma ignores an add of an existing id: take a number nobody has, checked just before
      // (another process may have taken some since this one last looked).
      this.#next ??= (await this.#lastSeq()) + 1;
      const nonce = randomUUID();
      for (let seq = this.#next; ; seq++) {
        const id = String(seq);
        const existing = await this.#collection.get({ ids: [id], include: [] });
        if (existing.ids.length > 0) continue;
        const metadata: Metadata = {
          ...record.metadata,
          [AUDIT_SEQ_KEY]: seq,
          [AUDIT_AT_KEY]: entry.at,
          [AUDIT_ACTION_KEY]: entry.action,
          [AUDIT_MEMORY_ID_KEY]: record.id,
          [AUDIT_REPLACED_BY_KEY]: entry.replacedBy,
          [AUDIT_SIMILARITY_KEY]: entry.similarity ?? 0,
          [AUDIT_HAS_SIMILARITY_KEY]: entry.similarity !== null,
          [AUDIT_UNDONE_KEY]: false,
          [AUDIT_NONCE_KEY]: nonce,
        };
        await this.#collection.add({ ids: [id], embeddings: [record.embedding], documents: [record.document], metadatas: [metadata] });
        // Another process may have added this id between the check and the add: then ours was
        // ignored, and the entry goes to the next number.
        const written = await this.#collection.get({ ids: [id], include: ['metadatas'] });
        if (written.metadatas[0]?.[AUDIT_NONCE_KEY] !== nonce) continue;
        this.#next = seq + 1;
        return { ...entry, memory: { ...entry.memory, embedding: entry.memory.embedding.slice() }, seq, undone: false };
      }
    });
  }

  async list(): Promise<AuditEntry[]> {
    this.#checkOpen();
    try {
      const entries: AuditEntry[] = [];
      for (let offset = 0; ; offset += PAGE_SIZE) {
        const page = await this.#collection.get({ limit: PAGE_SIZE, offset, include: ['embeddings', 'documents', 'metadatas'] });
        for (let i = 0; i < page.ids.length; i++) entries.push(fromAuditRecord(page, i));
        if (page.ids.length < PAGE_SIZE) break;
      }
      return entries.sort((a, b) => a.seq - b.seq);
    } catch (error) {
      if (error instanceof StoreError) throw error;
      throw storeError(this.#url, this.#collection.name, 'audit list', error);
    }
  }

  async markUndone(seq: number): Promise<void> {
    if (!Number.isSafeInteger(seq) || seq < 1) throw new RangeError(`seq must be a positive integer, got ${String(seq)}`);
    await this.#exclusive('audit markUndone', async () => {
      const id = String(seq);
      const existing = await this.#collection.get({ ids: [id], include: [] });
      // Like the other logs, an unknown entry is nothing to mark (and Chroma would ignore it).
      if (existing.ids.length === 0) return;
      await this.#collection.update({ ids: [id], metadatas: [{ [AUDIT_UNDONE_KEY]: true }] });
    });
  }

  /** The largest sequence number in the collection (0 when empty). */
  async #lastSeq(): Promise<number> {
    let last = 0;
    for (let offset = 0; ; offset += PAGE_SIZE) {
      const page = await this.#collection.get({ limit: PAGE_SIZE, offset, include: ['metadatas'] });
      for (const meta of page.metadatas) {
        const seq = meta?.[AUDIT_SEQ_KEY];
        if (typeof seq === 'number' && seq > last) last = seq;
      }
      if (page.ids.length < PAGE_SIZE) return last;
    }
  }
}

/** Row `i` of a Chroma `get` result of the audit collection as an audit entry. */
function fromAuditRecord(page: RecordColumns, i: number): AuditEntry {
  const meta = page.metadatas[i] ?? {};
  const seq = meta[AUDIT_SEQ_KEY];
  const at = meta[AUDIT_AT_KEY];
  const action = meta[AUDIT_ACTION_KEY];
  const memoryId = meta[AUDIT_MEMORY_ID_KEY];
  const replacedBy = meta[AUDIT_REPLACED_BY_KEY];
  const similarity = meta[AUDIT_SIMILARITY_KEY];
  if (
    typeof seq !== 'number' ||
    typeof at !== 'number' ||
    (action !== 'replaced' && action !== 'merged') ||
    typeof memoryId !== 'string' ||
    typeof replacedBy !== 'string' ||
    typeof similarity !== 'number'
  ) {
    throw new StoreError(`ChromaMemoryStore: audit record ${JSON.stringify(page.ids[i])} is not one this store wrote`);
  }
  const memory = { ...fromRecord(page, i), id: memoryId };
  return {
    seq,
    at,
    action,
    memory,
    replacedBy,
    similarity: meta[AUDIT_HAS_SIMILARITY_KEY] === true ? similarity : null,
    undone: meta[AUDIT_UNDONE_KEY] === true,
  };
}

/** One memory in the shape Chroma's client takes. */
interface ChromaRecord {
  id: string;
  document: string;
  embedding: number[];
  metadata: Metadata;
}

/** Validates a memory (naming the offending path) and converts it to a Chroma record. */
function toRecord(memory: StoredMemory, path: string): ChromaRecord {
  if (typeof memory !== 'object' || memory === null) throw new TypeError(`${path} must be an object`);
  expectId(memory.id, `${path}.id`);
  if (typeof memory.content !== 'string') throw new TypeError(`${path}.content must be a string`);
  // JSON cannot carry a lone surrogate: Chroma's server rejects the whole request.
  if (!memory.content.isWellFormed()) throw new TypeError(`${path}.content contains a lone surrogate, which Chroma cannot store`);
  expectVector(memory.embedding, `${path}.embedding`);
  const metadata: Metadata = { [HAS_TIMESTAMP_KEY]: memory.timestamp !== undefined, [METADATA_KEY]: '' };
  if (memory.timestamp !== undefined) {
    if (typeof memory.timestamp !== 'number' || !Number.isFinite(memory.timestamp)) {
      throw new TypeError(`${path}.timestamp must be a finite number, got ${show(memory.timestamp)}`);
    }
    metadata[TIMESTAMP_KEY] = memory.timestamp;
  }
  if (memory.metadata !== undefined) {
    if (typeof memory.metadata !== 'object' || memory.metadata === null || Array.isArray(memory.metadata)) {
      throw new TypeError(`${path}.metadata must be an object`);
    }
    let json: string;
    try {
      json = JSON.stringify(memory.metadata);
    } catch (error) {
      throw new TypeError(`${path}.metadata is not JSON-serializable: ${(error as Error).message}`);
    }
    metadata[METADATA_KEY] = json;
  }
  return { id: memory.id, document: memory.content, embedding: Array.from(memory.embedding), metadata };
}

/** The columns of a Chroma `get` result that {@link fromRecord} reads. */
interface RecordColumns {
  readonly ids: string[];
  readonly documents: (string | null)[];
  readonly embeddings: number[][];
  readonly metadatas: (Metadata | null)[];
}

/** Row `i` of a Chroma `get` result as a stored memory. */
function fromRecord(page: RecordColumns, i: number): StoredMemory {
  const id = page.ids[i]!;
  const values = page.embeddings[i];
  if (!values) throw new StoreError(`ChromaMemoryStore: record ${JSON.stringify(id)} came back without its embedding`);
  const meta = page.metadatas[i] ?? {};
  // A record this store did not write has no flag: then a numeric timestamp counts.
  const hasTimestamp = meta[HAS_TIMESTAMP_KEY] ?? typeof meta[TIMESTAMP_KEY] === 'number';
  const timestamp = meta[TIMESTAMP_KEY];
  const memory: StoredMemory = {
    id,
    // A record written without a document (not by this store) has no content.
    content: page.documents[i] ?? '',
    embedding: Float32Array.from(values),
  };
  if (hasTimestamp === true && typeof timestamp === 'number') memory.timestamp = timestamp;
  const json = meta[METADATA_KEY];
  if (typeof json === 'string' && json !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch (error) {
      throw new StoreError(`ChromaMemoryStore: record ${JSON.stringify(id)} has unreadable ${METADATA_KEY}: ${(error as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new StoreError(`ChromaMemoryStore: record ${JSON.stringify(id)} has ${METADATA_KEY} that is not a JSON object`);
    }
    memory.metadata = parsed as Record<string, unknown>;
  }
  return memory;
}

/** Sorts by similarity, most similar first, then by id (code-unit order). */
function bySimilarityThenId(a: NearestMemory, b: NearestMemory): number {
  if (a.similarity !== b.similarity) return b.similarity - a.similarity;
  return a.memory.id < b.memory.id ? -1 : a.memory.id > b.memory.id ? 1 : 0;
}

/** Cosine similarity in float64, clamped to [-1, 1]; 0 when either vector is all zeros. */
function cosine(a: Float32Array, b: Float32Array): number {
  const n = Math.min(a.length, b.length);
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if (na === 0 || nb === 0) return 0;
  return Math.max(-1, Math.min(1, dot / (Math.sqrt(na) * Math.sqrt(nb))));
}

function expectId(id: unknown, path: string): asserts id is string {
  if (typeof id !== 'string' || id.length === 0) throw new TypeError(`${path} must be a non-empty string`);
  if (!id.isWellFormed()) throw new TypeError(`${path} contains a lone surrogate, which Chroma cannot store`);
}

/** Splits `http(s)://host:port` into what the Chroma client takes. */
function parseServerUrl(url: string): { host: string; port: number; ssl: boolean } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RangeError(`options.url is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new RangeError(`options.url must be http:// or https://, got ${JSON.stringify(url)}`);
  }
  // The client builds every request from scheme, host and port only.
  if ((parsed.pathname !== '/' && parsed.pathname !== '') || parsed.search !== '' || parsed.username !== '' || parsed.password !== '') {
    throw new RangeError(`options.url must be scheme://host:port only (use options.headers for credentials), got ${JSON.stringify(url)}`);
  }
  const ssl = parsed.protocol === 'https:';
  const port = parsed.port === '' ? (ssl ? 443 : 80) : Number(parsed.port);
  return { host: parsed.hostname, port, ssl };
}

/** An Error naming the store, the server, the collection and the operation that failed. */
function storeError(url: string, collection: string, op: string, error: unknown): Error {
  const name = error instanceof Error ? error.name : '';
  let message = error instanceof Error ? error.message : String(error);
  // The client's own text for a refused connection talks about browsers and CORS.
  if (name === 'ChromaConnectionError') message = `cannot reach the Chroma server at ${url} (is it running?)`;
  return new Error(`ChromaMemoryStore (${url}, collection '${collection}'): ${op} failed: ${message}`, { cause: error });
}
