/**
 * The few Prometheus metrics `ctxdedup serve` exposes: counters and one latency histogram, kept by
 * `prom-client` in a registry of the server's own (never prom-client's global default registry,
 * so two servers in one process, or an application's own metrics, do not mix).
 * @module
 */
import type * as PromClient from 'prom-client';

/** Upper bounds (seconds) of the request latency histogram. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The counters and the latency histogram of one server, in its own registry. */
export class ServerMetrics {
  /** The registry `GET /metrics` renders; register more metrics in it to expose them too. */
  readonly registry: PromClient.Registry;
  readonly #items: PromClient.Counter<'status'>;
  /** Near duplicates (also counted as duplicate in `#items`). */
  readonly #nearDuplicates: PromClient.Counter;
  readonly #batches: PromClient.Counter;
  readonly #storeErrors: PromClient.Counter;
  readonly #messagesDeduped: PromClient.Counter;
  readonly #requests: PromClient.Counter<'route' | 'method' | 'status'>;
  readonly #latency: PromClient.Histogram<'route'>;

  /** @param prom the `prom-client` module (an optional peer, loaded by the server). */
  constructor(prom: typeof PromClient) {
    const registers = [(this.registry = new prom.Registry())];
    this.#items = new prom.Counter({ name: 'ctxdedup_ingest_items_total', help: 'Items ingested, by decision.', labelNames: ['status'], registers });
    // Both decisions are exposed from the start, at 0.
    this.#items.inc({ status: 'new' }, 0);
    this.#items.inc({ status: 'duplicate' }, 0);
    this.#nearDuplicates = new prom.Counter({
      name: 'ctxdedup_ingest_near_duplicates_total',
      help: 'Items reported as near duplicates (also counted as duplicate above).',
      registers,
    });
    this.#batches = new prom.Counter({ name: 'ctxdedup_ingest_batches_total', help: 'Batches recorded.', registers });
    this.#storeErrors = new prom.Counter({ name: 'ctxdedup_store_errors_total', help: 'Batches that failed in the store (nothing recorded).', registers });
    this.#messagesDeduped = new prom.Counter({
      name: 'ctxdedup_messages_dedupe_requests_total',
      help: 'Conversations processed by POST /v1/messages/dedupe.',
      registers,
    });
    this.#requests = new prom.Counter({
      name: 'ctxdedup_http_requests_total',
      help: 'HTTP requests, by route, method and status.',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.#latency = new prom.Histogram({
      name: 'ctxdedup_http_request_duration_seconds',
      help: 'HTTP request latency.',
      labelNames: ['route'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
  }

  /** Records one finished HTTP request. */
  observeRequest(route: string, method: string, status: number, seconds: number): void {
    this.#requests.inc({ route, method, status: String(status) });
    this.#latency.observe({ route }, seconds);
  }

  /** Records one ingested batch: `fresh` new items, `duplicate` duplicates, `near` of them near ones. */
  recordBatch(fresh: number, duplicate: number, near: number): void {
    this.#items.inc({ status: 'new' }, fresh);
    this.#items.inc({ status: 'duplicate' }, duplicate);
    this.#nearDuplicates.inc(near);
    this.#batches.inc();
  }

  /** Records a batch that failed in the store. */
  recordStoreError(): void {
    this.#storeErrors.inc();
  }

  /** Records one conversation processed by `POST /v1/messages/dedupe`. */
  recordMessagesDedupe(): void {
    this.#messagesDeduped.inc();
  }

  /** The metrics in the registry's exposition format ({@link ServerMetrics.contentType}). */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** The `Content-Type` of {@link ServerMetrics.render}'s text. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
